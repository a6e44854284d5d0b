"""Stray applications (scheduler/decisions/strays.py): which live applications of closed runs a
sweep kills, and which node sweeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.backends.yarn import fence_tag, yarn_tags
from scheduler.core.backend import AppInfo, AppState
from scheduler.decisions.strays import RunView, Stray, run_ids, strays, sweeper


def _app(job: str, run_id: int, token: str, state: AppState = AppState.RUNNING, app_id: str = ""):
    app_id = app_id or f"application_1_{run_id:04d}"
    info = AppInfo(app_id, f"drover:{job}:{run_id}", state, app_id)
    return info, frozenset(yarn_tags(job, run_id, token))


def _run(job: str, run_id: int, token: str, state: str) -> RunView:
    return RunView(
        run_id, job, state, state in ("KILLED", "FINISHED", "FAILED", "LOST"), fence_tag(token)
    )


def test_a_live_application_of_a_closed_run_is_a_stray() -> None:
    apps = [_app("orders", 1, "t1"), _app("orders", 2, "t2"), _app("ads", 3, "t3")]
    runs = {
        1: _run("orders", 1, "t1", "KILLED"),  # killed, came back
        2: _run("orders", 2, "t2", "RUNNING"),  # the current run: its owner's business
        3: _run("ads", 3, "t3", "LOST"),  # fenced by a failover: superseded
    }
    assert run_ids(apps) == [1, 2, 3]
    assert strays(apps, runs) == [
        Stray("application_1_0001", "orders", 1, "KILLED", submission_id="application_1_0001"),
        Stray("application_1_0003", "ads", 3, "LOST", submission_id="application_1_0003"),
    ]


def test_another_deployments_application_is_never_touched() -> None:
    # same job name and run id in another deployment's store: its token differs
    apps = [_app("orders", 1, "their-token")]
    assert strays(apps, {1: _run("orders", 1, "our-token", "KILLED")}) == []
    # a run id of ours, but of another job
    assert strays([_app("ads", 1, "t")], {1: _run("orders", 1, "t", "KILLED")}) == []
    # unknown to our store
    assert strays([_app("orders", 9, "t")], {}) == []


def test_ended_and_unidentified_applications_are_not_strays() -> None:
    ended = _app("orders", 1, "t", AppState.KILLED)
    unnamed = (AppInfo("application_1_0002", "", AppState.RUNNING, None), frozenset())
    runs = {1: _run("orders", 1, "t", "KILLED")}
    assert strays([ended, unnamed], runs) == []


@given(
    st.text(min_size=1, max_size=20),
    st.dictionaries(
        st.sampled_from(["g1", "g2", "g3"]),
        st.lists(st.text(min_size=1, max_size=5), max_size=4),
        min_size=1,
    ),
)
def test_every_member_of_the_home_group_names_the_same_sweeper(
    cluster: str, members: dict[str, list[str]]
) -> None:
    groups = sorted(members)
    home = groups[0]
    chosen = sweeper(cluster, groups, members)
    if not members[home]:
        assert chosen is None
    else:
        assert chosen in members[home]
        # another member of the home group, whatever other groups it sees, agrees
        assert sweeper(cluster, groups, {home: list(reversed(members[home]))}) == chosen
    # a node that does not see the home group sweeps nothing
    assert sweeper(cluster, groups, {g: m for g, m in members.items() if g != home}) is None


# -- duplicates of open runs -------------------------------------------------------------------


def _open(job: str, run_id: int, token: str, recorded: str | None, *old: str) -> RunView:
    superseded = frozenset(fence_tag(t) for t in old)
    return RunView(run_id, job, "STARTING", False, fence_tag(token), recorded, superseded)


def test_a_late_application_with_a_superseded_token_of_an_open_run_is_a_duplicate() -> None:
    """The first submission's application (its token superseded by a reissue) came up late, next
    to the one the run recorded: the late one is killed, the recorded one never."""
    late = _app("orders", 1, "first-token", app_id="application_1_0009")
    recorded = _app("orders", 1, "second-token", app_id="application_1_0010")
    runs = {1: _open("orders", 1, "second-token", "application_1_0010", "first-token")}
    found = strays([late, recorded], runs)
    assert found == [
        Stray(
            "application_1_0009",
            "orders",
            1,
            "STARTING",
            submission_id="application_1_0009",
            duplicate_of="application_1_0010",
        )
    ]
    assert found[0].handle == "application_1_0009"
    assert "second live application of run 1" in found[0].reason("c1")


def test_two_applications_with_the_current_token_one_recorded() -> None:
    """Two drivers of one submission decision (the owner adopted one): the other goes."""
    apps = [_app("orders", 1, "t", app_id="a1"), _app("orders", 1, "t", app_id="a2")]
    assert [s.handle for s in strays(apps, {1: _open("orders", 1, "t", "a2")})] == ["a1"]


def test_no_duplicate_before_the_run_recorded_its_application() -> None:
    """No submission id recorded yet: the owner adopts one of them first (find)."""
    apps = [_app("orders", 1, "t", app_id="a1"), _app("orders", 1, "t", app_id="a2")]
    assert strays(apps, {1: _open("orders", 1, "t", None)}) == []


def test_another_deployments_application_with_our_run_tag_is_never_a_duplicate() -> None:
    """Same job name and run id in another deployment: none of our run's tokens, left alone."""
    theirs = _app("orders", 1, "their-token", app_id="a1")
    ours = _app("orders", 1, "t", app_id="a2")
    assert strays([theirs, ours], {1: _open("orders", 1, "t", "a2", "old")}) == []


def test_a_closed_runs_application_with_a_superseded_token_is_a_stray() -> None:
    apps = [_app("orders", 1, "old")]
    closed = RunView(
        1, "orders", "LOST", True, fence_tag("new"), "x", frozenset({fence_tag("old")})
    )
    assert [s.run_id for s in strays(apps, {1: closed})] == [1]


def test_a_standalone_driver_is_judged_by_the_fence_tag_of_its_launch_command() -> None:
    """A standalone driver's only tag is its fence tag; one without it is never touched."""
    name = "drover:orders:1"
    late = (AppInfo("driver-2", name, AppState.RUNNING, None), frozenset({fence_tag("old")}))
    untagged = (AppInfo("driver-4", name, AppState.RUNNING, None), frozenset[str]())
    recorded = (AppInfo("driver-3", name, AppState.STARTING, None), frozenset({fence_tag("t")}))
    found = strays([late, untagged, recorded], {1: _open("orders", 1, "t", "driver-3", "old")})
    assert [(s.handle, s.duplicate_of) for s in found] == [("driver-2", "driver-3")]
