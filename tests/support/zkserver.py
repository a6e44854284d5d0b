"""The tests' name for :mod:`harness.zkserver` (a private ZooKeeper server, chaos uses it too)."""

from harness.zkserver import ZkServer, free_port, srvr

__all__ = ["ZkServer", "free_port", "srvr"]
