"""Cluster health: the transition table, ``apply()`` and the monitor's decision (pure)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.errors import Conflict, IllegalTransition
from scheduler.decisions.health import (
    HEALTH_TRANSITIONS,
    ClusterHealth,
    Decider,
    HealthPolicy,
    Vote,
    apply,
    assess,
    can_apply,
    decide,
    live_votes,
)

H = ClusterHealth
NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
POLICY = HealthPolicy(vote_freshness=10, threshold_count=4, threshold_window=60, quiet_period=30)
NODES = ("n1", "n2", "n3")


def vote(node: str, ago: float, ok: bool, detail: str = "") -> Vote:
    return Vote(node, NOW - timedelta(seconds=ago), ok, 0.01, detail or ("ok" if ok else "down"))


# -- the table ----------------------------------------------------------------------------------


def test_every_state_has_an_entry_for_each_decider() -> None:
    for by in Decider:
        assert set(HEALTH_TRANSITIONS[by]) == set(ClusterHealth)


def test_the_monitor_never_enters_or_leaves_a_manual_mark() -> None:
    table = HEALTH_TRANSITIONS[Decider.MONITOR]
    assert table[H.MANUAL_ABNORMAL] == frozenset()
    assert all(H.MANUAL_ABNORMAL not in targets for targets in table.values())


def test_the_operator_only_marks_and_clears_a_manual_mark() -> None:
    table = HEALTH_TRANSITIONS[Decider.OPERATOR]
    for state, targets in table.items():
        assert H.MANUAL_ABNORMAL in targets
        assert (H.NORMAL in targets) == (state == H.MANUAL_ABNORMAL)
    assert all(not t.is_automatic for targets in table.values() for t in targets), (
        "an operator never sets an automatic state"
    )


@pytest.mark.parametrize(
    ("old", "new", "by"), list(itertools.product(ClusterHealth, ClusterHealth, Decider))
)
def test_apply_agrees_with_the_table(old: H, new: H, by: Decider) -> None:
    if can_apply(old, new, by):
        assert apply(old, new, by) == new
    else:
        with pytest.raises(IllegalTransition):
            apply(old, new, by)


def test_clearing_an_automatic_state_is_a_conflict_that_says_why() -> None:
    with pytest.raises(Conflict, match="clear lifts a manual mark only"):
        apply(H.VOTE_ABNORMAL, H.NORMAL, Decider.OPERATOR)


# -- the decision: examples ---------------------------------------------------------------------


def test_a_majority_of_failing_live_votes_is_vote_abnormal() -> None:
    votes = [vote("n1", 1, False, "readyz refused"), vote("n2", 2, False), vote("n3", 1, True)]
    result = assess(H.NORMAL, votes, NODES, now=NOW, policy=POLICY)
    assert result.state == H.VOTE_ABNORMAL
    assert "2 of 3 live nodes" in result.reason and "readyz refused" in result.reason


def test_half_is_not_a_majority() -> None:
    votes = [vote("n1", 1, False), vote("n2", 1, True)]
    assert assess(H.NORMAL, votes, ("n1", "n2"), now=NOW, policy=POLICY).state == H.NORMAL


def test_votes_of_dead_nodes_and_stale_votes_do_not_count_in_the_majority() -> None:
    votes = [
        vote("gone", 1, False),
        vote("n1", 20, False),
        vote("n1", 30, False),
        vote("n2", 1, True),
    ]
    result = assess(H.NORMAL, votes, ("n1", "n2"), now=NOW, policy=POLICY)
    assert set(result.live_votes) == {"n2"}
    assert result.state == H.NORMAL


def test_a_nodes_latest_vote_is_the_one_that_counts() -> None:
    votes = [vote("n1", 5, False), vote("n1", 1, True)]
    assert live_votes(votes, {"n1"}, now=NOW, freshness=10)["n1"].ok


def test_failures_over_the_threshold_within_the_window_are_threshold_abnormal() -> None:
    # the latest votes are ok, but 4 probes failed in the last minute
    votes = [vote("n1", a, False) for a in (15, 25, 35, 45)] + [vote("n1", 1, True)]
    result = assess(H.NORMAL, votes, ("n1",), now=NOW, policy=POLICY)
    assert result.state == H.THRESHOLD_ABNORMAL
    assert result.recent_failures == 4


def test_failures_outside_the_window_do_not_count() -> None:
    votes = [vote("n1", a, False) for a in (15, 25, 35, 65)] + [vote("n1", 1, True)]
    assert assess(H.NORMAL, votes, ("n1",), now=NOW, policy=POLICY).state == H.NORMAL


def test_recovery_waits_for_the_quiet_period() -> None:
    votes = [vote("n1", 20, False), vote("n1", 1, True), vote("n2", 1, True)]
    result = assess(H.VOTE_ABNORMAL, votes, ("n1", "n2"), now=NOW, policy=POLICY)
    assert result.state == H.VOTE_ABNORMAL
    assert result.normal_not_before == NOW + timedelta(seconds=10)
    assert "recovering" in result.reason
    later = assess(
        H.VOTE_ABNORMAL,
        [vote("n1", 31, False), vote("n1", 1, True), vote("n2", 1, True)],
        ("n1", "n2"),
        now=NOW,
        policy=POLICY,
    )
    assert later.state == H.NORMAL and "quiet for 30s" in later.reason


def test_no_fresh_votes_never_clear_an_abnormal_state() -> None:
    result = assess(H.VOTE_ABNORMAL, [vote("n1", 300, False)], NODES, now=NOW, policy=POLICY)
    assert result.state == H.VOTE_ABNORMAL


def test_a_manual_mark_stays_whatever_the_votes_say() -> None:
    votes = [vote(n, 1, True) for n in NODES]
    assert decide(H.MANUAL_ABNORMAL, votes, NODES, now=NOW, policy=POLICY) is None


def test_decide_returns_the_transition_with_its_evidence() -> None:
    votes = [vote(n, 1, False, "no answer") for n in NODES]
    decision = decide(H.NORMAL, votes, NODES, now=NOW, policy=POLICY)
    assert decision is not None
    assert (decision.old, decision.new) == (H.NORMAL, H.VOTE_ABNORMAL)
    evidence = decision.assessment.evidence()
    assert [v["node_id"] for v in evidence["votes"]] == list(NODES)  # type: ignore[union-attr]
    assert evidence["recent_failures"] == 3


# -- the decision: properties -------------------------------------------------------------------

votes_strategy = st.lists(
    st.builds(
        vote,
        st.sampled_from(("n1", "n2", "n3", "n4")),
        st.floats(min_value=0, max_value=200, allow_nan=False),
        st.booleans(),
    ),
    max_size=30,
)
live_strategy = st.sets(st.sampled_from(("n1", "n2", "n3", "n4")))
policy_strategy = st.builds(
    HealthPolicy,
    vote_freshness=st.floats(min_value=1, max_value=60),
    threshold_count=st.integers(min_value=1, max_value=10),
    threshold_window=st.floats(min_value=1, max_value=120),
    quiet_period=st.floats(min_value=0, max_value=120),
)


def every_situation(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` on 300 situations: any current state, votes, live nodes and policy (the
    inputs of one decision)."""
    situations = given(
        st.sampled_from(ClusterHealth), votes_strategy, live_strategy, policy_strategy
    )
    return settings(max_examples=300)(situations(test))


@every_situation
def test_every_decision_is_a_legal_monitor_transition(
    current: H, votes: list[Vote], live: set[str], policy: HealthPolicy
) -> None:
    decision = decide(current, votes, live, now=NOW, policy=policy)
    if decision is not None:
        assert can_apply(current, decision.new, Decider.MONITOR)


@every_situation
def test_the_state_follows_the_rules(
    current: H, votes: list[Vote], live: set[str], policy: HealthPolicy
) -> None:
    result = assess(current, votes, live, now=NOW, policy=policy)
    fresh = live_votes(votes, live, now=NOW, freshness=policy.vote_freshness)
    failing = [v for v in fresh.values() if not v.ok]
    if current == H.MANUAL_ABNORMAL:
        assert result.state == H.MANUAL_ABNORMAL
    elif fresh and 2 * len(failing) > len(fresh):
        assert result.state == H.VOTE_ABNORMAL
    elif result.state == H.NORMAL and current.is_abnormal:
        # back to NORMAL only with fresh evidence, after the quiet period
        assert fresh
        quiet_since = NOW - timedelta(seconds=policy.quiet_period)
        assert all(v.ok or v.at <= quiet_since for v in votes)


@settings(max_examples=200)
@given(votes_strategy, live_strategy, policy_strategy)
def test_no_failure_ever_seen_means_normal(
    votes: list[Vote], live: set[str], policy: HealthPolicy
) -> None:
    ok_votes = [Vote(v.node_id, v.at, True) for v in votes]
    assert assess(H.NORMAL, ok_votes, live, now=NOW, policy=policy).state == H.NORMAL


@settings(max_examples=200)
@given(votes_strategy, st.sampled_from(ClusterHealth), policy_strategy)
def test_the_decision_does_not_depend_on_the_order_of_the_votes(
    votes: list[Vote], current: H, policy: HealthPolicy
) -> None:
    live = {"n1", "n2", "n3"}
    forward = assess(current, votes, live, now=NOW, policy=policy)
    backward = assess(current, list(reversed(votes)), live, now=NOW, policy=policy)
    assert (forward.state, forward.recent_failures) == (backward.state, backward.recent_failures)


@settings(max_examples=100)
@given(policy_strategy, st.integers(min_value=1, max_value=5))
def test_a_flapping_cluster_stays_abnormal(policy: HealthPolicy, flaps: int) -> None:
    """A cluster failing once every ``quiet_period / 2`` never becomes NORMAL again."""
    policy = replace(policy, quiet_period=max(policy.quiet_period, 2.0))
    state = H.VOTE_ABNORMAL
    step = policy.quiet_period / 2
    votes: list[Vote] = []
    for i in range(flaps * 4):
        now = NOW + timedelta(seconds=i * step / 2)
        ok = i % 2 == 1
        votes.append(Vote("n1", now, ok))
        if i > 0:
            result = assess(state, votes, {"n1"}, now=now, policy=policy)
            if result.state == H.NORMAL:
                pytest.fail(f"NORMAL at step {i} although a probe failed {step / 2}s before")
            state = result.state
