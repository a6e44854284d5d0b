"""Cluster health: the state, its legal transitions, and the monitor's decision. Pure: no store,
no clock, no I/O. While a cluster is abnormal its jobs don't flap through restarts, nothing new
starts on it, and its jobs' alerts fold into the cluster's.

Every node's ClusterMonitor probes the clusters its groups use and records a **vote** per probe
(ok or failed, latency, detail). The cluster's state is a function of those votes:

    NORMAL               the cluster is usable
    VOTE_ABNORMAL        a strict majority of the live nodes that probe it see it failing (each
                         node's latest vote, if fresher than ``vote_freshness``)
    THRESHOLD_ABNORMAL   ``threshold_count`` failed votes or more (all nodes together) within the
                         last ``threshold_window`` seconds, without a failing majority
    MANUAL_ABNORMAL      set by an operator, with a reason; only an operator clears it

VOTE_ABNORMAL wins over THRESHOLD_ABNORMAL when both hold. An automatic abnormal state goes back
to NORMAL only once neither condition holds, a majority of the fresh live votes is ok (never for
lack of evidence) and no vote has failed for ``quiet_period`` seconds: a flapping cluster stays
abnormal. While a cluster is abnormal, nothing is submitted there
(``scheduler.decisions.planning``).

Legal transitions (``HEALTH_TRANSITIONS``), and who makes them::

    NORMAL              → VOTE_ABNORMAL | THRESHOLD_ABNORMAL     monitor
                        → MANUAL_ABNORMAL                        operator (mark)
    VOTE_ABNORMAL       → THRESHOLD_ABNORMAL                     monitor (the majority recovered,
                                                                 recent failures still count)
                        → NORMAL                                 monitor (after the quiet period)
                        → MANUAL_ABNORMAL                        operator (mark)
    THRESHOLD_ABNORMAL  → VOTE_ABNORMAL | NORMAL                 monitor
                        → MANUAL_ABNORMAL                        operator (mark)
    MANUAL_ABNORMAL     → MANUAL_ABNORMAL                        operator (mark again: new reason)
                        → NORMAL                                 operator (clear)

:func:`apply` is the one function that checks a change; the monitor never leaves or enters
MANUAL_ABNORMAL and the operator's clear applies to a manual mark only (an automatic state
clears itself once the cluster is quiet).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler.core.clock import iso
from scheduler.core.errors import IllegalTransition


class ClusterHealth(enum.StrEnum):
    """A cluster's health (see the module docstring)."""

    NORMAL = "NORMAL"
    VOTE_ABNORMAL = "VOTE_ABNORMAL"
    THRESHOLD_ABNORMAL = "THRESHOLD_ABNORMAL"
    MANUAL_ABNORMAL = "MANUAL_ABNORMAL"

    @property
    def is_abnormal(self) -> bool:
        return self != ClusterHealth.NORMAL

    @property
    def is_automatic(self) -> bool:
        """Decided by the monitor (not set by an operator)."""
        return self in (ClusterHealth.VOTE_ABNORMAL, ClusterHealth.THRESHOLD_ABNORMAL)


def is_abnormal(health: str) -> bool:
    """Whether a stored health value means "do not start jobs there" (unknown values do too)."""
    return health != ClusterHealth.NORMAL.value


class Decider(enum.StrEnum):
    """Who changes a cluster's health."""

    MONITOR = "monitor"
    OPERATOR = "operator"


H = ClusterHealth
HEALTH_TRANSITIONS: Mapping[Decider, Mapping[ClusterHealth, frozenset[ClusterHealth]]] = {
    Decider.MONITOR: {
        H.NORMAL: frozenset({H.VOTE_ABNORMAL, H.THRESHOLD_ABNORMAL}),
        H.VOTE_ABNORMAL: frozenset({H.THRESHOLD_ABNORMAL, H.NORMAL}),
        H.THRESHOLD_ABNORMAL: frozenset({H.VOTE_ABNORMAL, H.NORMAL}),
        H.MANUAL_ABNORMAL: frozenset(),
    },
    Decider.OPERATOR: {
        H.NORMAL: frozenset({H.MANUAL_ABNORMAL}),
        H.VOTE_ABNORMAL: frozenset({H.MANUAL_ABNORMAL}),
        H.THRESHOLD_ABNORMAL: frozenset({H.MANUAL_ABNORMAL}),
        H.MANUAL_ABNORMAL: frozenset({H.MANUAL_ABNORMAL, H.NORMAL}),
    },
}
del H


def can_apply(current: ClusterHealth, new: ClusterHealth, by: Decider) -> bool:
    return new in HEALTH_TRANSITIONS[by][current]


def apply(current: ClusterHealth, new: ClusterHealth, by: Decider) -> ClusterHealth:
    """Return ``new`` if ``by`` may change the health from ``current`` to it; else raise."""
    if not can_apply(current, new, by):
        if by == Decider.OPERATOR and new == ClusterHealth.NORMAL:
            raise IllegalTransition(
                f"the cluster is {current}: clear lifts a manual mark only; an automatic "
                "state returns to NORMAL by itself once the cluster is quiet"
            )
        raise IllegalTransition(f"the {by} cannot change cluster health from {current} to {new}")
    return new


@dataclass(frozen=True)
class Vote:
    """One node's probe of one cluster."""

    node_id: str
    at: datetime
    ok: bool
    latency_s: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class HealthPolicy:
    """The monitor's thresholds (settings ``DROVER_HEALTH_*``), in seconds."""

    #: a node's latest vote counts in the majority only if it is at most this old
    vote_freshness: float = 30.0
    #: this many failed votes within ``threshold_window`` make the cluster THRESHOLD_ABNORMAL
    threshold_count: int = 5
    threshold_window: float = 120.0
    #: no failed vote for this long before an automatic abnormal state returns to NORMAL
    quiet_period: float = 60.0

    @property
    def history_seconds(self) -> float:
        """How far back the decision looks (votes older than this can be pruned)."""
        return max(self.vote_freshness, self.threshold_window, self.quiet_period)


@dataclass(frozen=True)
class Assessment:
    """What the votes say: the state the cluster should be in, why, and the evidence."""

    state: ClusterHealth
    reason: str
    #: each live node's latest fresh vote, by node id
    live_votes: Mapping[str, Vote] = field(default_factory=dict)
    #: failed votes within the threshold window (all nodes)
    recent_failures: int = 0
    #: the last failed vote (any node), if any within the history looked at
    last_failure: datetime | None = None
    #: when an abnormal state may become NORMAL if nothing fails meanwhile
    normal_not_before: datetime | None = None

    def evidence(self) -> dict[str, object]:
        """The assessment as JSON-able evidence for the transition's event."""
        return {
            "votes": [
                {
                    "node_id": v.node_id,
                    "at": iso(v.at),
                    "ok": v.ok,
                    "latency_s": round(v.latency_s, 3),
                    "detail": v.detail,
                }
                for v in sorted(self.live_votes.values(), key=lambda v: v.node_id)
            ],
            "recent_failures": self.recent_failures,
            "last_failure": iso(self.last_failure) if self.last_failure else None,
        }


def live_votes(
    votes: Iterable[Vote], live_nodes: Collection[str], *, now: datetime, freshness: float
) -> dict[str, Vote]:
    """Each live node's latest vote, if it is at most ``freshness`` seconds old."""
    oldest = now - timedelta(seconds=freshness)
    latest: dict[str, Vote] = {}
    for vote in votes:
        if vote.node_id not in live_nodes or vote.at < oldest:
            continue
        known = latest.get(vote.node_id)
        # two votes of one node at the same instant: the failed one counts (order-independent)
        if known is None or (vote.at, not vote.ok) > (known.at, not known.ok):
            latest[vote.node_id] = vote
    return latest


def assess(
    current: ClusterHealth,
    votes: Iterable[Vote],
    live_nodes: Collection[str],
    *,
    now: datetime,
    policy: HealthPolicy,
) -> Assessment:
    """The state the votes call for (see the module docstring). ``votes``: every recorded vote
    of the cluster within ``policy.history_seconds`` (older ones are ignored); ``live_nodes``: the
    node ids membership sees alive (standalone: this node). MANUAL_ABNORMAL is kept as it is."""
    votes = [v for v in votes if v.at >= now - timedelta(seconds=policy.history_seconds)]
    live = live_votes(votes, live_nodes, now=now, freshness=policy.vote_freshness)
    window_start = now - timedelta(seconds=policy.threshold_window)
    failures = [v for v in votes if not v.ok]
    recent = sum(1 for v in failures if v.at >= window_start)
    last_failure = max((v.at for v in failures), default=None)
    failing = sorted(n for n, v in live.items() if not v.ok)

    def result(state: ClusterHealth, reason: str, not_before: datetime | None = None) -> Assessment:
        return Assessment(state, reason, live, recent, last_failure, not_before)

    if current == ClusterHealth.MANUAL_ABNORMAL:
        return result(current, "marked abnormal by an operator; only an operator clears it")
    if live and 2 * len(failing) > len(live):
        return result(
            ClusterHealth.VOTE_ABNORMAL,
            f"{len(failing)} of {len(live)} live nodes probing it see it failing "
            f"({', '.join(failing)}): {live[failing[0]].detail}",
        )
    if recent >= policy.threshold_count:
        return result(
            ClusterHealth.THRESHOLD_ABNORMAL,
            f"{recent} failed probes within {policy.threshold_window:g}s "
            f"(threshold {policy.threshold_count})",
        )
    if current == ClusterHealth.NORMAL:
        return result(current, _ok_reason(live))
    # an automatic abnormal state whose conditions no longer hold: NORMAL once quiet
    if not live:
        return result(current, "no fresh votes from live nodes: staying abnormal until they vote")
    quiet_until = (
        last_failure + timedelta(seconds=policy.quiet_period) if last_failure is not None else now
    )
    if now < quiet_until:
        return result(
            current,
            f"recovering: {len(live) - len(failing)} of {len(live)} live nodes see it ok; "
            f"NORMAL at {quiet_until.isoformat(timespec='seconds')} if no probe fails meanwhile "
            f"(quiet period {policy.quiet_period:g}s)",
            quiet_until,
        )
    return result(
        ClusterHealth.NORMAL,
        f"quiet for {policy.quiet_period:g}s: {_ok_reason(live)}",
    )


def _ok_reason(live: Mapping[str, Vote]) -> str:
    if not live:
        return "no fresh votes from live nodes"
    ok = sum(1 for v in live.values() if v.ok)
    return f"{ok} of {len(live)} live nodes probing it see it ok"


@dataclass(frozen=True)
class Decision:
    """A transition the monitor is to record (None from :func:`decide`: nothing changes)."""

    old: ClusterHealth
    new: ClusterHealth
    assessment: Assessment


def decide(
    current: ClusterHealth,
    votes: Iterable[Vote],
    live_nodes: Collection[str],
    *,
    now: datetime,
    policy: HealthPolicy,
) -> Decision | None:
    """The monitor's transition now, checked against the table; None when the state stays."""
    assessment = assess(current, votes, live_nodes, now=now, policy=policy)
    if assessment.state == current:
        return None
    apply(current, assessment.state, Decider.MONITOR)
    return Decision(current, assessment.state, assessment)


@dataclass(frozen=True)
class HealthEvent:
    """A recorded change of a cluster's health."""

    id: int
    cluster: str
    at: datetime
    from_state: ClusterHealth
    to_state: ClusterHealth
    decided_by: Decider
    #: the operator's name, or the deciding monitor's node id
    actor: str
    reason: str
    evidence: Mapping[str, object]
    node_id: str


def job_event_message(
    cluster: str, new: ClusterHealth, by: Decider, actor: str, reason: str
) -> str:
    """What the jobs on ``cluster`` record when its health changes."""
    if by == Decider.OPERATOR:
        if new == ClusterHealth.NORMAL:
            return f"cluster {cluster} cleared by {actor}" + (f": {reason}" if reason else "")
        return f"cluster {cluster} marked abnormal by {actor}: {reason}"
    return f"cluster {cluster} is {new} (decided by the monitor on {actor}): {reason}"


def abnormal_job_reason(cluster: str, health: str, reason: str) -> str:
    """The state reason of a job held because its cluster is abnormal."""
    if len(reason) > 300:
        reason = reason[:297] + "..."
    why = f" ({reason})" if reason else ""
    return (
        f"waiting: cluster {cluster} is {health}{why}; no restart there until it is NORMAL again "
        "or the job fails over"
    )
