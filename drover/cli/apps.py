"""The ``drover`` command tree: the typer apps every command module registers its commands on,
the root options, and what several command modules share beyond :mod:`drover.cli.output`: a
node's own settings and store (for the commands that run on the store's host) and following a
job until a command's effect is there.

``drover.cli.main`` imports the command modules and registers them here; no command module
imports ``main``.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from drover.cli import output as out
from scheduler.core.errors import DroverError

#: ``drover --help``
HELP = """The ``drover`` command line: run a node, migrate the store, and drive jobs, clusters,
groups, nodes, failovers and identities through a node's REST API.

Every command prints a table by default (ages such as 3m or 2h for times), or its result as
-o json|yaml|name|wide (--json is -o json), or one field per record with --field PATH (state,
current_run.state); stdout carries nothing else, counts and hints go to stderr. Errors are one
line on stderr. The node's URL and token come from --url/--token (before the command, or --api
after it), DROVER_URL/DROVER_TOKEN, or the config file written by `drover login`; the CLI
never reads a node's own settings to reach it. Shell completion: `drover completion bash`
(zsh, fish).
"""

app = out.new_app(
    add_completion=False,  # `drover completion SHELL` prints the script instead
    help=out.paragraphs(HELP),
    epilog=out.EXIT_CODES_HELP,
)
node_app = out.new_app(help="Run a Drover node.")
db_app = out.new_app(help="Metadata store schema.")
jobs_app = out.new_app(help="Jobs, through a node's REST API.")
app.add_typer(node_app, name="node")
app.add_typer(db_app, name="db")
app.add_typer(jobs_app, name="jobs")
clusters_app = out.new_app(help="Spark clusters, through a node's REST API.")
groups_app = out.new_app(help="Scheduling groups, through a node's REST API.")
app.add_typer(clusters_app, name="clusters")
app.add_typer(groups_app, name="groups")


@app.callback()
def _root(
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="DROVER_URL",
            help="node API URL for every command (DROVER_URL; default: the config file written "
            f"by drover login, else {out.DEFAULT_URL})",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="API token (default: DROVER_TOKEN, else the config file written by drover login)",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="print drover's version and exit",
        ),
    ] = False,
) -> None:
    out.GLOBAL.url = url
    out.GLOBAL.token = token


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"drover {version('drover')}")
        except PackageNotFoundError:  # a checkout that was never installed
            typer.echo("drover (not installed: no version)")
        raise typer.Exit()


#: the shells ``drover completion`` writes a script for
SHELLS = ("bash", "zsh", "fish")
#: what a completion script sets when it asks the command line for completions
COMPLETE_VAR = "_DROVER_COMPLETE"

if COMPLETE_VAR in os.environ:  # a shell asks for completions: typer's answerers, registered
    from typer._completion_classes import completion_init

    completion_init()


@app.command("completion")
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh or fish", metavar="SHELL")],
) -> None:
    """Print the shell completion script for SHELL: commands, options and arguments complete on
    Tab. Load it with `source <(drover completion bash)` (zsh: the same with zsh; fish:
    `drover completion fish | source`), or keep it where your shell loads completions from."""
    if shell not in SHELLS:
        out.fail(f"no completion for {shell!r}: one of {', '.join(SHELLS)}", out.Exit.USAGE)
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="drover", complete_var=COMPLETE_VAR, shell=shell))


def settings() -> Any:
    """This host's node settings (``drover node run``, ``drover db``, ``drover token create
    --admin``); a bad one fails the command with one line."""
    from scheduler.config import load_settings  # pydantic-settings: only where it is needed

    try:
        return load_settings()
    except DroverError as exc:
        out.fail_error(exc)


def store() -> Any:
    """The metadata store of this host's node settings."""
    from scheduler.store.db import Store

    return Store(settings().resolved_database_url)


# -- following a job ------------------------------------------------------------------------

#: seconds ``--wait`` follows a job by default
DEFAULT_WAIT = 300.0


def run_line(run: dict[str, Any] | None) -> str:
    if not run:
        return "-"
    app_id = run.get("app_id") or run.get("submission_id") or "no app yet"
    return f"#{run['attempt']} {run['state']} on {run['cluster']} ({app_id})"


def job_status(job: dict[str, Any]) -> str:
    reason = f" - {job['state_reason']}" if job.get("state_reason") else ""
    return (
        f"{job['name']}: {job['state']} (desired {job['desired_state']}), run "
        f"{run_line(job.get('current_run'))}{reason}"
    )


def wait_job(
    name: str,
    api: str | None,
    command: str,
    timeout: float,
    as_json: bool,
    old_run: int | None = None,
) -> None:
    """Follow the job until the command's effect is there (see :func:`judge`)."""

    def poll() -> dict[str, Any]:
        return out.api(api).get_job(name)  # type: ignore[no-any-return]

    def verdict(job: dict[str, Any]) -> str:
        return judge(command, job, old_run)

    def on_end(job: dict[str, Any]) -> None:
        out.show(job, as_json, lambda j: typer.echo(job_status(j)))

    out.wait_for(poll, verdict, job_status, timeout=timeout, interval=1.0, on_end=on_end)


def judge(command: str, job: dict[str, Any], old_run: int | None = None) -> str:
    """start and restart end at RUNNING (restart: on a new run), stop when nothing runs; a
    start that FAILED, or a desired state changed by someone else, ends badly."""
    state, desired = job["state"], job["desired_state"]
    run = job.get("current_run") or {}
    if command in ("start", "restart"):
        if desired != "RUNNING":
            return out.FAILED
        if state == "RUNNING" and (command == "start" or run.get("id") != old_run):
            return out.DONE
        if state in ("FAILED", "FINISHED") and (command == "start" or run.get("id") != old_run):
            return out.FAILED
        return out.WAITING
    if desired != "STOPPED":
        return out.FAILED
    return out.DONE if state in ("STOPPED", "FINISHED", "FAILED") else out.WAITING
