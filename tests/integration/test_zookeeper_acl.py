"""A deployment's ZooKeeper namespace is its own when a credential is configured
(``DROVER_ZK_AUTH``, digest ``user:password``): the nodes authenticate with it and create the
namespace's znodes readable and writable by that identity only, so another ZooKeeper client --
without the credential, or with another one -- can neither read nor delete member nodes.

Against the real ZooKeeper (DROVER_TEST_ZK_HOSTS), in a namespace of its own.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from scheduler.config import Settings
from scheduler.coordination.zookeeper import Coordinator, CoordinatorEvent
from tests.support.zkserver import delete_tree

pytestmark = pytest.mark.integration

CREDENTIAL = "drover-prod:" + secrets.token_urlsafe(16)


def client(hosts: str, auth: str | None = None) -> KazooClient:
    zk = KazooClient(
        hosts=hosts, timeout=5.0, auth_data=[("digest", auth)] if auth is not None else None
    )
    zk.start(timeout=10)
    return zk


@pytest.fixture
def namespace(zk_hosts: str) -> Iterator[str]:
    path = f"/drover-acl-{secrets.token_hex(4)}"
    yield path
    delete_tree(zk_hosts, path, auth=CREDENTIAL)  # the owner cleans up


def test_a_namespace_made_with_a_credential_is_closed_to_other_clients(
    zk_hosts: str, namespace: str
) -> None:
    settings = Settings(
        node_id="acl-1",
        zk_hosts=zk_hosts,
        zk_namespace=namespace,
        zk_session_timeout=4.0,
        groups="g1:active",
        zk_auth=CREDENTIAL,
    )
    events: list[CoordinatorEvent] = []
    coordinator = Coordinator.from_settings(settings, events.append)
    coordinator.start(timeout=10)
    try:
        members = coordinator.members_path("g1")
        member = f"{members}/acl-1"
        assert coordinator.views()["g1"].pool == ("acl-1",)

        for stranger in (client(zk_hosts), client(zk_hosts, "drover-prod:wrong")):
            try:
                with pytest.raises(NoAuthError):
                    stranger.get_children(members)
                with pytest.raises(NoAuthError):
                    stranger.get(member)
                with pytest.raises(NoAuthError):
                    stranger.get_children(namespace)
                with pytest.raises(NoAuthError):
                    stranger.delete(member)
                with pytest.raises(NoAuthError):
                    stranger.create(f"{members}/intruder", b"{}", ephemeral=True)
                with pytest.raises(NoAuthError):
                    stranger.delete(members, recursive=True)
            finally:
                stranger.stop()
                stranger.close()

        owner = client(zk_hosts, CREDENTIAL)
        try:
            assert owner.get_children(members) == ["acl-1"]
            for path in (namespace, members, member):
                acls, _ = owner.get_acls(path)
                assert [a.id.scheme for a in acls] == ["digest"], (path, acls)
                assert acls[0].id.id.startswith("drover-prod:")
        finally:
            owner.stop()
            owner.close()
        assert coordinator.views()["g1"].pool == ("acl-1",)  # still registered, still watching
    finally:
        coordinator.stop()


def test_the_credential_never_shows_in_settings(tmp_path: object) -> None:
    settings = Settings(zk_auth=CREDENTIAL)
    assert CREDENTIAL not in repr(settings) and CREDENTIAL.split(":")[1] not in str(settings)
    assert settings.resolved_zk_auth == CREDENTIAL
    with pytest.raises(ValueError, match="user:password"):
        Settings(zk_auth="no-colon").resolved_zk_auth  # noqa: B018
