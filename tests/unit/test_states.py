"""Job states: the transition table, ``transition()`` and operator commands."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from scheduler.core.errors import Conflict, IllegalTransition
from scheduler.core.states import (
    JOB_TRANSITIONS,
    Command,
    DesiredState,
    JobState,
    RunState,
    can_transition,
    command_effect,
    transition,
)

ALL_PAIRS = list(itertools.product(JobState, JobState))
AT_REST = {JobState.STOPPED, JobState.FINISHED, JobState.FAILED}


def _reachable(start: JobState) -> set[JobState]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in JOB_TRANSITIONS[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_state_has_an_entry() -> None:
    assert set(JOB_TRANSITIONS) == set(JobState)
    for targets in JOB_TRANSITIONS.values():
        assert targets <= set(JobState)


def test_every_state_is_reachable_from_stopped_and_can_get_back_to_stopped() -> None:
    assert _reachable(JobState.STOPPED) == set(JobState)
    for state in JobState:
        assert JobState.STOPPED in _reachable(state), f"{state} can never come back to STOPPED"


def test_a_stopped_job_only_ever_goes_through_the_queue() -> None:
    assert JOB_TRANSITIONS[JobState.STOPPED] == {JobState.QUEUED}


@pytest.mark.parametrize(("current", "new"), ALL_PAIRS, ids=[f"{a}->{b}" for a, b in ALL_PAIRS])
def test_transition_follows_the_table(current: JobState, new: JobState) -> None:
    legal = new == current or new in JOB_TRANSITIONS[current]
    assert can_transition(current, new) is legal
    if legal:
        assert transition(current, new) is new
    else:
        with pytest.raises(IllegalTransition) as info:
            transition(current, new)
        assert str(current) in str(info.value) and str(new) in str(info.value)


@pytest.mark.parametrize("state", list(JobState))
def test_staying_put_is_allowed(state: JobState) -> None:
    assert transition(state, state) is state


def test_illegal_transition_is_a_conflict() -> None:
    assert issubclass(IllegalTransition, Conflict)


def test_at_rest_and_live_are_disjoint() -> None:
    assert {s for s in JobState if s.is_at_rest} == AT_REST
    assert not any(s.is_at_rest and s.has_live_run for s in JobState)
    assert not JobState.QUEUED.is_at_rest and not JobState.QUEUED.has_live_run


def test_final_run_states() -> None:
    final = {s for s in RunState if s.is_final}
    assert final == {RunState.FINISHED, RunState.FAILED, RunState.KILLED, RunState.LOST}


# -- operator commands --------------------------------------------------------------------------

COMBOS = list(itertools.product(DesiredState, JobState))
COMBO_IDS = [f"desired={d}-state={s}" for d, s in COMBOS]


@dataclass(frozen=True)
class Effect:
    """What a command does: when it is refused, the desired state it leaves, whether it bumps the
    generation or resets the attempts, and the state the job takes at once (None: the reconciler
    acts)."""

    refused: Callable[[DesiredState, JobState], bool]
    desired: DesiredState
    bump_generation: bool
    reset_attempts: bool
    state: Callable[[JobState], JobState | None]


EFFECTS = {
    # only a job at rest starts again while it is meant to run
    Command.START: Effect(
        refused=lambda d, s: d == DesiredState.RUNNING and s not in AT_REST,
        desired=DesiredState.RUNNING,
        bump_generation=False,
        reset_attempts=True,
        state=lambda s: JobState.QUEUED if s in AT_REST else None,
    ),
    # nothing to kill: stopped at once; otherwise the reconciler kills the live run
    Command.STOP: Effect(
        refused=lambda d, s: d == DesiredState.STOPPED,
        desired=DesiredState.STOPPED,
        bump_generation=False,
        reset_attempts=False,
        state=lambda s: JobState.STOPPED if s in AT_REST | {JobState.QUEUED} else None,
    ),
    Command.RESTART: Effect(
        refused=lambda d, s: d == DesiredState.STOPPED,
        desired=DesiredState.RUNNING,
        bump_generation=True,
        reset_attempts=True,
        state=lambda s: JobState.QUEUED if s in AT_REST else None,
    ),
}


@pytest.mark.parametrize("command", list(EFFECTS))
@pytest.mark.parametrize(("desired", "state"), COMBOS, ids=COMBO_IDS)
def test_command_effect(command: Command, desired: DesiredState, state: JobState) -> None:
    expected = EFFECTS[command]
    if expected.refused(desired, state):
        with pytest.raises(IllegalTransition):
            command_effect(command, desired, state)
        return
    effect = command_effect(command, desired, state)
    assert effect.desired == expected.desired
    assert effect.bump_generation is expected.bump_generation
    assert effect.reset_attempts is expected.reset_attempts
    assert effect.state == expected.state(state)


@pytest.mark.parametrize("state", [JobState.STOPPED, JobState.FAILED, JobState.FINISHED])
@pytest.mark.parametrize("desired", list(DesiredState))
def test_start_from_rest_queues_the_job(desired: DesiredState, state: JobState) -> None:
    assert command_effect(Command.START, desired, state).state == JobState.QUEUED


def test_the_state_a_command_asks_for_is_a_legal_transition() -> None:
    checked = 0
    for command, desired, state in itertools.product(Command, DesiredState, JobState):
        try:
            effect = command_effect(command, desired, state)
        except IllegalTransition:
            continue
        checked += 1
        assert effect.state is None or can_transition(state, effect.state), (
            command,
            desired,
            state,
            effect,
        )
    assert checked > 0
