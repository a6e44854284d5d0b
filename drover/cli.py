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
clusters_app = typer.Typer(no_args_is_help=True, help="Spark clusters, through a node's REST API.")
groups_app = typer.Typer(no_args_is_help=True, help="Scheduling groups, through a node's REST API.")
app.add_typer(clusters_app, name="clusters")
app.add_typer(groups_app, name="groups")

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
    from drover.node import run_node

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


def _auth_headers() -> dict[str, str]:
    """The caller's credential (``DROVER_TOKEN`` or ``drover login``) and the explicit-client
    header every mutation needs."""
    from drover import credentials

    headers = {"X-Drover-Client": "drover-cli"}
    try:
        token = credentials.token()
    except DroverError as exc:
        _fail(exc.message)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _call(method: str, url: str, **kwargs: Any) -> Any:
    import httpx

    kwargs["headers"] = {**_auth_headers(), **kwargs.get("headers", {})}
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


# -- clusters and groups -------------------------------------------------------------------


def _resource_url(api: str | None, kind: str, name: str | None = None) -> str:
    from urllib.parse import quote

    base = f"{_api(api)}/v1/{kind}"
    return base if name is None else f"{base}/{quote(name, safe='')}"


def _if_match(version: int | None) -> dict[str, str]:
    return {} if version is None else {"If-Match": f'"{version}"'}


KindOption = Annotated[str | None, typer.Option(help="standalone | spark-submit | local")]
RootOption = Annotated[
    str | None, typer.Option(help="checkpoint storage root: absolute path, file:// or s3a:// URI")
]
MasterOption = Annotated[str | None, typer.Option(help="Spark master URL")]
RestOption = Annotated[str | None, typer.Option(help="REST submission server URL (standalone)")]
UiOption = Annotated[str | None, typer.Option(help="master web UI URL (standalone)")]
AzOption = Annotated[str | None, typer.Option(help="availability zone")]
CloudOption = Annotated[str | None, typer.Option(help="cloud")]
SubmissionsOption = Annotated[
    int | None, typer.Option(help="most submissions in flight at once (0 = unlimited)")
]
AppsOption = Annotated[int | None, typer.Option(help="most live applications (0 = unlimited)")]
CoresOption = Annotated[int | None, typer.Option(help="most cores of live apps (0 = unlimited)")]
VersionOption = Annotated[
    int | None, typer.Option("--if-version", help="refuse unless the record is at this version")
]


def _cluster_fields(**options: Any) -> dict[str, Any]:
    return {key: value for key, value in options.items() if value is not None}


@clusters_app.command("list")
def clusters_list(api: ApiOption = None) -> None:
    page = _call("GET", _resource_url(api, "clusters"), params={"limit": 1000})
    for c in page["data"]:
        typer.echo(
            f"{c['name']:<24} {c['kind']:<12} {c['health']:<18} az={c['az'] or '-':<12} "
            f"{c['master_url'] or '-':<28} {c['storage_root']}"
        )
    typer.echo(f"{page['count']} cluster(s)")


@clusters_app.command("get")
def clusters_get(name: str, api: ApiOption = None) -> None:
    _print(_call("GET", _resource_url(api, "clusters", name)))


@clusters_app.command("create")
def clusters_create(
    name: str,
    kind: Annotated[str, typer.Option(help="standalone | spark-submit | local")],
    storage_root: Annotated[
        str, typer.Option(help="checkpoint storage root: absolute path, file:// or s3a:// URI")
    ],
    api: ApiOption = None,
    master_url: MasterOption = None,
    rest_url: RestOption = None,
    ui_url: UiOption = None,
    az: AzOption = None,
    cloud: CloudOption = None,
    max_concurrent_submissions: SubmissionsOption = None,
    max_running_apps: AppsOption = None,
    max_cores: CoresOption = None,
) -> None:
    """Add a Spark cluster."""
    body = {"name": name, "kind": kind, "storage_root": storage_root}
    body |= _cluster_fields(
        master_url=master_url,
        rest_url=rest_url,
        ui_url=ui_url,
        az=az,
        cloud=cloud,
        max_concurrent_submissions=max_concurrent_submissions,
        max_running_apps=max_running_apps,
        max_cores=max_cores,
    )
    _print(_call("POST", _resource_url(api, "clusters"), json=body))


@clusters_app.command("update")
def clusters_update(
    name: str,
    api: ApiOption = None,
    kind: KindOption = None,
    storage_root: RootOption = None,
    master_url: MasterOption = None,
    rest_url: RestOption = None,
    ui_url: UiOption = None,
    az: AzOption = None,
    cloud: CloudOption = None,
    max_concurrent_submissions: SubmissionsOption = None,
    max_running_apps: AppsOption = None,
    max_cores: CoresOption = None,
    if_version: VersionOption = None,
) -> None:
    """Change the fields given; the others stay as they are."""
    body = _cluster_fields(
        kind=kind,
        storage_root=storage_root,
        master_url=master_url,
        rest_url=rest_url,
        ui_url=ui_url,
        az=az,
        cloud=cloud,
        max_concurrent_submissions=max_concurrent_submissions,
        max_running_apps=max_running_apps,
        max_cores=max_cores,
    )
    if not body:
        _fail("nothing to change: give at least one option")
    url = _resource_url(api, "clusters", name)
    _print(_call("PATCH", url, json=body, headers=_if_match(if_version)))


# -- cluster health (runbook: docs/runbooks/cluster-flapping.md) ------------------------------

JsonOption = Annotated[bool, typer.Option("--json", help="print the API's JSON instead")]


def _short_time(value: str | None) -> str:
    """An ISO timestamp as ``HH:MM:SS`` (UTC), or ``-``."""
    return value[11:19] if value else "-"


@clusters_app.command("health")
def clusters_health(
    name: str,
    api: ApiOption = None,
    as_json: JsonOption = False,
    history: Annotated[int, typer.Option(help="transitions shown")] = 10,
) -> None:
    """A cluster's health: state and reason, what the votes say now, each node's vote, history."""
    data = _call(
        "GET", _resource_url(api, "clusters", name) + "/health", params={"history": history}
    )
    if as_json:
        _print(data)
        return
    typer.echo(f"cluster  {data['cluster']}")
    typer.echo(f"state    {data['state']}  since {data['since'] or '-'}")
    typer.echo(f"reason   {data['reason'] or '-'}")
    assessment = data["assessment"]
    typer.echo(f"votes say {assessment['state']}: {assessment['reason']}")
    if assessment["normal_not_before"]:
        typer.echo(f"NORMAL not before {assessment['normal_not_before']}")
    typer.echo(f"failed probes in the threshold window: {assessment['recent_failures']}")
    typer.echo("")
    typer.echo(f"{'NODE':<24} {'VOTE':<6} {'AT':<9} {'LATENCY':>8}  COUNTED  DETAIL")
    for v in data["votes"]:
        typer.echo(
            f"{v['node_id']:<24} {'ok' if v['ok'] else 'FAIL':<6} {_short_time(v['at']):<9} "
            f"{v['latency_s']:>7.3f}s  {'yes' if v['counted'] else 'no':<7}  {v['detail']}"
        )
    if not data["votes"]:
        typer.echo("(no fresh votes)")
    typer.echo("")
    typer.echo(f"{'AT':<20} {'FROM':<18} {'TO':<18} {'BY':<30} REASON")
    for e in data["history"]:
        by = f"{e['decided_by']}:{e['actor']}"
        typer.echo(
            f"{e['at'][:19]:<20} {e['from_state']:<18} {e['to_state']:<18} {by:<30} {e['reason']}"
        )
    if not data["history"]:
        typer.echo("(no transitions)")


@clusters_app.command("mark-abnormal")
def clusters_mark_abnormal(
    name: str,
    reason: Annotated[str, typer.Option(help="why (shown on the cluster's jobs and audited)")],
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mark a cluster MANUAL_ABNORMAL: nothing is started there until it is cleared."""
    event = _call(
        "POST", _resource_url(api, "clusters", name) + "/mark-abnormal", json={"reason": reason}
    )
    if as_json:
        _print(event)
        return
    typer.echo(f"cluster {name}: {event['from_state']} -> {event['to_state']} ({event['reason']})")


@clusters_app.command("clear")
def clusters_clear(
    name: str,
    reason: Annotated[str, typer.Option(help="why (audited)")] = "",
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Lift a manual mark: the cluster is NORMAL again (the monitor keeps judging it)."""
    event = _call("POST", _resource_url(api, "clusters", name) + "/clear", json={"reason": reason})
    if as_json:
        _print(event)
        return
    typer.echo(f"cluster {name}: {event['from_state']} -> {event['to_state']}")


@groups_app.command("list")
def groups_list(api: ApiOption = None) -> None:
    page = _call("GET", _resource_url(api, "groups"), params={"limit": 1000})
    for g in page["data"]:
        typer.echo(
            f"{g['name']:<24} primary={g['primary_cluster']:<24} "
            f"failover={g['failover_cluster'] or '-'}"
        )
    typer.echo(f"{page['count']} group(s)")


@groups_app.command("get")
def groups_get(name: str, api: ApiOption = None) -> None:
    _print(_call("GET", _resource_url(api, "groups", name)))


@groups_app.command("create")
def groups_create(
    name: str,
    primary: Annotated[str, typer.Option("--primary", help="primary cluster")],
    failover: Annotated[str | None, typer.Option("--failover", help="failover cluster")] = None,
    api: ApiOption = None,
) -> None:
    """Add a scheduling group bound to a primary (and optionally a failover) cluster."""
    body = {"name": name, "primary_cluster": primary, "failover_cluster": failover}
    _print(_call("POST", _resource_url(api, "groups"), json=body))


@groups_app.command("delete")
def groups_delete(name: str, api: ApiOption = None, if_version: VersionOption = None) -> None:
    """Delete an empty group (refused while it has jobs; never the default group)."""
    _call("DELETE", _resource_url(api, "groups", name), headers=_if_match(if_version))
    typer.echo(f"{name}: deleted")


from drover.cli_identity import register as _register_identity  # noqa: E402

_register_identity(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
