"""scheduler/decisions/selffencing.py: whether the job's current run fences itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.records import RunRecord
from scheduler.core.states import RunState
from scheduler.decisions.selffencing import CHECK_IN_GRACE_S, self_fencing, self_fencing_settles_at

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def run(
    started_ago: float | None,
    checked: bool = False,
    ended_ago: float | None = None,
    state: RunState = RunState.RUNNING,
) -> RunRecord:
    def ago(seconds: float | None) -> datetime | None:
        return None if seconds is None else NOW - timedelta(seconds=seconds)

    return RunRecord(
        id=1,
        job_name="j",
        attempt=1,
        generation=0,
        cluster="c",
        node_id="n",
        owner_epoch=0,
        fencing_token="t",
        app_name="drover:j:1",
        checkpoint_location="",
        submission_id="s",
        app_id=None,
        state=state,
        reason="",
        exit_code=None,
        created_at=NOW - timedelta(hours=1),
        submitted_at=None,
        started_at=ago(started_ago),
        ended_at=ago(ended_ago),
        fence_checked_at=NOW if checked else None,
    )


def test_table() -> None:
    grace = CHECK_IN_GRACE_S
    assert self_fencing(None, NOW) is None
    assert self_fencing(run(None), NOW) is None  # not started
    assert self_fencing(run(None, checked=True), NOW) is True  # checked in before RUNNING
    assert self_fencing(run(grace - 1), NOW) is None  # too early to tell
    assert self_fencing(run(grace), NOW) is False
    assert self_fencing(run(grace * 10, checked=True), NOW) is True
    # a closed run is judged on how long it ran
    assert self_fencing(run(grace + 5, ended_ago=10, state=RunState.KILLED), NOW) is None
    assert self_fencing(run(grace * 3, ended_ago=grace, state=RunState.KILLED), NOW) is False


@given(
    st.one_of(st.none(), st.integers(min_value=0, max_value=10_000)),
    st.booleans(),
    st.integers(min_value=0, max_value=1_000),
)
def test_a_check_in_is_always_self_fencing_and_false_needs_the_grace(
    started_ago: int | None, checked: bool, grace: int
) -> None:
    verdict = self_fencing(run(started_ago, checked), NOW, grace)
    if checked:
        assert verdict is True
    elif verdict is False:
        assert started_ago is not None and started_ago >= grace
    else:
        assert verdict is None
        assert started_ago is None or started_ago < grace


@given(
    st.one_of(st.none(), st.integers(min_value=0, max_value=10_000)),
    st.booleans(),
    st.one_of(st.none(), st.integers(min_value=0, max_value=10_000)),
    st.integers(min_value=0, max_value=1_000),
    st.lists(st.integers(min_value=-20_000, max_value=20_000), min_size=2, max_size=6),
)
def test_the_verdict_only_changes_with_time_once_it_settles(
    started_ago: int | None,
    checked: bool,
    ended_ago: int | None,
    grace: int,
    offsets: list[int],
) -> None:
    """Asked at any instants before ``self_fencing_settles_at`` (all of them, when it is None),
    the verdict on the same run is the same: what the API's memo of job documents relies on."""
    if ended_ago is not None and started_ago is not None:
        ended_ago = min(ended_ago, started_ago)
    record = run(started_ago, checked, ended_ago)
    settles = self_fencing_settles_at(record, grace)
    instants = [NOW + timedelta(seconds=o) for o in offsets]
    if settles is not None:
        instants = [t for t in instants if t < settles]
    verdicts = {self_fencing(record, t, grace) for t in instants}
    assert len(verdicts) <= 1
    if settles is not None:
        assert self_fencing(record, settles, grace) is False  # and it has changed then
