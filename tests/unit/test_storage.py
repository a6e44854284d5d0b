"""``scheduler.decisions.storage``: checkpoints under their cluster's root, nothing writable
elsewhere."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scheduler.core.errors import InvalidInput, RefusedSubmission
from scheduler.decisions import storage


@dataclass(frozen=True)
class C:
    name: str
    storage_root: str


@dataclass(frozen=True)
class J:
    name: str
    checkpoint_location: str = ""


A = C("a", "file:///data/ck/a")
A2 = C("a2", "/data/ck/a2")  # a sibling whose root shares a string prefix with a's
S3 = C("s3", "s3a://ck-bucket/drover")
ALL = (A, A2, S3)


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("/data/ck", "file:///data/ck"),
        ("/data/ck/", "file:///data/ck"),
        ("file:/data//ck/./x/..", "file:///data/ck"),
        ("file:///data/ck", "file:///data/ck"),
        ("file://localhost/data/ck", "file:///data/ck"),
        ("FILE:///data/ck", "file:///data/ck"),
        ("/data/my ck/café-订单", "file:///data/my ck/café-订单"),
        ("s3a://ck-bucket", "s3a://ck-bucket"),
        ("s3a://ck-bucket/", "s3a://ck-bucket"),
        ("s3a://ck-bucket/a/b/../c/", "s3a://ck-bucket/a/c"),
        ("hdfs://NN-a:8020/drover/a/", "hdfs://nn-a:8020/drover/a"),
        ("hdfs://nameservice1/drover//a/./b/..", "hdfs://nameservice1/drover/a"),
        ("hdfs://127.0.0.1:9105", "hdfs://127.0.0.1:9105"),
    ],
)
def test_locations_are_normalised(text: str, normal: str) -> None:
    assert storage.normalise_location(text) == normal


@pytest.mark.parametrize(
    "text",
    [
        "",
        "data/ck",
        "./ck",
        "//host/ck",
        " /data",
        "/data\n",
        "/da\tta",
        "/a/../../b",
        "s3a://b/..",
        "s3://bucket/x",
        "gs://bucket/x",
        "hdfs:///x",
        "hdfs:/x",
        "hdfs://nn:99999/x",
        "hdfs://n_n/x",
        "webhdfs://nn/x",
        "file://nas/share",
        "file:relative",
        "s3a://Upper/x",
        "s3a://ab/x",
        "s3a:/bucket/x",
        "/a%20b",
        "/a?b",
        "/a#b",
        "/a\\b",
        "/a:b",
        "/" + "x" * 1100,
    ],
)
def test_bad_locations_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        storage.parse_location(text)


def test_roots_may_not_be_the_file_system_root_but_may_be_a_whole_bucket() -> None:
    with pytest.raises(InvalidInput):
        storage.normalise_root("file:///")
    assert storage.normalise_root("s3a://ck-bucket/") == "s3a://ck-bucket"


def test_default_checkpoint_is_under_the_clusters_root() -> None:
    assert storage.checkpoint_location(A, J("orders")) == "file:///data/ck/a/orders/checkpoint"
    assert storage.checkpoint_location(S3, J("café")) == "s3a://ck-bucket/drover/café/checkpoint"
    assert storage.default_checkpoint(C("b", "s3a://bkt"), "j") == "s3a://bkt/j/checkpoint"


def test_explicit_checkpoint_follows_the_job_to_another_cluster() -> None:
    job = J("orders", "/data/ck/a/teams/ads/orders")
    assert storage.checkpoint_location(A, job, ALL) == "file:///data/ck/a/teams/ads/orders"
    # failed over from a to s3: same path relative to the root, under s3's root
    assert storage.checkpoint_location(S3, job, ALL) == "s3a://ck-bucket/drover/teams/ads/orders"
    with pytest.raises(InvalidInput):
        storage.checkpoint_location(S3, job)  # without the clusters it cannot be placed
    with pytest.raises(InvalidInput, match="outside every"):
        storage.checkpoint_location(A, J("j", "/elsewhere/j"), ALL)
    with pytest.raises(InvalidInput):  # the root itself is no job's directory
        storage.checkpoint_location(S3, J("j", "/data/ck/a"), ALL)


def test_check_writable() -> None:
    assert storage.check_writable("/data/ck/a/j/", A, ALL) == "file:///data/ck/a/j"
    with pytest.raises(InvalidInput, match="cluster 'a2'"):
        storage.check_writable("/data/ck/a2/j", A, ALL)
    with pytest.raises(InvalidInput, match="cluster 'a2'"):
        storage.check_writable("/data/ck/a/../a2/j", A, ALL)  # .. cannot sneak into a2
    with pytest.raises(InvalidInput, match="must lie under"):
        storage.check_writable("/data/ck/a", A, ALL)
    with pytest.raises(InvalidInput, match="must lie under"):
        storage.check_writable("s3a://other-bucket/x", A, ALL)


def test_readable_roots_and_check_readable() -> None:
    assert storage.readable_roots(S3, ALL) == (
        "s3a://ck-bucket/drover",
        "file:///data/ck/a",
        "file:///data/ck/a2",
    )
    assert storage.check_readable("/data/ck/a2/x", ALL) == "file:///data/ck/a2/x"
    with pytest.raises(InvalidInput):
        storage.check_readable("/data/ck/a3/x", ALL)


def test_overlapping_roots() -> None:
    assert storage.overlapping_root("/data/ck/a/sub", ALL) == A
    assert storage.overlapping_root("/data", ALL) == A
    assert storage.overlapping_root("file:/data/ck/a2/", [A2]) == A2
    assert storage.overlapping_root("/data/ck/a3", ALL) is None
    assert storage.overlapping_root("s3a://ck-bucket/drover2", ALL) is None
    assert storage.overlapping_root("s3a://ck-bucket", ALL) == S3


# -- properties -----------------------------------------------------------------------------------

segment = st.sampled_from(["a", "a2", "root", "root2", "x", "é", "订", "..", ".", ""])
paths = st.lists(segment, min_size=0, max_size=8).map(lambda parts: "/" + "/".join(parts))
roots = st.lists(st.sampled_from(["a", "a2", "root", "root2"]), min_size=1, max_size=3).map(
    lambda parts: "/" + "/".join(parts)
)


def _parse_or_none(text: str) -> storage.Location | None:
    try:
        return storage.parse_location(text)
    except InvalidInput:
        return None


@given(paths, st.sampled_from(["", "/", "//", "/."]))
def test_normalising_is_idempotent_and_ignores_trailing_slashes(path: str, tail: str) -> None:
    if path.startswith("//"):  # Hadoop would read a host there: refused
        assert _parse_or_none(path) is None
        return
    location = _parse_or_none(path)
    assume(location is not None)
    assert location is not None
    again = storage.parse_location(str(location))
    assert again == location
    if not (path + tail).startswith("//"):
        assert storage.parse_location(path + tail) == location
    assert storage.parse_location("file:" + path) == location
    assert ".." not in location.parts and "." not in location.parts and "" not in location.parts


@given(paths, roots, roots)
def test_a_path_is_writable_for_at_most_one_cluster(path: str, root_a: str, root_b: str) -> None:
    a, b = C("a", root_a), C("b", root_b)
    assume(storage.overlapping_root(root_a, [b]) is None)  # the store refuses nested roots
    assume(_parse_or_none(path) is not None)
    writable = []
    for cluster in (a, b):
        try:
            storage.check_writable(path, cluster, (a, b))
            writable.append(cluster.name)
        except InvalidInput:
            pass
    assert len(writable) <= 1
    location = storage.parse_location(path)
    for cluster in (a, b):
        root = storage.parse_location(cluster.storage_root)
        # whole-segment containment: /a/root2 is never inside /a/root
        inside = location.parts[: len(root.parts)] == root.parts and location != root
        assert (cluster.name in writable) == inside


@given(st.sampled_from(["orders", "café-订单", "a.b_c-d", "x" * 128]), roots)
def test_default_checkpoints_are_writable_for_their_own_cluster_only(name: str, root: str) -> None:
    own, other = C("own", root), C("other", "s3a://elsewhere/x")
    location = storage.checkpoint_location(own, J(name))
    assert storage.check_writable(location, own, (own, other)) == location
    with pytest.raises(InvalidInput):
        storage.check_writable(location, other, (own, other))


def test_a_jobs_own_area() -> None:
    assert storage.check_writable("/data/ck/a/j/v2", A, ALL, job="j") == "file:///data/ck/a/j/v2"
    assert storage.check_writable("/data/ck/a/j", A, ALL, job="j") == "file:///data/ck/a/j"
    for elsewhere in ("/data/ck/a/k/checkpoint", "/data/ck/a/j2", "/data/ck/a/shared/j"):
        with pytest.raises(RefusedSubmission, match="own directory"):
            storage.check_writable(elsewhere, A, ALL, job="j")
        assert storage.check_writable(elsewhere, A, ALL)  # a platform admin's choice
    with pytest.raises(RefusedSubmission):
        storage.check_writable("/data/ck/a/j/../k", A, ALL, job="j")  # normalised first


def test_checkpoint_keys_and_overlaps() -> None:
    assert storage.checkpoint_key("j", "", ALL) == ("j", "checkpoint")
    assert storage.checkpoint_key("j", "file:///data/ck/a2/x/y", ALL) == ("x", "y")
    assert storage.checkpoint_key("j", "s3a://ck-bucket/drover/x", ALL) == ("x",)
    assert storage.checkpoint_key("j", "/elsewhere/x", ALL) is None
    assert storage.overlap(("j", "checkpoint"), ("j", "checkpoint"))
    assert storage.overlap(("j",), ("j", "checkpoint"))
    assert storage.overlap(("j", "checkpoint", "offsets"), ("j", "checkpoint"))
    assert not storage.overlap(("j", "checkpoint"), ("j", "other"))
    assert not storage.overlap(("j", "checkpoint"), ("jj", "checkpoint"))
    others = [("x", None), ("k", ("k", "checkpoint")), ("m", ("j", "m"))]
    assert storage.first_overlap(("j", "checkpoint"), others) is None
    assert storage.first_overlap(("j",), others) == "m"
    assert storage.checkpoint_area(("shared", "x")) == "shared"
    with pytest.raises(InvalidInput):
        storage.checkpoint_area(("x" * 256,))


job_names = st.text(alphabet="abj.-_", min_size=1, max_size=6).filter(
    lambda n: n not in (".", "..")
)


@given(job_names, job_names, st.lists(st.sampled_from(["x", "y", ".", ".."]), max_size=4))
def test_jobs_in_their_own_areas_never_overlap(a: str, b: str, tail: list[str]) -> None:
    """Whatever two different jobs choose inside their own areas, the keys never overlap: the
    store needs to look overlaps up only for locations a platform admin placed."""
    assume(a != b)
    try:
        mine = storage.check_writable("/data/ck/a/" + "/".join([a, *tail]), A, ALL, job=a)
    except InvalidInput:
        return
    key_a = storage.checkpoint_key(a, mine, ALL)
    for key_b in (storage.checkpoint_key(b, "", ALL), (b, *tail)):
        assert key_a is not None and not storage.overlap(key_a, key_b)
