"""``drover nodes drain|undrain|get`` and ``/v1/nodes/{node_id}[/drain|/undrain]`` against a real
API (uvicorn on loopback, SQLite store) whose membership is a fixed two-node ZooKeeper view: who
may drain, what is refused (the last member of a group, standalone, an unreachable node), and
what the drained node reports. The ZooKeeper side (re-registration as ``draining``, the new
epoch, the pool without it) is tests/integration/test_coordination.py's; the hand-over of
running jobs between real nodes is what the epoch change sets off (test_distribution)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.app import create_app
from api.deps import NodeContext
from drover.cli.main import app
from drover.cli.output import Exit
from harness.nodes import free_port
from scheduler.decisions.membership import GroupView, MemberInfo, MembershipSnapshot, Mode, NodeCard
from scheduler.store.db import Store
from tests.support.auth import member_token
from tests.support.serving import admin_cli_store, serving

pytestmark = pytest.mark.integration


def member(node_id: str, role: Any, url: str) -> MemberInfo:
    return MemberInfo(node_id, role, "az-1", "test", url, 1.0)


@dataclass
class Membership:
    """A fixed view: n1 (this node) and n2 active in g1, n1 alone in g2 unless ``g2_alone`` is
    off; ``set_draining`` of n1 changes n1's role the way the Membership actor would."""

    n2_url: str
    draining: bool = False
    g2_alone: bool = False
    standalone: bool = False
    calls: list[bool] = field(default_factory=list)

    def views(self) -> MembershipSnapshot:
        if self.standalone:
            card = NodeCard("n1", "http://n1", "az-1", "test")
            return MembershipSnapshot(Mode.STANDALONE, "NONE", card)
        me = member("n1", "draining" if self.draining else "active", "http://n1")
        g1 = GroupView("g1", (me, member("n2", "active", self.n2_url)), 7, 1)
        groups = {"g1": g1}
        if self.g2_alone:
            groups["g2"] = GroupView("g2", (replace(me, role="backup"),), 3, 1)
        card = NodeCard("n1", "http://n1", "az-1", "test", None, {"g1": "active"})
        return MembershipSnapshot(Mode.ZOOKEEPER, "CONNECTED", card, groups)

    def set_draining(self, draining: bool) -> dict[str, Any]:
        self.calls.append(draining)
        self.draining = draining
        return {"draining": draining}


@dataclass
class Api:
    url: str
    store: Store
    membership: Membership


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    with admin_cli_store(tmp_path, monkeypatch, "n1") as (settings, store, _):
        membership = Membership(n2_url=f"http://127.0.0.1:{free_port()}")  # nobody listens there
        context = NodeContext(
            settings, store, views=membership.views, set_draining=membership.set_draining
        )
        with serving(create_app(context)) as url:
            yield Api(url, store, membership)


def drover(api: Api, *args: str) -> tuple[int, dict[str, Any] | str, str]:
    result = CliRunner().invoke(app, [*args, "--api", api.url])
    out: dict[str, Any] | str = result.stdout
    if "--json" in args and result.exit_code == 0:
        out = json.loads(result.stdout)
    return result.exit_code, out, result.stderr


def test_drain_and_undrain_this_node(api: Api) -> None:
    code, node, err = drover(api, "nodes", "get", "n1", "--json")
    assert code == 0, err
    assert node == {  # type: ignore[comparison-overlap]
        "node_id": "n1", "api_url": "http://n1", "az": "az-1", "cloud": "test",
        "started_at": 1.0, "groups": {"g1": "active"}, "draining": False, "jobs_owned": 0,
    }  # fmt: skip

    code, node, err = drover(api, "nodes", "drain", "n1", "--wait", "--timeout", "5", "--json")
    assert code == 0, err
    assert api.membership.calls == [True]
    assert isinstance(node, dict) and node["draining"] and node["groups"] == {"g1": "draining"}
    assert node["jobs_owned"] == 0
    code, table, _ = drover(api, "nodes", "list")
    assert code == 0 and "g1:draining" in table

    code, text, err = drover(api, "nodes", "undrain", "n1")
    assert code == 0 and text.strip() == "n1: in its pools (g1:active), owns 0 job(s)", err  # type: ignore[union-attr]
    assert api.membership.calls == [True, False]

    code, audit, err = drover(api, "audit", "--target", "n1", "--json")
    assert code == 0, err
    assert [e["action"] for e in audit["data"]] == ["node.undrain", "node.drain"]  # type: ignore[index]


def test_what_a_drain_refuses(api: Api) -> None:
    api.membership.g2_alone = True  # n1 is g2's only member: nobody would take its jobs
    code, _, err = drover(api, "nodes", "drain", "n1")
    assert code == Exit.CONFLICT and "last member of group 'g2'" in err
    assert api.membership.calls == []

    code, _, err = drover(api, "nodes", "drain", "nope")
    assert code == Exit.NOT_FOUND and err.startswith("drover: 404")
    code, _, err = drover(api, "nodes", "get", "nope")
    assert code == Exit.NOT_FOUND

    api.membership.g2_alone = False
    code, _, err = drover(api, "nodes", "drain", "n2")  # forwarded to n2, which is unreachable
    assert code == Exit.UNAVAILABLE and "node 'n2'" in err

    viewer = member_token(api.store, "v-" + uuid.uuid4().hex[:6], "ads", "viewer")
    result = CliRunner().invoke(app, ["--token", viewer, "nodes", "drain", "n1", "--api", api.url])
    assert result.exit_code == Exit.REFUSED and "403" in result.stderr
    assert api.membership.calls == []


def test_a_standalone_node_has_nobody_to_drain_to(api: Api) -> None:
    api.membership.standalone = True
    code, _, err = drover(api, "nodes", "drain", "n1")
    assert code == Exit.CONFLICT and "without ZooKeeper" in err
