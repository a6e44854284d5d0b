"""The pure decisions of scheduler.decisions.identity and scheduler.decisions.submission."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.decisions.identity import (
    ALL_TEAMS,
    ANONYMOUS,
    Action,
    Principal,
    Role,
    Scope,
    decide,
    default_expiry,
    may_mint,
    mint_token,
    parse_bindings,
    token_digest,
)
from scheduler.decisions.submission import artifact_allowed, property_allowed, refused_properties

teams = st.sampled_from(["ads", "web", "etl", ""])
roles = st.sampled_from(list(Role))
bindings = st.dictionaries(st.sampled_from(["ads", "web", "etl", ALL_TEAMS]), roles, max_size=3)
actions = st.sampled_from([a for a in Action if a is not Action.INTERNAL])


@given(bindings, actions, teams)
def test_a_higher_role_never_loses_a_permission(
    roles_: dict[str, Role], action: Action, team: str
) -> None:
    low = Principal("user:x", roles_)
    high = Principal("user:x", {t: Role.ADMIN for t in roles_})
    if decide(low, action, team).allowed:
        assert decide(high, action, team).allowed


@given(bindings, actions, teams, teams)
def test_roles_on_one_team_say_nothing_about_another(
    roles_: dict[str, Role], action: Action, team: str, other: str
) -> None:
    """Adding a binding on ``other`` never changes a decision about ``team``'s resources."""
    if ALL_TEAMS in roles_ or other == team or action not in (Action.JOB_READ, Action.JOB_WRITE):
        return
    base = Principal("user:x", {t: r for t, r in roles_.items() if t != other})
    more = Principal("user:x", {**base.roles, other: Role.ADMIN})
    assert decide(base, action, team).allowed == decide(more, action, team).allowed


@given(bindings, actions, teams)
def test_a_read_only_token_never_writes(roles_: dict[str, Role], action: Action, team: str) -> None:
    reader = Principal("user:x", roles_, scopes=frozenset({Scope.READ}))
    if action in (
        Action.JOB_WRITE,
        Action.CATALOG_WRITE,
        Action.CLUSTER_MARK,
        Action.TEAM_ADMIN,
        Action.PLATFORM_ADMIN,
    ):
        assert not decide(reader, action, team).allowed


@given(actions, teams)
def test_anonymous_and_nodes_get_nothing_but_their_own(action: Action, team: str) -> None:
    assert not decide(ANONYMOUS, action, team).allowed
    node = Principal("node", node=True, scopes=frozenset())
    assert not decide(node, action, team).allowed
    assert decide(node, Action.INTERNAL).allowed
    assert not decide(Principal("user:x", {ALL_TEAMS: Role.ADMIN}), Action.INTERNAL).allowed


@given(actions, teams)
def test_a_run_token_opens_fence_checks_only(action: Action, team: str) -> None:
    run = Principal("run:j/1", run_of_job="j", run_id=1, scopes=frozenset())
    assert decide(run, action, team, "j").allowed == (action is Action.JOB_FENCE)
    assert not decide(run, action, team, "k").allowed  # another job's fence: never
    assert not decide(run, action, team).allowed


def test_the_role_table() -> None:
    op = Principal("user:o", {"ads": Role.OPERATOR})
    assert decide(op, Action.JOB_WRITE, "ads").allowed
    assert not decide(op, Action.JOB_WRITE, "web").allowed
    assert decide(op, Action.CLUSTER_MARK).allowed
    assert not decide(op, Action.CATALOG_WRITE).allowed
    assert not decide(op, Action.TEAM_ADMIN, "ads").allowed
    team_admin = Principal("user:a", {"ads": Role.ADMIN})
    assert decide(team_admin, Action.TEAM_ADMIN, "ads").allowed
    assert not decide(team_admin, Action.PLATFORM_ADMIN).allowed
    root = Principal("user:r", {ALL_TEAMS: Role.ADMIN}, identity="r")
    assert all(decide(root, a, "any").allowed for a in Action if a is not Action.INTERNAL)
    # one's own tokens need a stored identity (a JWT has none), and a token that may write
    assert not decide(Principal("jwt:r", {ALL_TEAMS: Role.ADMIN}), Action.TOKEN_OWN).allowed
    reader = Principal("user:v", {"ads": Role.VIEWER}, frozenset({Scope.READ}), identity="v")
    assert not decide(reader, Action.TOKEN_OWN).allowed
    viewer = Principal("user:v", {"ads": Role.VIEWER})
    assert not decide(viewer, Action.CLUSTER_MARK).allowed
    assert decide(viewer, Action.CATALOG_READ).allowed


def test_tokens_are_random_and_stored_as_digests() -> None:
    a, b = mint_token(), mint_token()
    assert a.secret != b.secret and a.secret.startswith("drv_")
    assert a.digest == token_digest(a.secret) and a.secret not in a.digest
    assert len(a.secret) > 40


def test_bindings_from_claims() -> None:
    assert parse_bindings({"ads": "operator"}) == {"ads": Role.OPERATOR}
    assert parse_bindings(["ads:viewer", "ads:admin", "*:viewer"]) == {
        "ads": Role.ADMIN,
        "*": Role.VIEWER,
    }
    with pytest.raises(ValueError):
        parse_bindings(["ads:root"])


@pytest.mark.parametrize(
    ("location", "ok"),
    [
        ("/opt/pipelines/p.py", True),
        ("file:///opt/pipelines/sub/p.py", True),
        ("/opt/pipelines/../../etc/passwd.py", False),
        ("/opt/pipelinesX/p.py", False),
        ("p.py", False),
        ("s3a://bucket/pipelines/p.py", True),
        ("s3a://bucket/other/p.py", False),
        ("s3a://evil/pipelines/p.py", False),
        ("https://bucket/pipelines/p.py", False),
    ],
)
def test_artifact_roots(location: str, ok: bool) -> None:
    roots = ["/opt/pipelines/", "s3a://bucket/pipelines/"]
    assert artifact_allowed(location, roots) is ok


@given(st.text(alphabet="abc./", max_size=30))
def test_nothing_escapes_a_root(suffix: str) -> None:
    location = "/opt/pipelines/" + suffix
    import posixpath

    inside = posixpath.normpath(location).startswith("/opt/pipelines/") or (
        posixpath.normpath(location) == "/opt/pipelines"
    )
    assert artifact_allowed(location, ["/opt/pipelines"]) is inside


def test_spark_property_allow_list() -> None:
    allowed = ["spark.sql.*", "spark.executor.memory"]
    assert property_allowed("spark.sql.shuffle.partitions", allowed)
    assert not property_allowed("spark.driver.extraJavaOptions", allowed)
    conf = {"spark.jars": "https://x/evil.jar", "spark.executor.memory": "1g"}
    assert refused_properties(conf, allowed, admin=False) == ["spark.jars"]
    assert refused_properties(conf, allowed, admin=True) == ["spark.jars"]  # the platform's
    assert refused_properties(conf, allowed, admin=True, platform_admin=True) == []
    tuning = {"spark.network.timeout": "300s", "spark.executor.memory": "1g"}
    assert refused_properties(tuning, allowed, admin=False) == ["spark.network.timeout"]
    assert refused_properties(tuning, allowed, admin=True) == []
    assert refused_properties({"spark.drover.fencingToken": "x"}, allowed, admin=True) == [
        "spark.drover.fencingToken"
    ]


NOW = datetime(2026, 11, 25, tzinfo=UTC)
scope_sets = st.sets(st.sampled_from(list(Scope))).map(frozenset)
moments = st.one_of(
    st.none(),
    st.integers(60, 10 * 365 * 86400).map(lambda s: NOW + timedelta(seconds=s)),
)


@given(scope_sets, moments, scope_sets, moments, st.booleans())
def test_a_minted_token_never_exceeds_its_parent(
    parent_scopes: frozenset[Scope],
    parent_expiry: datetime | None,
    scopes: frozenset[Scope],
    expiry: datetime | None,
    admin: bool,
) -> None:
    parent = Principal("user:p", {"ads": Role.OPERATOR}, parent_scopes, identity="p")
    parent = replace(parent, expires_at=parent_expiry)
    decision = may_mint(parent, scopes, expiry, platform_admin=admin)
    if decision.allowed:
        assert scopes <= parent_scopes
        if expiry is None:
            assert admin and parent_expiry is None
        elif parent_expiry is not None:
            assert expiry <= parent_expiry
    else:
        assert (
            not scopes <= parent_scopes
            or (expiry is None and (not admin or parent_expiry is not None))
            or (expiry is not None and parent_expiry is not None and expiry > parent_expiry)
        )
    cut = default_expiry(parent, NOW, timedelta(days=90))
    assert cut <= NOW + timedelta(days=90)
    assert parent_expiry is None or cut <= parent_expiry
