"""Alerts in the store: channels, alerts (raised, folded, resolved) and the delivery outbox.

What to raise, folding and routing are :mod:`scheduler.decisions.alerts`'s decisions; this module
keeps their results, each change with its outbox rows in the caller's transaction (so a node crash
loses no message, and two nodes never raise the same alert twice: ``alerts.open_key`` is
unique while an alert fires).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from scheduler.core.clock import utcnow
from scheduler.core.errors import AlreadyExists, NotFound
from scheduler.decisions.alerts import (
    SEVERITY,
    AlertKind,
    AlertRecord,
    ChannelKind,
    ChannelRecord,
    Event,
    Severity,
    Signal,
    fold_target,
    key_of,
    routes,
)
from scheduler.store.db import add_new
from scheduler.store.mapping import from_row
from scheduler.store.models import Alert, AlertChannel, AlertDelivery, Job, Run


def channel_record(row: AlertChannel) -> ChannelRecord:
    return from_row(
        ChannelRecord,
        row,
        kind=ChannelKind(row.kind),
        kinds=tuple(row.kinds or ()),
        min_severity=Severity.parse(row.min_severity),
    )


def alert_record(row: Alert) -> AlertRecord:
    return from_row(
        AlertRecord,
        row,
        kind=AlertKind(row.kind),
        severity=Severity.parse(row.severity),
        status=Event(row.status),
        group=row.group_name,
        details=dict(row.details or {}),
    )


# -- channels ------------------------------------------------------------------------------------


def create_channel(session: Session, channel: ChannelRecord) -> ChannelRecord:
    if session.scalar(select(AlertChannel.id).where(AlertChannel.name == channel.name)):
        raise AlreadyExists(f"an alert channel named {channel.name!r} already exists")
    now = utcnow()
    row = AlertChannel(
        name=channel.name,
        kind=str(channel.kind),
        url=channel.url,
        team=channel.team,
        kinds=list(channel.kinds),
        min_severity=str(channel.min_severity),
        secret=channel.secret,
        enabled=channel.enabled,
        description=channel.description,
        created_at=now,
        updated_at=now,
    )
    add_new(session, row, f"an alert channel named {channel.name!r} already exists")
    return channel_record(row)


def _channel(session: Session, name: str, team: str | None, missing: str) -> AlertChannel:
    """The channel named ``name`` (of ``team`` when given); NotFound(``missing``) if none."""
    stmt = select(AlertChannel).where(AlertChannel.name == name)
    if team is not None:
        stmt = stmt.where(AlertChannel.team == team)
    row = session.scalars(stmt).first()
    if row is None:
        raise NotFound(missing)
    return row


def get_channel(session: Session, name: str, *, team: str | None = None) -> ChannelRecord:
    missing = f"no alert channel named {name!r}" + (f" of team {team!r}" if team else "")
    return channel_record(_channel(session, name, team, missing))


def list_channels(session: Session, *, team: str | None = None) -> list[ChannelRecord]:
    stmt = select(AlertChannel).order_by(AlertChannel.name)
    if team is not None:
        stmt = stmt.where(AlertChannel.team == team)
    return [channel_record(r) for r in session.scalars(stmt)]


def delete_channel(session: Session, name: str, *, team: str | None = None) -> ChannelRecord:
    row = _channel(session, name, team, f"no alert channel named {name!r}")
    record = channel_record(row)
    session.delete(row)
    session.flush()
    return record


def _channels(session: Session) -> list[ChannelRecord]:
    return [
        channel_record(r) for r in session.scalars(select(AlertChannel).where(AlertChannel.enabled))
    ]


# -- alerts --------------------------------------------------------------------------------------


def _open(session: Session, key: str) -> Alert | None:
    return session.scalars(select(Alert).where(Alert.open_key == key)).first()


def _enqueue(
    session: Session, alert_id: int, channels: Iterable[ChannelRecord], event: Event, now: datetime
) -> int:
    """Outbox rows for ``channels`` (those not given this message already)."""
    have = set(
        session.scalars(
            select(AlertDelivery.channel_id).where(
                AlertDelivery.alert_id == alert_id, AlertDelivery.event == str(event)
            )
        )
    )
    added = 0
    for channel in channels:
        if channel.id in have:
            continue
        session.add(
            AlertDelivery(
                alert_id=alert_id,
                channel_id=channel.id,
                event=str(event),
                pending=True,
                created_at=now,
                next_attempt_at=now,
                attempts=0,
                last_error="",
                body="",
            )
        )
        added += 1
    if added:
        session.flush()
    return added


def raise_alert(session: Session, signal: Signal, now: datetime) -> AlertRecord | None:
    """Raise an alert for ``signal`` unless one fires for its key (None then). A job's alert
    folds into its cluster's firing alert; otherwise its messages are queued at once."""
    if _open(session, signal.key) is not None:
        return None
    firing_clusters: dict[str, int] = {}
    if signal.cluster is not None and signal.kind != AlertKind.CLUSTER_ABNORMAL:
        cluster_alert = _open(session, key_of(AlertKind.CLUSTER_ABNORMAL, signal.cluster))
        if cluster_alert is not None:
            firing_clusters[signal.cluster] = cluster_alert.id
    folded_into = fold_target(signal.cluster, signal.kind, firing_clusters)
    row = Alert(
        key=signal.key,
        open_key=signal.key,
        kind=str(signal.kind),
        subject=signal.subject,
        severity=str(SEVERITY[signal.kind]),
        status=str(Event.FIRING),
        summary=signal.summary,
        resolution="",
        team=signal.team,
        cluster=signal.cluster,
        group_name=signal.group,
        details=dict(signal.details),
        folded_into=folded_into,
        started_at=now,
    )
    nested = session.begin_nested()
    try:
        session.add(row)
        session.flush()
    except IntegrityError:  # another node raised it a moment ago
        nested.rollback()
        return None
    nested.commit()
    record = alert_record(row)
    channels = _channels(session)
    if folded_into is None:
        _enqueue(session, row.id, routes(record, channels), Event.FIRING, now)
    else:  # the cluster's alert reaches this job's team too (once)
        cluster_row = session.get(Alert, folded_into)
        if cluster_row is not None:
            cluster = alert_record(cluster_row)
            _enqueue(
                session,
                cluster.id,
                routes(cluster, channels, folded_teams=[signal.team] if signal.team else []),
                Event.FIRING,
                now,
            )
    return record


def resolve_alert(session: Session, key: str, resolution: str, now: datetime) -> AlertRecord | None:
    """Resolve the alert firing for ``key`` (None: none fires). Its resolved message goes where
    its firing one went; a resolved cluster alert lets its folded alerts still firing out."""
    row = _open(session, key)
    if row is None:
        return None
    result = session.execute(
        update(Alert)
        .where(Alert.id == row.id, Alert.open_key == key)
        .values(open_key=None, status=str(Event.RESOLVED), resolved_at=now, resolution=resolution)
        .execution_options(synchronize_session=False)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return None  # another node resolved it a moment ago
    session.refresh(row)
    record = alert_record(row)
    sent_to = list(
        session.scalars(
            select(AlertDelivery.channel_id).where(
                AlertDelivery.alert_id == row.id, AlertDelivery.event == str(Event.FIRING)
            )
        )
    )
    if sent_to:
        channels = [c for c in _all_channels(session) if c.id in set(sent_to)]
        _enqueue(session, row.id, channels, Event.RESOLVED, now)
    if record.kind == AlertKind.CLUSTER_ABNORMAL:
        channels = _channels(session)
        for folded in session.scalars(
            select(Alert).where(Alert.folded_into == row.id, Alert.open_key.is_not(None))
        ).all():
            # sent on its own now; ``folded_into`` stays: the outage it was folded into
            _enqueue(session, folded.id, routes(alert_record(folded), channels), Event.FIRING, now)
    return record


def _all_channels(session: Session) -> list[ChannelRecord]:
    return [channel_record(r) for r in session.scalars(select(AlertChannel))]


def open_alerts(session: Session, kinds: Iterable[AlertKind]) -> list[AlertRecord]:
    names = [str(k) for k in kinds]
    rows = session.scalars(select(Alert).where(Alert.open_key.is_not(None), Alert.kind.in_(names)))
    return [alert_record(r) for r in rows]


def folded_into(session: Session, alert_id: int) -> list[AlertRecord]:
    rows = session.scalars(select(Alert).where(Alert.folded_into == alert_id).order_by(Alert.id))
    return [alert_record(r) for r in rows]


def list_alerts(
    session: Session,
    *,
    status: Event | None = None,
    kind: AlertKind | None = None,
    teams: frozenset[str] | None = None,
    limit: int = 100,
    before_id: int | None = None,
    count: bool = False,
) -> tuple[list[AlertRecord], int | None]:
    """Alerts newest first (ids below ``before_id``); with ``count`` also how many match."""
    conditions: list[Any] = []
    if status is not None:
        conditions.append(Alert.status == str(status))
    if kind is not None:
        conditions.append(Alert.kind == str(kind))
    if teams is not None:
        conditions.append(Alert.team.in_(sorted(teams | {""})))
    total = (
        int(session.scalar(select(func.count()).select_from(Alert).where(*conditions)) or 0)
        if count
        else None
    )
    if before_id is not None:
        conditions.append(Alert.id < before_id)
    rows = session.scalars(select(Alert).where(*conditions).order_by(Alert.id.desc()).limit(limit))
    return [alert_record(r) for r in rows], total


def deliveries_of(session: Session, alert_id: int) -> list[dict[str, Any]]:
    rows = session.execute(
        select(AlertDelivery, AlertChannel.name)
        .join(AlertChannel, AlertChannel.id == AlertDelivery.channel_id)
        .where(AlertDelivery.alert_id == alert_id)
        .order_by(AlertDelivery.id)
    ).all()
    return [
        {
            "id": d.id,
            "channel": name,
            "event": d.event,
            "attempts": d.attempts,
            "delivered_at": d.delivered_at,
            "failed_at": d.failed_at,
            "next_attempt_at": d.next_attempt_at if d.pending else None,
            "last_error": d.last_error or None,
            "response_status": d.response_status,
        }
        for d, name in rows
    ]


def add_test_alert(session: Session, channel: ChannelRecord, actor: str, now: datetime) -> int:
    """A test message to ``channel`` (a resolved TEST alert with one delivery); returns its id."""
    row = Alert(
        key=key_of(AlertKind.TEST, channel.name),
        open_key=None,
        kind=str(AlertKind.TEST),
        subject=channel.name,
        severity=str(Severity.INFO),
        status=str(Event.FIRING),
        summary=f"test message to alert channel {channel.name} (sent by {actor})",
        resolution="",
        team="" if channel.team == "*" else channel.team,
        details={"requested_by": actor},
        started_at=now,
    )
    session.add(row)
    session.flush()
    _enqueue(session, row.id, [channel], Event.FIRING, now)
    return row.id


# -- what the owner evaluates ----------------------------------------------------------------------


def given_up_jobs(session: Session, node_id: str) -> list[Job]:
    """Jobs ``node_id`` owns whose restart budget is spent (FAILED, desired RUNNING)."""
    return list(
        session.scalars(
            select(Job).where(
                Job.owner == node_id, Job.state == "FAILED", Job.desired_state == "RUNNING"
            )
        )
    )


def failed_runs(session: Session, node_id: str, since: datetime) -> list[tuple[Job, Run]]:
    """Runs that failed (counting against the restart budget) since ``since``, of jobs
    ``node_id`` owns."""
    rows = session.execute(
        select(Job, Run)
        .join(Run, Run.job_id == Job.id)
        .where(
            Job.owner == node_id,
            Run.state == "FAILED",
            Run.counts_as_failure.is_(True),
            Run.ended_at >= since,
        )
        .order_by(Run.ended_at)
    ).all()
    return [(job, run) for job, run in rows]


def jobs_by_name(session: Session, names: Iterable[str]) -> dict[str, Job]:
    wanted = sorted(set(names))
    if not wanted:
        return {}
    return {j.name: j for j in session.scalars(select(Job).where(Job.name.in_(wanted)))}


def last_alert(session: Session, key: str) -> AlertRecord | None:
    row = session.scalars(select(Alert).where(Alert.key == key).order_by(Alert.id.desc())).first()
    return None if row is None else alert_record(row)


# -- the outbox -----------------------------------------------------------------------------------


def claim_due(
    session: Session, node_id: str, now: datetime, *, lease: float, limit: int
) -> str | None:
    """Claim up to ``limit`` due messages for ``node_id`` for ``lease`` seconds; returns the
    claim's token (None: nothing due). A message is due when it is pending, its next attempt
    has come, nobody else holds a live claim on it, and no earlier message of the same alert
    to the same channel is still pending (messages go in order)."""
    earlier = aliased(AlertDelivery)
    candidates = list(
        session.scalars(
            select(AlertDelivery.id)
            .where(
                AlertDelivery.pending.is_(True),
                AlertDelivery.next_attempt_at <= now,
                (AlertDelivery.claimed_until.is_(None)) | (AlertDelivery.claimed_until < now),
                ~exists().where(
                    and_(
                        earlier.alert_id == AlertDelivery.alert_id,
                        earlier.channel_id == AlertDelivery.channel_id,
                        earlier.pending.is_(True),
                        earlier.id < AlertDelivery.id,
                    )
                ),
            )
            .order_by(AlertDelivery.next_attempt_at, AlertDelivery.id)
            .limit(limit)
        )
    )
    if not candidates:
        return None
    token = secrets.token_hex(16)
    result = session.execute(
        update(AlertDelivery)
        .where(
            AlertDelivery.id.in_(candidates),
            AlertDelivery.pending.is_(True),
            (AlertDelivery.claimed_until.is_(None)) | (AlertDelivery.claimed_until < now),
        )
        .values(claimed_by=node_id, claim_token=token, claimed_until=now + timedelta(seconds=lease))
        .execution_options(synchronize_session=False)
    )
    return token if result.rowcount else None  # type: ignore[attr-defined]


def claimed(
    session: Session, token: str
) -> list[tuple[int, Event, AlertRecord, ChannelRecord, int, list[AlertRecord]]]:
    """The messages claimed under ``token``: (delivery id, event, alert, channel, attempts,
    alerts folded into it)."""
    rows = session.execute(
        select(AlertDelivery, Alert, AlertChannel)
        .join(Alert, Alert.id == AlertDelivery.alert_id)
        .join(AlertChannel, AlertChannel.id == AlertDelivery.channel_id)
        .where(AlertDelivery.claim_token == token)
        .order_by(AlertDelivery.id)
    ).all()
    out = []
    for delivery, alert, channel in rows:
        record = alert_record(alert)
        folded = folded_into(session, alert.id) if record.kind == AlertKind.CLUSTER_ABNORMAL else []
        out.append(
            (
                delivery.id,
                Event(delivery.event),
                record,
                channel_record(channel),
                delivery.attempts,
                folded,
            )
        )
    return out


def delivered(
    session: Session, delivery_id: int, token: str, *, status: int, body: str, at: datetime
) -> None:
    session.execute(
        update(AlertDelivery)
        .where(AlertDelivery.id == delivery_id, AlertDelivery.claim_token == token)
        .values(
            pending=False,
            delivered_at=at,
            attempts=AlertDelivery.attempts + 1,
            response_status=status,
            body=body,
            last_error="",
            claim_token=None,
            claimed_until=None,
        )
        .execution_options(synchronize_session=False)
    )


def attempt_failed(
    session: Session,
    delivery_id: int,
    token: str,
    *,
    error: str,
    status: int | None,
    body: str,
    retry_at: datetime | None,
    at: datetime,
) -> None:
    """A failed attempt: retried at ``retry_at``, or given up (None)."""
    values: dict[str, Any] = {
        "attempts": AlertDelivery.attempts + 1,
        "last_error": error[:2000],
        "response_status": status,
        "body": body,
        "claim_token": None,
        "claimed_until": None,
    }
    if retry_at is None:
        values.update(pending=False, failed_at=at)
    else:
        values.update(next_attempt_at=retry_at)
    session.execute(
        update(AlertDelivery)
        .where(AlertDelivery.id == delivery_id, AlertDelivery.claim_token == token)
        .values(**values)
        .execution_options(synchronize_session=False)
    )


def outbox_counts(session: Session) -> tuple[int, int]:
    """(pending messages, messages given up)."""
    pending = session.scalar(
        select(func.count()).select_from(AlertDelivery).where(AlertDelivery.pending.is_(True))
    )
    failed = session.scalar(
        select(func.count()).select_from(AlertDelivery).where(AlertDelivery.failed_at.is_not(None))
    )
    return int(pending or 0), int(failed or 0)


def firing_counts(session: Session) -> list[tuple[str, str, int]]:
    rows = session.execute(
        select(Alert.kind, Alert.severity, func.count())
        .where(Alert.open_key.is_not(None))
        .group_by(Alert.kind, Alert.severity)
    ).all()
    return [(str(k), str(s), int(n)) for k, s, n in rows]
