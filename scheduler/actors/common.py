"""What the node's actors share: actor names, timeouts, groups, and Ray bound to loopback."""

from __future__ import annotations

import os

from scheduler.config import Role, Settings

# Ray must bind to loopback only; it reads this before it starts (see RUNTIME-NOTES).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# No usage statistics: Ray would otherwise collect them in the driver and the dashboard process
# and try to report them over the network (a loopback-only node has nothing to send them to).
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402  (after the environment is set)

__all__ = [
    "CLAIM_TIMEOUT",
    "LEASE_SHARE",
    "MEMBERSHIP",
    "MONITOR",
    "PING_TIMEOUT",
    "RECONCILER",
    "SUPERVISE_INTERVAL",
    "SUPERVISOR",
    "managed_groups",
    "ray",
    "runtime_py_files",
]

PING_TIMEOUT = 5.0
SUPERVISE_INTERVAL = 1.0
CLAIM_TIMEOUT = 2.0
#: a claim may be acted on for this share of the session timeout after a confirmed round trip
LEASE_SHARE = 0.5
#: named actors in the node's Ray namespace
MEMBERSHIP = "membership"
MONITOR = "monitor"
RECONCILER = "reconciler"
SUPERVISOR = "supervisor"


def managed_groups(settings: Settings) -> dict[str, Role]:
    """group -> role of this node; with ZooKeeper and no DROVER_GROUPS: ``default:active``."""
    configured: dict[str, Role] = dict(settings.group_roles)
    if not configured and settings.zk_hosts:
        return {"default": "active"}
    return configured


def runtime_py_files() -> tuple[str, ...]:
    """Files every submission ships with the driver: the pipelines' Drover runtime."""
    import pipelines.drover_runtime as runtime

    return (str(runtime.__file__),)
