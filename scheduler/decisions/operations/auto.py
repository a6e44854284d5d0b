"""Automatic failover: when a group's jobs fail over by themselves. Pure.

Off by default. A group whose policy is enabled (``enabled``, ``after_seconds``,
``min_priority``; ``GET/PUT /v1/groups/{name}/auto-failover``) fails over its jobs at or above
``min_priority`` from a cluster of the group (its primary, or its failover cluster after a
failover) to the group's other cluster once the cluster has been ``VOTE_ABNORMAL`` or
``THRESHOLD_ABNORMAL`` -- decided by the monitors, not marked by an operator, who then handles
it -- for ``after_seconds`` since its *incident* began: the transition that took it out of
NORMAL. The failover is an ordinary persisted operation created from the same plan as an
operator's (it refuses what is not safe, and never forces a run that is not self-fencing), at
most once per incident and group: its ``incident`` key (``auto:<group>:<cluster>:<event id>``)
is unique in the store.

Once due, :func:`decide` says for each such group and cluster either *created* or *held*, and
why (``code``):

    paused                automatic failover is paused platform-wide (one switch:
                          ``drover failover auto pause|resume``)
    no-target             the group has no other cluster
    target-abnormal       the target is not NORMAL itself
    target-cooling-down   the target was abnormal itself within the cool-down
                          (``DROVER_FAILOVER_AUTO_COOLDOWN``) and no operator cleared it since:
                          never back onto a cluster that just failed (a fail-back is an
                          operator's decision), unless an operator cleared it
                          (``drover failover auto clear CLUSTER``, or lifting a manual mark)

The decision is repeated every round while the incident lasts; the executor records each as an
event and an alert only when it changes (``OperationsLedger.decided``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduler.core.operations_ledger import AutoDecision, AutoPause, FailoverPolicy, Recovery
from scheduler.core.records import ClusterRecord, GroupRecord
from scheduler.decisions.health import ClusterHealth
from scheduler.decisions.operations.failover import Request, Selector, default_target

AUTOMATIC = (ClusterHealth.VOTE_ABNORMAL.value, ClusterHealth.THRESHOLD_ABNORMAL.value)
CREATED_BY = "drover:auto-failover"


#: a group's policy, as the operations ledger reads it
Policy = FailoverPolicy


@dataclass(frozen=True)
class AutoFailover:
    group: str
    request: Request
    incident: str
    reason: str


def incident_key(group: str, cluster: str, event_id: int) -> str:
    return f"auto:{group}:{cluster}:{event_id}"


CREATED = "created"
HELD = "held"
#: why a due automatic failover was held (see the module docstring)
PAUSED = "paused"
NO_TARGET = "no-target"
TARGET_ABNORMAL = "target-abnormal"
TARGET_COOLING_DOWN = "target-cooling-down"


def decide(
    policies: Iterable[Policy],
    groups: Mapping[str, GroupRecord],
    clusters: Mapping[str, ClusterRecord],
    incidents: Mapping[str, tuple[int, datetime]],
    now: datetime,
    *,
    paused: AutoPause | None = None,
    cooldown_s: float = 0.0,
    recoveries: Mapping[str, Recovery] | None = None,
) -> list[tuple[AutoDecision, AutoFailover | None]]:
    """The decisions of automatic failover now, each with the failover to create (None when it
    is held). ``incidents``: per cluster, the id and time of the event that began its current
    abnormal period; ``recoveries``: per cluster, its last abnormal period that ended."""
    recovered = recoveries or {}
    out: list[tuple[AutoDecision, AutoFailover | None]] = []
    for policy in sorted(policies, key=lambda p: p.group):
        group = groups.get(policy.group)
        if not policy.enabled or group is None:
            continue
        for source in (group.primary_cluster, group.failover_cluster):
            cluster = clusters.get(source or "")
            if cluster is None or cluster.health not in AUTOMATIC:
                continue
            incident = incidents.get(cluster.name)
            if incident is None:
                continue
            event_id, began = incident
            if now < began + timedelta(seconds=policy.after_seconds):
                continue
            key = incident_key(group.name, cluster.name, event_id)
            since = (
                f"cluster {cluster.name} {cluster.health} since "
                f"{began.isoformat(timespec='seconds')} (over {policy.after_seconds:g} s)"
            )
            target = default_target(group, cluster.name)
            why = _held_why(target, clusters, paused, recovered.get(target or ""), cooldown_s, now)
            if why is not None:
                code, text = why
                decision = AutoDecision(
                    group.name, cluster.name, target, key, HELD, code,
                    f"automatic failover of group {group.name} held: {since}; {text}",
                )  # fmt: skip
                out.append((decision, None))
                continue
            reason = (
                f"automatic: {since}; group {group.name} fails over its jobs of priority "
                f"{policy.min_priority} and above"
            )
            failover = AutoFailover(
                group.name,
                Request(
                    cluster.name,
                    target,
                    Selector.at_or_above(policy.min_priority, groups=[group.name]),
                ),
                key,
                reason,
            )
            decision = AutoDecision(group.name, cluster.name, target, key, CREATED, CREATED, reason)
            out.append((decision, failover))
    return out


def _held_why(
    target: str | None,
    clusters: Mapping[str, ClusterRecord],
    paused: AutoPause | None,
    back: Recovery | None,
    cooldown_s: float,
    now: datetime,
) -> tuple[str, str] | None:
    """Why a due automatic failover onto ``target`` is held (code, sentence); None: it is not."""
    if target is None or target not in clusters:
        return NO_TARGET, "the group has no other cluster to fail over to"
    if paused is not None:
        return PAUSED, (
            f"automatic failover is paused by {paused.by} since "
            f"{paused.at.isoformat(timespec='seconds')} ({paused.reason}); an operator fails "
            "over, or resumes it (drover failover auto resume)"
        )
    health = clusters[target].health
    if health != ClusterHealth.NORMAL.value:
        return TARGET_ABNORMAL, f"its target {target} is {health} itself"
    if back is not None and not back.cleared and cooldown_s > 0:
        until = back.ended + timedelta(seconds=cooldown_s)
        if now < until:
            return TARGET_COOLING_DOWN, (
                f"its target {target} was abnormal itself until "
                f"{back.ended.isoformat(timespec='seconds')} (cool-down {cooldown_s:g} s, until "
                f"{until.isoformat(timespec='seconds')}): not failed over onto automatically "
                f"unless an operator clears it (drover failover auto clear {target})"
            )
    return None


def due(
    policies: Iterable[Policy],
    groups: Mapping[str, GroupRecord],
    clusters: Mapping[str, ClusterRecord],
    incidents: Mapping[str, tuple[int, datetime]],
    now: datetime,
    **kw: Any,
) -> list[AutoFailover]:
    """The automatic failovers due now (the ``created`` decisions of :func:`decide`)."""
    return [f for _, f in decide(policies, groups, clusters, incidents, now, **kw) if f is not None]
