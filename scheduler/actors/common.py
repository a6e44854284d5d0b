"""What the node's actors share: actor names, timeouts, groups, and Ray bound to loopback."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # not at run time: the Membership worker loads no pydantic (membership.py)
    from scheduler.config import Settings
    from scheduler.decisions.membership import MembershipSettings, Role

# Ray must bind to loopback only; it reads this before it starts (see RUNTIME-NOTES).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# No usage statistics: Ray would otherwise collect them in the driver and the dashboard process
# and try to report them over the network (a loopback-only node has nothing to send them to).
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# At most two glibc malloc arenas in each of Ray's processes (GCS, raylet, agents, the actors'
# workers: 20-30 threads each; glibc would give every thread that allocates an arena of its own).
# Python allocates small objects itself; a few MiB less resident per node (bench/node_rss.py
# measures it).
os.environ.setdefault("MALLOC_ARENA_MAX", "2")
# The actors' log lines are the node's (scheduler/core/logs.py): Ray ships them to the node process
# as they are -- no "(Actor pid=...)" prefix, no colour codes, no "[repeated 3x]" folding of
# similar lines (which would also hold lines back for seconds).
os.environ.setdefault("RAY_DISABLE_WORKER_LOG_PREFIX", "1")
os.environ.setdefault("RAY_COLOR_PREFIX", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import ray  # noqa: E402  (after the environment is set)

__all__ = [
    "CLAIM_TIMEOUT",
    "LEASE_SHARE",
    "MEMBERSHIP",
    "MONITOR",
    "PING_TIMEOUT",
    "RECONCILER",
    "REPLICATION",
    "SUPERVISE_INTERVAL",
    "forward_nudge",
    "managed_groups",
    "membership_actor",
    "ray",
    "runtime_py_files",
]

log = logging.getLogger("drover.actors.common")

PING_TIMEOUT = 5.0
SUPERVISE_INTERVAL = 1.0
CLAIM_TIMEOUT = 2.0
#: a claim may be acted on for this share of the session timeout after a confirmed round trip
LEASE_SHARE = 0.5
#: named actors in the node's Ray namespace (and the monitor's status key)
MEMBERSHIP = "membership"
MONITOR = "monitor"
RECONCILER = "reconciler"
#: the replication loop's entry in the supervisor's status (a loop, not an actor)
REPLICATION = "replication"


#: this process's handle on its node's Membership actor, and the Ray instance it belongs to
_membership: tuple[tuple[str, str], Any] | None = None


def membership_actor() -> Any:
    """The node's Membership actor (ValueError when it does not exist).

    Looked up by name once per Ray instance of this process, not at each use (a lookup is a
    round trip to the GCS): Membership restarts in place (``max_restarts=-1``) and is never
    replaced by another actor, so its handle stays good while the node runs."""
    global _membership
    context = ray.get_runtime_context()
    instance = (context.get_node_id(), context.namespace)
    if _membership is None or _membership[0] != instance:
        _membership = (instance, ray.get_actor(MEMBERSHIP))
    return _membership[1]


def managed_groups(settings: Settings | MembershipSettings) -> dict[str, Role]:
    """group -> role of this node; with ZooKeeper and no DROVER_GROUPS: ``default:active``."""
    configured: dict[str, Role] = dict(settings.group_roles)
    if not configured and settings.zk_hosts:
        return {"default": "active"}
    return configured


def runtime_py_files() -> tuple[str, ...]:
    """Files every submission ships with the driver: the pipelines' Drover runtime."""
    import pipelines.drover_runtime as runtime

    return (str(runtime.__file__),)


def forward_nudge(api_url: str, group: str, job: str, secret: str) -> None:
    """Nudge the node at ``api_url`` (``POST /v1/internal/nudge``, never through a proxy) to
    look at ``job`` of ``group`` now; a nudge not delivered is logged: the job's next tick acts."""
    import httpx

    from scheduler.backends import http
    from scheduler.decisions.identity import NODE_SECRET_HEADER

    try:
        http.one_off(
            "POST",
            f"{api_url.rstrip('/')}/v1/internal/nudge",
            json={"group": group, "job": job},
            headers={NODE_SECRET_HEADER: secret},
            timeout=2.0,
        ).raise_for_status()
    except httpx.HTTPError as exc:
        log.info("nudge of %s for job %s not delivered (%s); its next tick acts", api_url, job, exc)
