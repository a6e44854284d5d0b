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
        Stray("application_1_0001", "orders", 1, "KILLED"),
        Stray("application_1_0003", "ads", 3, "LOST"),
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
