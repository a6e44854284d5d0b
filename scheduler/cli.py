"""The ``drover`` command line: run a node, migrate the store, drive jobs through the API.

Errors are one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from scheduler.config import load_settings
from scheduler.errors import DroverError
from scheduler.logs import configure_logging

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
node_app = typer.Typer(no_args_is_help=True, help="Run a Drover node.")
db_app = typer.Typer(no_args_is_help=True, help="Metadata store schema.")
jobs_app = typer.Typer(no_args_is_help=True, help="Jobs, through a node's REST API.")
app.add_typer(node_app, name="node")
app.add_typer(db_app, name="db")
app.add_typer(jobs_app, name="jobs")

ApiOption = Annotated[
    str | None, typer.Option("--api", help="node API URL (default: DROVER_API_HOST/PORT)")
]


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"drover: {message}", err=True)
    raise typer.Exit(code)


def _settings() -> Any:
    try:
        return load_settings()
    except DroverError as exc:
        _fail(exc.message)


# -- node -----------------------------------------------------------------------------------


@node_app.command("run")
def node_run() -> None:
    """Start a node: API on DROVER_API_HOST:DROVER_API_PORT plus its actors."""
    from scheduler.node import run_node

    configure_logging()
    settings = _settings()
    try:
        run_node(settings)
    except DroverError as exc:
        _fail(exc.message)


# -- db -------------------------------------------------------------------------------------


def _store() -> Any:
    from scheduler.store.db import Store

    return Store(_settings().resolved_database_url)


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Migrate the store to REVISION (default: the newest)."""
    store = _store()
    try:
        store.upgrade(revision)
        typer.echo(f"database at {store.current_revision()}")
    except DroverError as exc:
        _fail(exc.message)
    finally:
        store.dispose()


@db_app.command("downgrade")
def db_downgrade(revision: str = typer.Argument(..., help="target revision, or 'base'")) -> None:
    """Migrate the store back to REVISION."""
    store = _store()
    try:
        store.downgrade(revision)
        typer.echo(f"database at {store.current_revision() or 'base'}")
    except DroverError as exc:
        _fail(exc.message)
    finally:
        store.dispose()


@db_app.command("current")
def db_current() -> None:
    """Print the store's schema revision and the code's."""
    store = _store()
    try:
        typer.echo(
            f"database: {store.current_revision() or 'empty'}  code: {store.head_revision()}"
        )
    except DroverError as exc:
        _fail(exc.message)
    finally:
        store.dispose()


# -- jobs -----------------------------------------------------------------------------------


def _api(api: str | None) -> str:
    return (api or _settings().resolved_api_url).rstrip("/")


def _call(method: str, url: str, **kwargs: Any) -> Any:
    import httpx

    try:
        response = httpx.request(method, url, timeout=30, **kwargs)
    except httpx.HTTPError as exc:
        _fail(f"cannot reach {url}: {exc}")
    if response.status_code >= 400:
        try:
            body = response.json()
            _fail(f"{response.status_code} {body.get('title', '')}: {body.get('detail', '')}")
        except ValueError:
            _fail(f"{response.status_code}: {response.text[:200]}")
    return response.json() if response.content else None


def _print(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _job_url(api: str | None, name: str, suffix: str = "") -> str:
    from urllib.parse import quote

    return f"{_api(api)}/v1/jobs/{quote(name, safe='')}{suffix}"


@jobs_app.command("list")
def jobs_list(
    api: ApiOption = None,
    state: Annotated[str | None, typer.Option()] = None,
    team: Annotated[str | None, typer.Option()] = None,
    group: Annotated[str | None, typer.Option()] = None,
) -> None:
    params = {k: v for k, v in {"state": state, "team": team, "group": group}.items() if v}
    page = _call("GET", f"{_api(api)}/v1/jobs", params=params)
    for job in page["data"]:
        typer.echo(
            f"{job['name']:<40} {job['state']:<11} desired={job['desired_state']:<8} "
            f"cluster={job['cluster'] or '-'}"
        )
    typer.echo(f"{page['count']} job(s)")


@jobs_app.command("get")
def jobs_get(name: str, api: ApiOption = None) -> None:
    _print(_call("GET", _job_url(api, name)))


@jobs_app.command("create")
def jobs_create(
    name: str,
    entrypoint: Annotated[str, typer.Option(help="pipeline file: path or file:// URL")],
    api: ApiOption = None,
    group: str = "default",
    team: str = "",
    business: str = "",
    priority: str = "normal",
    arg: Annotated[list[str] | None, typer.Option("--arg", help="a pipeline argument")] = None,
    conf: Annotated[
        list[str] | None, typer.Option("--conf", help="KEY=VALUE Spark property")
    ] = None,
    start: Annotated[bool, typer.Option(help="start it at once")] = False,
) -> None:
    properties = {}
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"--conf needs KEY=VALUE, got {item!r}")
        properties[key] = value
    if "://" not in entrypoint:
        entrypoint = str(Path(entrypoint).resolve())
    body = {
        "name": name,
        "entrypoint": entrypoint,
        "group": group,
        "team": team,
        "business": business,
        "priority": priority,
        "args": list(arg or []),
        "conf": properties,
        "desired_state": "RUNNING" if start else "STOPPED",
    }
    _print(_call("POST", f"{_api(api)}/v1/jobs", json=body))


def _command(command: str, name: str, api: str | None) -> None:
    job = _call("POST", _job_url(api, name, f"/{command}"))
    typer.echo(f"{job['name']}: desired {job['desired_state']}, state {job['state']}")


@jobs_app.command("start")
def jobs_start(name: str, api: ApiOption = None) -> None:
    _command("start", name, api)


@jobs_app.command("stop")
def jobs_stop(name: str, api: ApiOption = None) -> None:
    _command("stop", name, api)


@jobs_app.command("restart")
def jobs_restart(name: str, api: ApiOption = None) -> None:
    _command("restart", name, api)


@jobs_app.command("delete")
def jobs_delete(name: str, api: ApiOption = None) -> None:
    _call("DELETE", _job_url(api, name))
    typer.echo(f"{name}: deleted")


@jobs_app.command("runs")
def jobs_runs(name: str, api: ApiOption = None) -> None:
    for run in _call("GET", _job_url(api, name, "/runs"))["data"]:
        typer.echo(
            f"#{run['attempt']:<4} {run['state']:<9} {run['cluster']:<12} "
            f"start={run['started_at'] or '-'} end={run['ended_at'] or '-'} {run['reason']}"
        )


@jobs_app.command("events")
def jobs_events(name: str, api: ApiOption = None) -> None:
    for event in reversed(_call("GET", _job_url(api, name, "/events"))["data"]):
        change = f"{event['from_state'] or ''}->{event['to_state'] or ''}"
        typer.echo(f"{event['at']} {change:<22} {event['cause']}: {event['message']}")


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
