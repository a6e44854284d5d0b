"""``drover quotas list|show|set|delete``: per-business submission quotas (through a node's API).

A quota is a rate limit (``--rate`` submissions per second, ``--burst`` at once) shared by every
node, and/or a dedicated group for the business. Per-cluster caps are set on the cluster:
``drover clusters update NAME --max-concurrent-submissions N --max-running-apps N``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from drover.cli import output as out

quotas_app = out.new_app(
    no_args_is_help=True,
    help="Per-business submission quotas: rate limits and dedicated groups.",
)

ApiOption = out.ApiOption
JsonOption = out.JsonOption
VersionOption = out.VersionOption
#: how many pages ``list`` follows at most before it says the list was cut
MAX_PAGES = 100


def register(app: typer.Typer) -> None:
    app.add_typer(quotas_app, name="quotas")


def _rate(quota: dict[str, Any]) -> str:
    return "-" if quota["rate"] is None else f"{quota['rate']:g}/s"


def _tokens(quota: dict[str, Any]) -> str:
    return "-" if quota["tokens"] is None else f"{quota['tokens']:.1f}"


@quotas_app.command("list")
def quotas_list(api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Every quota, by business (a business without one is not rate limited)."""
    url: str | None = f"{out.api_url(api)}/v1/quotas?limit=1000"
    quotas: list[dict[str, Any]] = []
    pages = 0
    while url is not None and pages < MAX_PAGES:
        page = out.call("GET", url)
        quotas += page["data"]
        pages += 1
        url = f"{out.api_url(api)}{page['next']}" if page["next"] else None
    cut = url is not None
    if as_json:
        out.print_json({"data": quotas, "complete": not cut})
        return
    typer.echo(f"{'BUSINESS':<32} {'RATE':>10} {'BURST':>7} {'TOKENS':>8}  DEDICATED GROUP")
    for q in quotas:
        typer.echo(
            f"{q['business']:<32} {_rate(q):>10} {q['burst']:>7} {_tokens(q):>8}  "
            f"{q['dedicated_group'] or '-'}"
        )
    out.footer(f"{len(quotas)} quota(s)" + (" (cut: more follow)" if cut else ""))


@quotas_app.command("show")
def quotas_show(business: str, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """One business's quota."""
    q = out.call("GET", out.resource_url(api, "quotas", business))
    if as_json:
        out.print_json(q)
        return
    typer.echo(f"business         {q['business']}")
    typer.echo(f"rate             {_rate(q)} (burst {q['burst']}, now {_tokens(q)} at once)")
    typer.echo(f"dedicated group  {q['dedicated_group'] or '-'}")
    typer.echo(f"YARN queue       {q.get('yarn_queue') or '-'}")
    typer.echo(f"version          {q['version']} (by {q['updated_by']} at {q['updated_at']})")


@quotas_app.command("set")
def quotas_set(
    business: str,
    rate: Annotated[
        float | None, typer.Option(help="submissions per second across all nodes (none: no limit)")
    ] = None,
    burst: Annotated[int, typer.Option(help="submissions at once after a quiet period")] = 1,
    dedicated_group: Annotated[
        str | None, typer.Option(help="the group reserved for the business's jobs")
    ] = None,
    yarn_queue: Annotated[
        str | None, typer.Option(help="the YARN queue of the business's applications")
    ] = None,
    api: ApiOption = None,
    if_version: VersionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create or replace a business's quota (a rate, a dedicated group, a YARN queue)."""
    body: dict[str, Any] = {
        "rate": rate,
        "burst": burst,
        "dedicated_group": dedicated_group,
        "yarn_queue": yarn_queue,
    }
    q = out.call(
        "PUT",
        out.resource_url(api, "quotas", business),
        json=body,
        headers=out.if_match(if_version),
    )
    if as_json:
        out.print_json(q)
        return
    typer.echo(
        f"{q['business']}: rate {_rate(q)}, burst {q['burst']}, dedicated group "
        f"{q['dedicated_group'] or '-'}"
        + (f", YARN queue {q['yarn_queue']}" if q.get("yarn_queue") else "")
        + f" (version {q['version']})"
    )


@quotas_app.command("delete")
def quotas_delete(
    business: str,
    api: ApiOption = None,
    if_version: VersionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a business's quota: no rate limit, no dedicated group."""
    out.call("DELETE", out.resource_url(api, "quotas", business), headers=out.if_match(if_version))
    if as_json:
        out.print_json({"business": business, "deleted": True})
        return
    typer.echo(f"{business}: quota deleted")
