"""``drover jobs revisions|revision|rollback``: a job's spec history and rollbacks (through a
node's API; output, exit codes and paging from ``drover.cli.output``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from drover.cli import apps
from drover.cli import output as out

ApiOption = out.ApiOption
JsonOption = out.JsonOption


def register(jobs_app: typer.Typer) -> None:
    jobs_app.command("revisions")(
        out.job_list_command(
            "revisions",
            _render_revisions,
            "A job's revisions (every spec change; creation is revision 1), newest first.",
        )
    )
    jobs_app.command("revision")(jobs_revision)
    jobs_app.command("rollback")(jobs_rollback)


def _value(value: Any) -> str:
    return "-" if value is None else json.dumps(value, ensure_ascii=False)


def _render_revision(rev: dict[str, Any]) -> None:
    out.record(rev, ("job", "revision", "created_at", "cause", "message", "rollback_of"))
    for key, value in rev["spec"].items():
        typer.echo(f"  {key:<20} {_value(value)}")
    if rev.get("changes") is not None:
        typer.echo(f"changes from revision {rev['against']}:")
        if not rev["changes"]:
            typer.echo("  (none)")
        for change in rev["changes"]:
            typer.echo(
                f"  {change['kind']:<8} {change['path']}: {_value(change['before'])} -> "
                f"{_value(change['after'])}"
            )


def _render_revisions(page: dict[str, Any]) -> None:
    out.table(
        ("REVISION", "CREATED", "CAUSE", "ROLLBACK OF", "MESSAGE"),
        (
            (r["revision"], r["created_at"], r["cause"], r["rollback_of"], r["message"])
            for r in page["data"]
        ),
        empty="(no revisions)",
    )
    out.footer(f"{page['count']} revision(s)" + (" (cut by --limit)" if page["truncated"] else ""))


def jobs_revision(
    name: str,
    revision: Annotated[int, typer.Argument(min=1, help="the revision number")],
    against: Annotated[
        int | None, typer.Option(min=1, help="also show the changes from this revision to it")
    ] = None,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """One revision of a job's spec (and, with --against, what changed since that one)."""
    params = {"against": against} if against is not None else None
    rev = out.call("GET", out.job_url(api, name, f"/revisions/{revision}"), params=params)
    out.show(rev, as_json, _render_revision)


def jobs_rollback(
    name: str,
    to: Annotated[int, typer.Option("--to", min=1, help="the revision to roll back to")],
    grace: Annotated[
        float | None,
        typer.Option(
            "--grace",
            min=0,
            help="seconds the running pipeline may take to finish its micro-batch and exit "
            "before it is killed (default: the node's; 0: kill at once)",
        ),
    ] = None,
    if_match: out.IfMatchOption = None,
    wait: out.WaitOption = False,
    timeout: out.TimeoutOption = apps.DEFAULT_WAIT,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Roll a job's spec back to revision --to, as a new revision. On a running job that is an
    upgrade: graceful stop, then the old spec from the same checkpoint (--wait: until its new
    run is RUNNING)."""
    old_run = None
    if wait:
        current = out.call("GET", out.job_url(api, name)).get("current_run") or {}
        old_run = current.get("id")
    params = {"grace_seconds": grace} if grace is not None else None
    job = out.call(
        "POST",
        out.job_url(api, name, "/rollback"),
        json={"revision": to},
        params=params,
        headers=out.if_match(if_match),
    )
    if wait and job["desired_state"] == "RUNNING":
        apps.wait_job(name, api, "restart", timeout, as_json, old_run)
        return
    out.show(
        job,
        as_json,
        lambda j: typer.echo(
            f"{j['name']}: rolled back to revision {to} as revision {j['spec_version']}; "
            f"{apps.job_status(j)}"
        ),
    )
