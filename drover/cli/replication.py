"""``drover replication list|show``: checkpoint replicas and their lag (through a node's API)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from drover.cli import output as out

replication_app = out.new_app(
    no_args_is_help=True,
    help="Checkpoint replicas in the failover clusters' storage roots, and their lag.",
)

ApiOption = out.ApiOption
JsonOption = out.JsonOption


def register(app: typer.Typer) -> None:
    app.add_typer(replication_app, name="replication")


def _batch(value: int | None) -> str:
    return "-" if value is None else str(value)


def _lag(view: dict) -> str:  # type: ignore[type-arg]
    if view["state"] is None:
        return "-"
    return f"{view['lag_batches']} ({view['lag_seconds']:.0f}s)"


def _render_replicas(page: dict[str, Any]) -> None:
    typer.echo(
        f"{'JOB':<32} {'STATE':<9} {'FROM':<12} {'TO':<12} {'SOURCE':>7} {'REPLICA':>7}  LAG"
    )
    for view in page["data"]:
        stale = "  (stale)" if view["stale"] else ""
        typer.echo(
            f"{view['job']:<32} {view['state'] or '-':<9} {view['source_cluster'] or '-':<12} "
            f"{view['target_cluster'] or '-':<12} {_batch(view['source_batch']):>7} "
            f"{_batch(view['replica_batch']):>7}  {_lag(view)}{stale}"
        )
    out.footer(f"{len(page['data'])} replica(s)")


@replication_app.command("list")
def replication_list(
    api: ApiOption = None,
    cluster: Annotated[str | None, typer.Option(help="replicas from or to this cluster")] = None,
    state: Annotated[
        str | None, typer.Option(help="PENDING, CURRENT, LAGGING, ERROR or PROMOTED")
    ] = None,
    team: Annotated[str | None, typer.Option()] = None,
    limit: out.LimitOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every replica the caller may see: state, source and replica batch, lag."""
    params = {"cluster": cluster, "state": state, "team": team}
    url = f"{out.api_url(api)}/v1/replication"
    out.show_all(url, "replicas", _render_replicas, as_json, limit, api, params)


@replication_app.command("show")
def replication_show(name: str, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """One job's replica: where it is, the batches, the lag, the last copy and any error."""
    view = out.call("GET", out.job_url(api, name, "/replication"))
    if as_json:
        out.print_json(view)
        return
    typer.echo(f"job       {view['job']}  (replicated: {'yes' if view['enabled'] else 'no'})")
    if view["state"] is None:
        typer.echo(f"replica   none{': ' + view['reason'] if view['reason'] else ''}")
        return
    typer.echo(f"state     {view['state']}{'  (stale figures)' if view['stale'] else ''}")
    typer.echo(f"source    {view['source_cluster']}  {view['source_location']}")
    typer.echo(f"replica   {view['target_cluster']}  {view['location']}")
    typer.echo(
        f"batches   source {_batch(view['source_batch'])}, replica "
        f"{_batch(view['replica_batch'])}: lag {view['lag_batches']} batch(es), "
        f"{view['lag_seconds']:.1f} s"
    )
    typer.echo(f"looked    {view['observed_at'] or '-'} by {view['node'] or '-'}")
    typer.echo(
        f"copied    {view['files_copied']} files, {view['bytes_copied']} bytes in all; last "
        f"{view['last_copy_files']} files, {view['last_copy_bytes']} bytes in "
        f"{view['last_copy_seconds']:.2f} s at {view['last_copy_at'] or '-'}"
    )
    if view["held_by"]:
        typer.echo(f"held by   {view['held_by']} until {view['held_until']}")
    if view["error"]:
        typer.echo(f"error     {view['error']} (since {view['error_since']})")
