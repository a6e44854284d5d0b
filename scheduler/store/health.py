"""Cluster health in the store: the monitor's votes, the health state and its transitions.

The cluster's ``health`` column is written only here, always as a conditional write on the state
the change was decided from (two nodes deciding at once record one transition; the other gets
StaleWrite): by :func:`record_decision` (the monitor's decision) and by :func:`operator_change`
(an operator). Every transition is a ``cluster_health_events`` row with its evidence, and a
job event for each job on the cluster. Each function takes a session; the caller owns the
transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import InvalidInput, StaleWrite
from scheduler.decisions.health import (
    ClusterHealth,
    Decider,
    Decision,
    HealthEvent,
    Vote,
    apply,
    job_event_message,
)
from scheduler.store import journal
from scheduler.store.catalog import load_cluster
from scheduler.store.models import (
    Cluster,
    ClusterHealthEvent,
    ClusterVote,
    Group,
    Job,
)

CAUSE = "cluster-health"
#: the longest operator reason kept
MAX_REASON_LENGTH = 2000
_DETAIL_LENGTH = 1000


def record_vote(session: Session, cluster: str, vote: Vote) -> None:
    session.add(
        ClusterVote(
            cluster_name=cluster,
            node_id=vote.node_id,
            at=vote.at,
            ok=vote.ok,
            latency_s=vote.latency_s,
            detail=vote.detail[:_DETAIL_LENGTH],
        )
    )


def votes_since(session: Session, cluster: str, since: datetime) -> list[Vote]:
    """Every vote on ``cluster`` at or after ``since``, oldest first."""
    rows = session.scalars(
        select(ClusterVote)
        .where(ClusterVote.cluster_name == cluster, ClusterVote.at >= since)
        .order_by(ClusterVote.at, ClusterVote.id)
    )
    return [Vote(r.node_id, r.at, r.ok, r.latency_s, r.detail) for r in rows]


def prune_votes(session: Session, before: datetime) -> int:
    """Forget votes older than ``before`` (no decision looks at them any more)."""
    result = session.execute(delete(ClusterVote).where(ClusterVote.at < before))
    return int(getattr(result, "rowcount", 0) or 0)


def health_of(session: Session, cluster: str) -> tuple[ClusterHealth, str, datetime | None]:
    """The cluster's stored health, its reason and since when (NotFound for no such cluster)."""
    row = load_cluster(session, cluster)
    return _health(row.health), row.health_reason or "", row.health_since


def _health(value: str) -> ClusterHealth:
    try:
        return ClusterHealth(value)
    # an unknown stored value is abnormal (see scheduler.decisions.health.is_abnormal)
    except ValueError:
        return ClusterHealth.MANUAL_ABNORMAL


def record_decision(
    session: Session, cluster: str, decision: Decision, *, node_id: str, now: datetime
) -> HealthEvent:
    """Write the monitor's decision if the cluster is still in ``decision.old``.

    Raises StaleWrite when another node (or an operator) changed the health first: the caller's
    transaction rolls back and the monitor decides again next round.
    """
    return _write_transition(
        session,
        cluster,
        decision.old,
        decision.new,
        Decider.MONITOR,
        actor=node_id,
        reason=decision.assessment.reason,
        stored_reason=decision.assessment.reason,
        evidence=decision.assessment.evidence(),
        node_id=node_id,
        at=now,
    )


#: what an operator may set a cluster's health to: a manual mark (MANUAL_ABNORMAL, again to
#: change the reason) and its lifting (NORMAL, IllegalTransition from any state but the mark)
OPERATOR_STATES = (ClusterHealth.MANUAL_ABNORMAL, ClusterHealth.NORMAL)


def operator_change(
    session: Session,
    cluster: str,
    new: ClusterHealth,
    *,
    reason: str,
    actor: str,
    node_id: str,
    acting_as: str = "",
) -> HealthEvent:
    """An operator marks the cluster MANUAL_ABNORMAL (a reason is required) or lifts the mark
    (``new`` NORMAL).

    ``acting_as``: the operator as every team sees it in the reason and the jobs' events
    (``identity.acting_as``: the team whose operator it is); ``actor`` by default."""
    if new not in OPERATOR_STATES:
        allowed = " or ".join(OPERATOR_STATES)
        raise InvalidInput(f"an operator sets a cluster's health to {allowed}, not {new}")
    reason = _reason(reason, required=new is ClusterHealth.MANUAL_ABNORMAL)
    shown = acting_as or actor
    row = load_cluster(session, cluster)
    old = _health(row.health)
    apply(old, new, Decider.OPERATOR)
    previous_reason = row.health_reason or ""
    stored = f"marked abnormal by {shown}: {reason}" if new.is_abnormal else f"cleared by {shown}"
    return _write_transition(
        session,
        cluster,
        old,
        new,
        Decider.OPERATOR,
        actor=actor,
        reason=reason,
        stored_reason=stored,
        shown=shown,
        evidence={"reason": reason, "previous_reason": previous_reason},
        node_id=node_id,
        at=utcnow(),
    )


def _reason(reason: str, *, required: bool) -> str:
    reason = " ".join(reason.split())
    if required and not reason:
        raise InvalidInput("a reason is required")
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidInput(f"the reason must be at most {MAX_REASON_LENGTH} characters")
    return reason


def _write_transition(
    session: Session,
    cluster: str,
    old: ClusterHealth,
    new: ClusterHealth,
    by: Decider,
    *,
    actor: str,
    reason: str,
    stored_reason: str,
    evidence: dict[str, object],
    node_id: str,
    at: datetime,
    shown: str = "",
) -> HealthEvent:
    """The jobs' events, then the conditional write of the health, then the health event.

    Lock order (MariaDB): a job event's foreign key share-locks its job row, a write of the
    cluster row locks that row; the reconciler locks a job row and then (changing the job's
    cluster) share-locks a cluster row. Taking the job rows first here keeps one order: no
    deadlock between a health change and a reconcile tick, nor between two nodes deciding at
    once (the second waits on the cluster row, then finds the state moved: StaleWrite).
    """
    message = job_event_message(cluster, new, by, shown or actor, reason)
    for job in jobs_on(session, cluster):
        journal.add_event(
            session, job, job.current_run_id, None, cause=CAUSE, message=message, node_id=node_id
        )
    session.flush()
    changed = session.execute(
        update(Cluster)
        .where(Cluster.name == cluster, Cluster.health == old.value)
        .values(health=new.value, health_reason=stored_reason, health_since=at)
        .execution_options(synchronize_session=False)
    )
    if getattr(changed, "rowcount", 0) != 1:
        raise StaleWrite(f"the health of cluster {cluster!r} changed meanwhile (was {old})")
    event = ClusterHealthEvent(
        cluster_name=cluster,
        at=at,
        from_state=old.value,
        to_state=new.value,
        decided_by=by.value,
        actor=actor,
        reason=reason,
        evidence=evidence,
        node_id=node_id,
    )
    session.add(event)
    session.flush()
    return _event_record(event)


def jobs_on(session: Session, cluster: str) -> list[Job]:
    """Jobs bound to ``cluster``: their own cluster, or their group's primary when they have
    none (a stopped job too: its history says why it did not start there)."""
    primary_of = select(Group.name).where(Group.primary_cluster == cluster)
    stmt = (
        select(Job)
        .where(
            (Job.cluster_name == cluster)
            | (Job.cluster_name.is_(None) & Job.group_name.in_(primary_of))
        )
        .order_by(Job.name)
    )
    return list(session.scalars(stmt))


def list_health_events(session: Session, cluster: str, *, limit: int = 50) -> list[HealthEvent]:
    """The cluster's latest health transitions, newest first."""
    load_cluster(session, cluster)
    rows = session.scalars(
        select(ClusterHealthEvent)
        .where(ClusterHealthEvent.cluster_name == cluster)
        .order_by(ClusterHealthEvent.id.desc())
        .limit(limit)
    )
    return [_event_record(r) for r in rows]


def _event_record(e: ClusterHealthEvent) -> HealthEvent:
    return HealthEvent(
        id=e.id,
        cluster=e.cluster_name,
        at=e.at,
        from_state=_health(e.from_state),
        to_state=_health(e.to_state),
        decided_by=Decider(e.decided_by),
        actor=e.actor,
        reason=e.reason,
        evidence=dict(e.evidence or {}),
        node_id=e.node_id,
    )
