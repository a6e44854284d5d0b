"""Automatic failover's switch, cool-downs and decisions in SQL (``auto_failover_events``).

One append-only table holds what automatic failover decided (a failover ``created`` or
``held`` for a group's abnormal cluster, with why) and what operators did to it (``paused``,
``resumed``, a cluster's cool-down ``cleared``); the platform-wide switch is its latest
paused/resumed event. The rules are ``scheduler/decisions/operations/auto.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from scheduler.core.operations_ledger import AutoDecision, AutoPause, Recovery
from scheduler.decisions.health import ClusterHealth, Decider
from scheduler.store.catalog import load_cluster
from scheduler.store.mapping import from_row
from scheduler.store.models import (
    AutoFailoverEvent,
    ClusterHealthEvent,
    GroupFailoverPolicy,
    Operation,
)

PAUSED = "paused"
RESUMED = "resumed"
CLEARED = "cleared"
#: the kinds that are decisions about a group's cluster
DECISIONS = ("created", "held")


@dataclass(frozen=True)
class AutoEvent:
    id: int
    at: datetime
    kind: str
    code: str
    group: str | None
    cluster: str | None
    target: str | None
    incident: str | None
    operation_id: int | None
    message: str
    actor: str


def _event(row: AutoFailoverEvent) -> AutoEvent:
    return from_row(AutoEvent, row, group=row.group_name)


def _add(session: Session, **columns: object) -> AutoEvent:
    """A new event of these ``columns``, written."""
    row = AutoFailoverEvent(**columns)
    session.add(row)
    session.flush()
    return _event(row)


def _operator_event(
    session: Session,
    kind: str,
    by: str,
    reason: str,
    node_id: str,
    now: datetime,
    cluster: str | None = None,
) -> AutoEvent:
    """What an operator did (``kind``), written."""
    return _add(
        session,
        at=now,
        kind=kind,
        code="",
        cluster=cluster,
        message=reason,
        actor=by,
        node_id=node_id,
    )


# -- the switch -----------------------------------------------------------------------------------


def switch(session: Session) -> AutoPause | None:
    """Whether automatic failover is paused platform-wide now (None: it is not)."""
    row = session.scalars(
        select(AutoFailoverEvent)
        .where(AutoFailoverEvent.kind.in_((PAUSED, RESUMED)))
        .order_by(AutoFailoverEvent.id.desc())
        .limit(1)
    ).first()
    if row is None or row.kind != PAUSED:
        return None
    return AutoPause(row.actor, row.message, row.at)


def set_paused(
    session: Session, paused: bool, *, by: str, reason: str, node_id: str, now: datetime
) -> AutoEvent:
    """Pause (or resume) automatic failover platform-wide; the event that says so."""
    return _operator_event(session, PAUSED if paused else RESUMED, by, reason, node_id, now)


def clear_cooldown(
    session: Session, cluster: str, *, by: str, reason: str, node_id: str, now: datetime
) -> AutoEvent:
    """An operator says ``cluster`` may be failed over onto automatically again, whenever it was
    last abnormal (NotFound: no such cluster)."""
    load_cluster(session, cluster)
    return _operator_event(session, CLEARED, by, reason, node_id, now, cluster=cluster)


# -- cool-downs -----------------------------------------------------------------------------------


def recoveries(session: Session, clusters: Iterable[str]) -> dict[str, Recovery]:
    """Per cluster that was abnormal once: when its last abnormal period ended (its last
    return to NORMAL) and whether an operator cleared it since -- lifting a manual mark, or
    clearing its cool-down. A cluster never abnormal is missing; one abnormal now too."""
    out: dict[str, Recovery] = {}
    for name in sorted(set(clusters)):
        back = session.execute(
            select(ClusterHealthEvent.at, ClusterHealthEvent.decided_by, ClusterHealthEvent.actor)
            .where(
                ClusterHealthEvent.cluster_name == name,
                ClusterHealthEvent.to_state == ClusterHealth.NORMAL.value,
                ClusterHealthEvent.from_state != ClusterHealth.NORMAL.value,
            )
            .order_by(ClusterHealthEvent.id.desc())
            .limit(1)
        ).first()
        if back is None:
            continue
        ended, decided_by, actor = back
        cleared_by = actor if decided_by == Decider.OPERATOR.value else ""
        clear = session.execute(
            select(AutoFailoverEvent.actor)
            .where(
                AutoFailoverEvent.kind == CLEARED,
                AutoFailoverEvent.cluster == name,
                AutoFailoverEvent.at >= ended,
            )
            .order_by(AutoFailoverEvent.id.desc())
            .limit(1)
        ).first()
        if clear is not None:
            cleared_by = clear[0]
        out[name] = Recovery(ended, bool(cleared_by), cleared_by)
    return out


# -- decisions ------------------------------------------------------------------------------------


def record_decision(
    session: Session, decision: AutoDecision, *, node_id: str, now: datetime
) -> AutoEvent | None:
    """Record ``decision`` unless the last decision about its group and cluster says the same
    (incident, verdict, code): the event written, or None."""
    last = session.scalars(
        select(AutoFailoverEvent)
        .where(
            AutoFailoverEvent.group_name == decision.group,
            AutoFailoverEvent.cluster == decision.cluster,
            AutoFailoverEvent.kind.in_(DECISIONS),
        )
        .order_by(AutoFailoverEvent.id.desc())
        .limit(1)
    ).first()
    if last is not None and (last.incident, last.kind, last.code) == (
        decision.incident,
        decision.verdict,
        decision.code,
    ):
        return None
    return _add(
        session,
        at=now,
        kind=decision.verdict,
        code=decision.code,
        group_name=decision.group,
        cluster=decision.cluster,
        target=decision.target,
        incident=decision.incident,
        operation_id=decision.operation_id,
        message=decision.why,
        actor="drover:auto-failover",
        node_id=node_id,
    )


def latest_events(session: Session, limit: int = 20) -> list[AutoEvent]:
    """The latest events, newest first."""
    rows = session.scalars(
        select(AutoFailoverEvent).order_by(AutoFailoverEvent.id.desc()).limit(limit)
    )
    return [_event(r) for r in rows]


def enabled_groups(session: Session) -> list[str]:
    """The groups whose automatic failover is enabled, by name."""
    rows = session.scalars(
        select(GroupFailoverPolicy.group_name)
        .where(GroupFailoverPolicy.enabled.is_(True))
        .order_by(GroupFailoverPolicy.group_name)
    )
    return list(rows)


def operation_states(session: Session, ids: Iterable[int]) -> dict[int, str]:
    """The states of the operations ``ids`` (a deleted one is missing)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = session.execute(select(Operation.id, Operation.state).where(Operation.id.in_(wanted)))
    return {int(i): str(s) for i, s in rows}
