"""The submission gate's decisions (scheduler/decisions/gate.py): rates, caps, order, fairness."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.states import Priority
from scheduler.decisions.gate import Bucket, Candidate, ClusterLoad, admit, serving_order

H, N, L = Priority.HIGH, Priority.NORMAL, Priority.LOW


def jobs(business: str, count: int, priority: Priority = N, cluster: str = "a", since: float = 0):
    return [
        Candidate(f"{business}-{i:03d}", business, priority, cluster, since + i * 0.001)
        for i in range(count)
    ]


def names(candidates: list[Candidate]) -> list[str]:
    return [c.job for c in candidates]


def test_nothing_limits_a_gate_without_quotas_or_caps() -> None:
    wanted = jobs("acme", 5) + jobs("zeta", 3)
    decided = admit(wanted, {}, {}, now=10)
    assert sorted(names(decided.admitted)) == sorted(names(wanted))
    assert decided.waiting == {} and decided.taken == {}


def test_within_a_business_high_goes_before_normal_before_low_then_the_longest_waiting() -> None:
    wanted = [
        Candidate("low-old", "acme", L, "a", 1.0),
        Candidate("normal-new", "acme", N, "a", 9.0),
        Candidate("high-new", "acme", H, "a", 8.0),
        Candidate("normal-old", "acme", N, "a", 2.0),
    ]
    assert names(serving_order(wanted)) == ["high-new", "normal-old", "normal-new", "low-old"]
    decided = admit(wanted, {"acme": Bucket(rate=1, burst=2, tokens=2, at=0)}, {}, now=0)
    assert names(decided.admitted) == ["high-new", "normal-old"]
    assert {j: w.position for j, w in decided.waiting.items()} == {"normal-new": 1, "low-old": 2}


def test_a_burst_of_one_business_does_not_delay_another() -> None:
    burst = jobs("acme", 200, since=0)
    other = jobs("zeta", 20, since=5)  # arrived later than the whole burst
    buckets = {
        "acme": Bucket(rate=10, burst=10, tokens=10, at=0),
        "zeta": Bucket(rate=10, burst=50, tokens=50, at=0),
    }
    decided = admit(burst + other, buckets, {}, now=0)
    assert len([c for c in decided.admitted if c.business == "acme"]) == 10
    assert len([c for c in decided.admitted if c.business == "zeta"]) == 20  # none waits
    assert decided.taken == {"acme": 10, "zeta": 20}
    waiting = decided.waiting["acme-010"]
    assert waiting.reason == "business acme is at its rate (10/s, burst 10)"
    assert waiting.kind == "rate" and waiting.ready_in == pytest.approx(0.1)
    assert decided.waiting["acme-011"].reason == waiting.reason  # stable: no event per tick


def test_a_full_cluster_is_shared_round_robin_between_businesses() -> None:
    wanted = jobs("acme", 10) + jobs("zeta", 2, since=1)
    decided = admit(wanted, {}, {"a": ClusterLoad(in_flight=1, max_in_flight=5)}, now=0)
    assert names(decided.admitted) == ["acme-000", "zeta-000", "acme-001", "zeta-001"]
    assert decided.waiting["acme-002"].position == 1
    assert "cluster a has 5 submissions in flight (max_concurrent_submissions 5)" in (
        decided.waiting["acme-002"].reason
    )


def test_a_cap_on_one_cluster_holds_back_only_its_jobs() -> None:
    wanted = jobs("acme", 3, cluster="a") + jobs("acme", 3, cluster="b", since=1)
    loads = {"a": ClusterLoad(running=4, max_running=4), "b": ClusterLoad()}
    decided = admit(wanted, {}, loads, now=0)
    assert {c.cluster for c in decided.admitted} == {"b"} and len(decided.admitted) == 3
    assert "max_running_apps 4" in decided.waiting["acme-000"].reason
    assert decided.waiting["acme-000"].kind == "cluster"


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = Bucket(rate=2, burst=5, tokens=0, at=100)
    assert bucket.refilled(101).available == 2
    assert bucket.refilled(1000).tokens == 5
    assert bucket.refilled(99) == bucket  # a clock that steps back adds nothing
    assert Bucket(rate=0, burst=1, tokens=0, at=0).wait_for_one() == float("inf")


def admitted_over_time(rate: float, burst: int, total: int, tick: float, until: float):
    """Tick the gate every ``tick`` seconds with ``total`` waiting jobs of one business: how many
    were admitted by each tick."""
    waiting = jobs("acme", total)
    bucket = Bucket(rate=rate, burst=burst, tokens=burst, at=0)
    admitted, counts, now = 0, [], 0.0
    while now <= until and waiting:
        decided = admit(waiting, {"acme": bucket}, {}, now)
        bucket = decided.buckets["acme"]
        gone = {c.job for c in decided.admitted}
        waiting = [c for c in waiting if c.job not in gone]
        admitted += len(gone)
        counts.append((now, admitted))
        now = round(now + tick, 6)
    return counts


def test_a_burst_of_200_is_admitted_at_the_configured_rate() -> None:
    counts = admitted_over_time(rate=20, burst=5, total=200, tick=0.1, until=20)
    # after the burst, 20 per second: 200 in (200 - 5) / 20 = 9.75 s
    done_at = next(t for t, n in counts if n == 200)
    assert abs(done_at - 9.75) <= 0.1 * 9.75
    for t, n in counts:
        assert n <= 5 + 20 * t + 1e-6  # never faster than the bucket allows


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(0.5, 50),
    burst=st.integers(1, 20),
    tick=st.sampled_from([0.05, 0.1, 0.5, 1.0]),
)
def test_never_above_the_bucket_and_never_far_below(rate: float, burst: int, tick: float) -> None:
    # more waiting jobs than the bucket can ever admit in 10 s, so the bucket is what limits
    counts = admitted_over_time(
        rate=rate, burst=burst, total=burst + int(rate * 10) + 5, tick=tick, until=10
    )
    # A bucket holds at most ``burst``: when a tick's refill plus a leftover fraction can pass
    # it, the excess is lost (token-bucket semantics), so the floor holds only below that.
    never_full = rate * tick + 1 <= burst
    for t, n in counts:
        allowed = burst + rate * t
        assert n <= allowed + 1e-6
        if never_full:
            assert n >= allowed - rate * tick - 1 - 1e-6  # a tick's worth, the token not whole


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["acme", "zeta", "moxo"]),
            st.sampled_from([H, N, L]),
            st.sampled_from(["a", "b"]),
        ),
        max_size=40,
    ),
    st.integers(0, 6),
)
def test_every_candidate_is_admitted_or_waits_with_a_position(
    spec: list[tuple[str, Priority, str]], cap: int
) -> None:
    wanted = [Candidate(f"j{i}", b, p, c, float(i)) for i, (b, p, c) in enumerate(spec)]
    decided = admit(wanted, {"acme": Bucket(1, 3, 3, 0)}, {"a": ClusterLoad(max_in_flight=cap)}, 0)
    assert sorted(names(decided.admitted) + list(decided.waiting)) == sorted(names(wanted))
    assert sorted(w.position for w in decided.waiting.values()) == list(
        range(1, len(decided.waiting) + 1)
    )
    assert sum(c.business == "acme" for c in decided.admitted) <= 3
    if cap:
        assert sum(c.cluster == "a" for c in decided.admitted) <= cap
    # within a business and cluster, nothing admitted is less urgent than something waiting
    for c in decided.admitted:
        for other in wanted:
            if other.job in decided.waiting and (other.business, other.cluster) == (
                c.business,
                c.cluster,
            ):
                assert c.order() < other.order()
