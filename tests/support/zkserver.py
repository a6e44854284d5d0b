"""The tests' name for :mod:`harness.zkserver` (a private ZooKeeper server, chaos uses it too),
and the clean-up of a test's ZooKeeper namespace."""

from harness.zkserver import ZkServer, free_port, srvr

__all__ = ["ZkServer", "delete_tree", "free_port", "srvr"]


def delete_tree(hosts: str, path: str, *, auth: str | None = None) -> None:
    """Delete ``path`` and all below it on the ZooKeeper at ``hosts`` (``auth``: the digest
    credential of the namespace's owner, where its ACL is closed); one already gone is fine."""
    from kazoo.client import KazooClient

    client = KazooClient(
        hosts=hosts, timeout=5.0, auth_data=[("digest", auth)] if auth is not None else None
    )
    client.start(timeout=10)
    try:
        client.delete(path, recursive=True)
    except Exception:  # noqa: BLE001 - already gone
        pass
    finally:
        client.stop()
        client.close()
