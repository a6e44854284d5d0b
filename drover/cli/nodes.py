"""``drover nodes list|get|drain|undrain``: the live Drover nodes as the answering node sees them,
and a node's maintenance hand-over (``api/routes/membership.py``)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from drover.cli import output as out
from drover.cli.output import ApiOption, JsonOption, TimeoutOption, WaitOption

nodes_app = out.new_app(no_args_is_help=True, help="Drover nodes: who is alive, in which groups.")


def register(app: typer.Typer) -> None:
    app.add_typer(nodes_app, name="nodes")


def _started(value: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value)) if value else "-"


def _render_nodes(doc: dict[str, Any]) -> None:
    out.table(
        ("NODE", "AZ", "CLOUD", "GROUPS", "API", "STARTED (UTC)"),
        (
            (
                n["node_id"] + (" *" if n["node_id"] == doc.get("this_node") else ""),
                n["az"],
                n["cloud"],
                ",".join(f"{g}:{r}" for g, r in sorted(n["groups"].items())),
                n["api_url"],
                _started(n.get("started_at")),
            )
            for n in doc["data"]
        ),
        empty="(no live nodes)",
    )
    out.footer(
        f"{doc['count']} node(s); membership {doc['mode']} ({doc['connection']}), "
        f"answered by {doc['this_node']} (*)"
    )


@nodes_app.command("list")
def nodes_list(api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Live nodes of the answering node's groups: AZ, cloud, role per group, API URL."""
    doc = out.call("GET", out.api_url(api) + "/v1/nodes")
    out.show(doc, as_json, _render_nodes)


NodeArgument = Annotated[str, typer.Argument(help="the node's id (drover nodes list)")]


def _node_line(node: dict[str, Any]) -> str:
    roles = ",".join(f"{g}:{r}" for g, r in sorted(node["groups"].items())) or "no group"
    state = "draining" if node["draining"] else "in its pools"
    return f"{node['node_id']}: {state} ({roles}), owns {node['jobs_owned']} job(s)"


def _render_node(node: dict[str, Any]) -> None:
    out.record(node, ("node_id", "api_url", "az", "cloud", "groups", "draining", "jobs_owned"))


@nodes_app.command("get")
def nodes_get(node: NodeArgument, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """One live node: its groups and roles, whether it is drained, the jobs it owns."""
    out.show(out.call("GET", out.api_url(api) + out.path_of("nodes", node)), as_json, _render_node)


def _drain(
    node: str, draining: bool, api: str | None, wait: bool, timeout: float, as_json: bool
) -> None:
    command = "drain" if draining else "undrain"
    url = out.api_url(api) + out.path_of("nodes", node)
    state = out.call("POST", f"{url}/{command}")
    if not wait:
        out.show(state, as_json, lambda n: typer.echo(_node_line(n)))
        return

    def judge(n: dict[str, Any]) -> str:
        if n["draining"] != draining:
            return out.WAITING  # the answering node's view follows within a moment
        return out.DONE if (not draining or n["jobs_owned"] == 0) else out.WAITING

    out.wait_for(
        lambda: out.call("GET", url),
        judge,
        _node_line,
        timeout=timeout,
        interval=1.0,
        on_end=lambda n: out.show(n, as_json, lambda m: typer.echo(_node_line(m))),
    )


_DRAIN_HELP = """Hand a node's jobs over to the other members of its groups before maintenance.

    The node stays up and listed, in no pool: the others take its jobs, re-attaching to the
    running applications (nothing restarts). --wait: until it owns no job. Platform admins
    only; refused (exit 4) for the last member of a group. Lasts until undrain or a restart."""
_UNDRAIN_HELP = "Put a drained node back into its groups' pools: it takes its share of jobs again."


def _drain_command(draining: bool) -> Any:
    """``drover nodes drain`` (``draining``) or ``undrain``."""

    def command(
        node: NodeArgument,
        api: ApiOption = None,
        wait: WaitOption = False,
        timeout: TimeoutOption = 120.0,
        as_json: JsonOption = False,
    ) -> None:
        _drain(node, draining, api, wait, timeout, as_json)

    command.__doc__ = _DRAIN_HELP if draining else _UNDRAIN_HELP
    return command


nodes_app.command("drain")(_drain_command(True))
nodes_app.command("undrain")(_drain_command(False))
