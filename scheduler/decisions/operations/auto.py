"""Automatic failover: when a group's jobs fail over by themselves. Pure.

Off by default. A group whose policy is enabled (``enabled``, ``after_seconds``,
``min_priority``; ``GET/PUT /v1/groups/{name}/auto-failover``) fails over its jobs at or above
``min_priority`` from a cluster of the group (its primary, or its failover cluster after a
failover) to the group's other cluster once the cluster has been ``VOTE_ABNORMAL`` or
``THRESHOLD_ABNORMAL`` -- decided by the monitors, not marked by an operator, who then handles
it -- for ``after_seconds`` since its *incident* began: the transition that took it out of
NORMAL. The failover is an ordinary persisted operation created from the same plan as an
operator's, at most once per incident and group: its ``incident`` key
(``auto:<group>:<cluster>:<event id>``) is unique in the store. A target that is not NORMAL
itself is not failed over to (the check is repeated every round until the incident ends).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.operations_ledger import FailoverPolicy
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


def due(
    policies: Iterable[Policy],
    groups: Mapping[str, GroupRecord],
    clusters: Mapping[str, ClusterRecord],
    incidents: Mapping[str, tuple[int, datetime]],
    now: datetime,
) -> list[AutoFailover]:
    """The automatic failovers due now (``incidents``: per cluster, the id and time of the event
    that began its current abnormal period)."""
    out = []
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
            target = default_target(group, cluster.name)
            if target is None or target not in clusters:
                continue
            if clusters[target].health != ClusterHealth.NORMAL.value:
                continue
            out.append(
                AutoFailover(
                    group.name,
                    Request(
                        cluster.name,
                        target,
                        Selector.at_or_above(policy.min_priority, groups=[group.name]),
                    ),
                    incident_key(group.name, cluster.name, event_id),
                    f"automatic: cluster {cluster.name} {cluster.health} since "
                    f"{began.isoformat(timespec='seconds')} (over {policy.after_seconds:g} s; "
                    f"group {group.name} fails over its jobs of priority "
                    f"{policy.min_priority} and above)",
                )
            )
    return out
