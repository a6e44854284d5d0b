"""Ownership (``owner(job) = pool[crc32(utf8(name)) % len(pool)]``): the shared test vectors,
then the takeover rules as properties."""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.ownership import Member, claim_for, name_crc32, owner_index, owner_of, pool_of

#: the project's copy of the shared vectors, so that a clone anywhere runs them ...
VECTORS = Path(__file__).parents[1] / "vectors" / "ownership.json"
#: ... and the shared originals, next to the checkout (as CI and the team's machines have them)
SHARED_VECTORS = Path(__file__).parents[3] / "shared" / "vectors" / "ownership.json"


def _load_vectors(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


_VECTORS = _load_vectors(VECTORS)
CASES: list[dict[str, Any]] = _VECTORS["cases"] if _VECTORS else []
POOL_EXAMPLES: list[dict[str, Any]] = _VECTORS.get("pool_examples", []) if _VECTORS else []


def test_vectors_file_is_present_and_not_empty() -> None:
    assert _VECTORS is not None, f"ownership test vectors missing: expected {VECTORS}"
    assert CASES, f"{VECTORS} holds no cases"


def test_the_copy_of_the_vectors_is_the_shared_one_where_that_is_present() -> None:
    """Where the shared vectors sit next to the checkout, the project's copy must be them,
    unchanged; a clone elsewhere has only the copy (and says so here)."""
    shared = _load_vectors(SHARED_VECTORS)
    if shared is None:
        assert _VECTORS is not None and not SHARED_VECTORS.exists(), SHARED_VECTORS
        return
    assert _VECTORS == shared, f"{VECTORS} differs from {SHARED_VECTORS}: copy it again"


@pytest.mark.parametrize("case", CASES, ids=[c["job"] for c in CASES])
def test_vector_crc32(case: dict[str, Any]) -> None:
    assert name_crc32(case["job"]) == case["crc32"]


@pytest.mark.parametrize("case", CASES, ids=[c["job"] for c in CASES])
def test_vector_owner_index(case: dict[str, Any]) -> None:
    assert case["owner_index"], f"case {case['job']!r} lists no pool sizes"
    got = {size: owner_index(case["job"], int(size)) for size in case["owner_index"]}
    assert got == case["owner_index"]


@pytest.mark.parametrize("example", POOL_EXAMPLES)
def test_vector_pool_examples(example: dict[str, Any]) -> None:
    members = [Member(node_id, "active") for node_id in example["pool_unsorted"]]
    assert owner_of(example["job"], pool_of(members)) == example["owner"]


def test_empty_pool_owns_nothing() -> None:
    assert pool_of([]) == ()
    assert owner_of("orders-enrich", ()) is None
    with pytest.raises(ValueError):
        owner_index("orders-enrich", 0)


def test_members_with_another_role_never_own() -> None:
    assert pool_of([Member("n1", "observer")]) == ()
    assert pool_of([Member("n1", "observer"), Member("n2", "backup")]) == ("n2",)


# -- properties ---------------------------------------------------------------------------------

node_ids = st.text(alphabet="abcdefgh-0123456789", min_size=1, max_size=8)
roles = st.sampled_from(["active", "backup"])


@st.composite
def member_lists(
    draw: st.DrawFn, *, min_active: int = 0, min_backup: int = 0, only: str | None = None
) -> list[Member]:
    """1–8 members with distinct node ids, at least ``min_active``/``min_backup`` of each role."""
    forced = min_active + min_backup
    ids = draw(st.lists(node_ids, min_size=max(1, forced), max_size=8, unique=True))
    chosen = ["active"] * min_active + ["backup"] * min_backup
    chosen += [only or draw(roles) for _ in ids[forced:]]
    return draw(st.permutations([Member(i, r) for i, r in zip(ids, chosen, strict=True)]))


job_names = st.text(min_size=1, max_size=40)
job_name_lists = st.lists(job_names, min_size=1, max_size=20)


def _ids(members: list[Member], role: str) -> list[str]:
    return sorted(m.node_id for m in members if m.role == role)


def _owners(names: list[str], members: list[Member]) -> list[str | None]:
    pool = pool_of(members)
    return [owner_of(name, pool) for name in names]


@given(job_names)
def test_crc32_is_zlib_crc32_of_utf8(name: str) -> None:
    expected = zlib.crc32(name.encode("utf-8"))
    assert name_crc32(name) == expected
    assert 0 <= name_crc32(name) < 2**32


@given(job_names, st.integers(min_value=1, max_value=1000))
def test_owner_index_is_in_range(name: str, size: int) -> None:
    assert 0 <= owner_index(name, size) < size
    assert owner_index(name, size) == zlib.crc32(name.encode("utf-8")) % size


@given(member_lists(), job_name_lists)
def test_pool_is_sorted_actives_else_sorted_backups(
    members: list[Member], names: list[str]
) -> None:
    active, backup = _ids(members, "active"), _ids(members, "backup")
    pool = pool_of(members)
    assert list(pool) == (active if active else backup)
    for name in names:
        owner = owner_of(name, pool)
        assert owner is not None
        assert pool.count(owner) == 1


@given(member_lists(), job_name_lists, st.randoms(use_true_random=False))
def test_owner_does_not_depend_on_member_order(
    members: list[Member], names: list[str], rnd: random.Random
) -> None:
    shuffled = list(members)
    rnd.shuffle(shuffled)
    assert pool_of(shuffled) == pool_of(members)
    assert _owners(names, shuffled) == _owners(names, members)


@given(
    member_lists(min_active=1),
    job_name_lists,
    node_ids,
)
def test_backup_joining_while_an_active_is_alive_changes_nothing(
    members: list[Member], names: list[str], newcomer: str
) -> None:
    if newcomer in {m.node_id for m in members}:
        newcomer = newcomer + "-new"
    joined = [*members, Member(newcomer, "backup")]
    assert _owners(names, joined) == _owners(names, members)


@given(
    member_lists(min_active=1, min_backup=1),
    job_name_lists,
    st.data(),
)
def test_backup_lost_while_an_active_is_alive_changes_nothing(
    members: list[Member], names: list[str], data: st.DataObject
) -> None:
    lost = data.draw(st.sampled_from([m for m in members if m.role == "backup"]))
    remaining = [m for m in members if m != lost]
    assert _owners(names, remaining) == _owners(names, members)


@given(
    member_lists(min_backup=1),
    job_name_lists,
)
def test_all_actives_lost_backups_take_every_job(members: list[Member], names: list[str]) -> None:
    survivors = [m for m in members if m.role == "backup"]
    backups = set(_ids(members, "backup"))
    owners = _owners(names, survivors)
    assert all(owner in backups for owner in owners)
    # the backups balance among themselves exactly as an all-backup pool would
    assert owners == [owner_of(n, tuple(sorted(backups))) for n in names]


@given(
    member_lists(min_active=2),
    job_name_lists,
    st.data(),
)
def test_some_actives_lost_the_remaining_actives_share_the_jobs(
    members: list[Member], names: list[str], data: st.DataObject
) -> None:
    actives = [m for m in members if m.role == "active"]
    lost = data.draw(st.sampled_from(actives))
    remaining = [m for m in members if m != lost]
    still_active = set(_ids(remaining, "active"))
    assert all(owner in still_active for owner in _owners(names, remaining))


@given(
    member_lists(min_backup=1, only="backup"),
    job_name_lists,
    node_ids,
)
def test_active_joining_when_none_alive_takes_everything_back(
    members: list[Member], names: list[str], newcomer: str
) -> None:
    if newcomer in {m.node_id for m in members}:
        newcomer = newcomer + "-new"
    joined = [*members, Member(newcomer, "active")]
    assert _owners(names, joined) == [newcomer] * len(names)


@given(member_lists(), job_name_lists, st.integers(min_value=0, max_value=2**40))
def test_every_job_has_exactly_one_owner_for_any_membership(
    members: list[Member], names: list[str], epoch: int
) -> None:
    """The claims every member computes from one view partition the jobs: one owner each."""
    claims = [c for m in members if (c := claim_for("g", m.node_id, members, epoch)) is not None]
    assert len(claims) == len(pool_of(members)) >= 1
    assert sorted(c.index for c in claims) == list(range(len(claims)))
    for name in names:
        holders = [c.fence.node_id for c in claims if name_crc32(name) % c.size == c.index]
        assert holders == [owner_of(name, pool_of(members))]
    assert all(c.fence.epoch == epoch and c.valid(0.0) for c in claims)
