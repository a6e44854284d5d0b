"""The ``drover`` console entry point: the node, db, jobs, clusters and groups commands, and
the other command modules' commands registered on the apps of :mod:`drover.cli.apps` (whose
``HELP`` is what ``drover --help`` says the command line does).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from drover.cli import apps, bulk, failover, identity, nodes, quotas, replication, revisions
from drover.cli import output as out
from drover.cli.apps import (
    DEFAULT_WAIT,
    app,
    clusters_app,
    db_app,
    groups_app,
    job_status,
    jobs_app,
    judge,
    node_app,
    run_line,
    wait_job,
)
from drover.cli.output import (
    ApiOption,
    Exit,
    IfMatchOption,
    JsonOption,
    LimitOption,
    TimeoutOption,
    VersionOption,
    WaitOption,
)
from scheduler.core.errors import DroverError

# -- node -----------------------------------------------------------------------------------


@node_app.command("run")
def node_run() -> None:
    """Start a node: API on DROVER_API_HOST:DROVER_API_PORT plus its actors."""
    from drover.node import run_node
    from scheduler.core.logs import configure_from, configure_logging

    configure_logging()
    settings = apps.settings()
    configure_from(settings, "api")
    try:
        run_node(settings)
    except DroverError as exc:
        out.fail_error(exc)


# -- db -------------------------------------------------------------------------------------


@db_app.command("upgrade")
def db_upgrade(revision: str = "head", as_json: JsonOption = False) -> None:
    """Migrate the store to REVISION (default: the newest)."""
    store = apps.store()
    try:
        store.upgrade(revision)
        current = store.current_revision()
    except DroverError as exc:
        out.fail_error(exc)
    finally:
        store.dispose()
    out.show({"revision": current}, as_json, lambda d: typer.echo(f"database at {current}"))


@db_app.command("downgrade")
def db_downgrade(
    revision: str = typer.Argument(..., help="target revision, or 'base'"),
    as_json: JsonOption = False,
) -> None:
    """Migrate the store back to REVISION."""
    store = apps.store()
    try:
        store.downgrade(revision)
        current = store.current_revision()
    except DroverError as exc:
        out.fail_error(exc)
    finally:
        store.dispose()
    out.show(
        {"revision": current}, as_json, lambda d: typer.echo(f"database at {current or 'base'}")
    )


@db_app.command("current")
def db_current(as_json: JsonOption = False) -> None:
    """Print the store's schema revision and the code's."""
    store = apps.store()
    try:
        doc = {"database": store.current_revision(), "code": store.head_revision()}
    except DroverError as exc:
        out.fail_error(exc)
    finally:
        store.dispose()
    out.show(
        doc,
        as_json,
        lambda d: typer.echo(f"database: {d['database'] or 'empty'}  code: {d['code']}"),
    )


# -- jobs -----------------------------------------------------------------------------------


def _pairs(items: list[str] | None, option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            out.fail(f"{option} needs KEY=VALUE, got {item!r}", Exit.USAGE)
        pairs[key] = value
    return pairs


def _entrypoint(value: str) -> str:
    return value if "://" in value else str(Path(value).resolve())


JOB_FIELDS = (
    "name", "state", "state_reason", "desired_state", "group", "cluster", "owner", "team",
    "business", "priority", "entrypoint", "args", "conf", "labels", "checkpoint_location",
    "replicate", "stall_after", "on_stall", "spec_version", "version", "created_at", "updated_at",
)  # fmt: skip


def _render_job(job: dict[str, Any]) -> None:
    out.record(job, JOB_FIELDS)
    run = job.get("current_run")
    typer.echo(f"{'current_run'.ljust(19)}  {run_line(run)}")
    progress = job.get("progress")
    if progress:
        typer.echo(f"{'progress'.ljust(19)}  {out.cell(progress)}")


def _render_jobs(page: dict[str, Any]) -> None:
    headers = ("NAME", "STATE", "DESIRED", "CLUSTER", "OWNER", "TEAM", "PRIORITY", "GROUP")
    wide = ("BUSINESS", "RUN", "APP", "LABELS", "UPDATED")  # -o wide

    def row(j: dict[str, Any]) -> tuple[Any, ...]:
        base = (
            j["name"], j["state"], j["desired_state"], j["cluster"], j["owner"], j["team"],
            j["priority"], j["group"],
        )  # fmt: skip
        if not out.wide():
            return base
        run = j.get("current_run") or {}
        app = run.get("app_id") or run.get("submission_id")
        return (*base, j["business"], run.get("attempt"), app, j["labels"], j["updated_at"])

    out.table(
        headers + wide if out.wide() else headers,
        (row(j) for j in page["data"]),
        empty="(no jobs)",
    )
    out.footer(f"{page['count']} job(s)" + (" (cut by --limit)" if page["truncated"] else ""))


@jobs_app.command("list")
def jobs_list(
    api: ApiOption = None,
    state: Annotated[str | None, typer.Option(help="observed state, e.g. RUNNING")] = None,
    desired: Annotated[str | None, typer.Option(help="RUNNING or STOPPED")] = None,
    team: Annotated[str | None, typer.Option()] = None,
    business: Annotated[str | None, typer.Option()] = None,
    group: Annotated[str | None, typer.Option()] = None,
    cluster: Annotated[str | None, typer.Option()] = None,
    priority: Annotated[str | None, typer.Option(help="high | normal | low")] = None,
    prefix: Annotated[str | None, typer.Option(help="names beginning with this")] = None,
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="key=value, key!=value, key or !key (repeatable)"),
    ] = None,
    search: Annotated[str | None, typer.Option("--search", "-q", help="name contains")] = None,
    sort: Annotated[str, typer.Option(help="name, state, updated_at; '-' for descending")] = "name",
    limit: LimitOption = None,
    as_json: JsonOption = False,
) -> None:
    """Jobs matching every filter given: all of them (every page), or the first --limit."""
    params = {
        "state": state,
        "desired_state": desired,
        "team": team,
        "business": business,
        "group": group,
        "cluster": cluster,
        "priority": priority,
        "name_prefix": prefix,
        "label": label,
        "q": search,
        "sort": sort,
    }
    url = out.resource_url(api, "jobs")
    out.show_all(url, "jobs", _render_jobs, as_json, limit, api, params)


@jobs_app.command("get")
def jobs_get(name: str, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """One job: spec, state, owner, current run, progress."""
    out.show(out.api(api).get_job(name), as_json, _render_job)


def _command(
    command: str,
    name: str,
    api: str | None,
    if_match: int | None,
    wait: bool,
    timeout: float,
    as_json: bool,
    grace: float | None = None,
) -> None:
    old_run = None
    if command == "restart" and wait:
        current = out.api(api).get_job(name).get("current_run") or {}
        old_run = current.get("id")
    operations = out.api(api)
    # a key of its own: the client may send the command again (no answer, 503) at no risk
    key = out.idempotency_key()
    if command == "start":
        job = operations.start_job(name, if_match=out.etag(if_match), idempotency_key=key)
    else:
        act = operations.stop_job if command == "stop" else operations.restart_job
        job = act(name, if_match=out.etag(if_match), grace_seconds=grace, idempotency_key=key)
    if not wait:
        out.show(job, as_json, lambda j: typer.echo(job_status(j)))
        return
    wait_job(name, api, command, timeout, as_json, old_run)


GraceOption = Annotated[
    float | None,
    typer.Option(
        "--grace",
        min=0,
        help="seconds a self-fencing pipeline may take to finish its micro-batch and exit "
        "before it is killed (default: the node's DROVER_STOP_GRACE_SECONDS for stop and "
        "restart, DROVER_UPGRADE_GRACE_SECONDS for an upgrade; 0: kill at once)",
        show_default=False,
    ),
]


@jobs_app.command("start")
def jobs_start(
    name: str,
    api: ApiOption = None,
    if_match: IfMatchOption = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = DEFAULT_WAIT,
    as_json: JsonOption = False,
) -> None:
    """Ask for the job to run (--wait: until it is RUNNING)."""
    _command("start", name, api, if_match, wait, timeout, as_json)


def _graceful_command(command: str) -> Any:
    """``drover jobs stop`` or ``restart``: a command that takes ``--grace``."""

    def run(
        name: str,
        api: ApiOption = None,
        if_match: IfMatchOption = None,
        grace: GraceOption = None,
        wait: WaitOption = False,
        timeout: TimeoutOption = DEFAULT_WAIT,
        as_json: JsonOption = False,
    ) -> None:
        _command(command, name, api, if_match, wait, timeout, as_json, grace)

    run.__doc__ = {
        "stop": "Ask for the job to stop (--wait: until its application is confirmed gone).",
        "restart": "Replace the job's run by a new one from its checkpoint (--wait: until that "
        "is RUNNING).",
    }[command]
    return run


for _graceful in ("stop", "restart"):
    jobs_app.command(_graceful)(_graceful_command(_graceful))


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
    label: Annotated[list[str] | None, typer.Option("--label", help="KEY=VALUE label")] = None,
    start: Annotated[bool, typer.Option(help="start it at once")] = False,
    replicate: Annotated[
        bool | None,
        typer.Option(
            "--replicate/--no-replicate",
            help="mirror its checkpoint to the failover cluster (default: if high priority)",
        ),
    ] = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = DEFAULT_WAIT,
    as_json: JsonOption = False,
) -> None:
    """Create a job (--start: and start it; --wait: until it is RUNNING)."""
    body: dict[str, Any] = {
        "name": name,
        "entrypoint": _entrypoint(entrypoint),
        "group": group,
        "team": team,
        "business": business,
        "priority": priority,
        "args": list(arg or []),
        "conf": _pairs(conf, "--conf"),
        "labels": _pairs(label, "--label"),
        "desired_state": "RUNNING" if start else "STOPPED",
    }
    if replicate is not None:
        body["replicate"] = replicate
    if wait and not start:
        out.fail("--wait goes with --start", Exit.USAGE)
    job = out.api(api).create_job(body, idempotency_key=out.idempotency_key())
    if wait:
        wait_job(name, api, "start", timeout, as_json)
        return
    out.show(job, as_json, _render_job)


@jobs_app.command("update")
def jobs_update(
    name: str,
    api: ApiOption = None,
    arg: Annotated[
        list[str] | None,
        typer.Option("--arg", help="the new argument list, one --arg each (replaces them all)"),
    ] = None,
    no_args: Annotated[bool, typer.Option("--no-args", help="clear the arguments")] = False,
    conf: Annotated[
        list[str] | None, typer.Option("--conf", help="set a Spark property KEY=VALUE")
    ] = None,
    unset_conf: Annotated[
        list[str] | None, typer.Option("--unset-conf", help="remove a Spark property KEY")
    ] = None,
    label: Annotated[
        list[str] | None, typer.Option("--label", help="set a label KEY=VALUE")
    ] = None,
    unset_label: Annotated[
        list[str] | None, typer.Option("--unset-label", help="remove a label KEY")
    ] = None,
    entrypoint: Annotated[str | None, typer.Option(help="new pipeline file")] = None,
    priority: Annotated[str | None, typer.Option(help="high | normal | low")] = None,
    team: Annotated[str | None, typer.Option()] = None,
    business: Annotated[str | None, typer.Option()] = None,
    if_match: IfMatchOption = None,
    grace: GraceOption = None,
    rollback_after: Annotated[
        float | None,
        typer.Option(
            "--rollback-after",
            min=0.001,
            help="an upgrade (new entrypoint, args, conf or checkpoint location of a running "
            "job) that is not RUNNING within this many seconds rolls back by itself",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="a running job's change is an upgrade: follow it until the new spec is "
            "RUNNING (exit 8 if it rolled back)",
        ),
    ] = False,
    timeout: TimeoutOption = DEFAULT_WAIT,
    as_json: JsonOption = False,
) -> None:
    """Change a job's spec: what is given changes, the rest stays.

    --conf and --label change single keys of the current maps. Without --if-match the change
    is still conditional: on the spec version read just before (exit 4 if it moved meanwhile).

    On a running job, a new entrypoint, args, conf or checkpoint location is an upgrade: the
    pipeline is asked to finish its micro-batch and exit (--grace), then the new spec starts
    from the same checkpoint; --rollback-after rolls it back by itself if it does not run.
    """
    if arg and no_args:
        out.fail("--arg and --no-args exclude each other", Exit.USAGE)
    body: dict[str, Any] = {}
    if arg or no_args:
        body["args"] = list(arg or [])
    for key, value in (
        ("entrypoint", _entrypoint(entrypoint) if entrypoint else None),
        ("priority", priority),
        ("team", team),
        ("business", business),
    ):
        if value is not None:
            body[key] = value
    expected = if_match
    current: dict[str, Any] = {}
    if conf or unset_conf or label or unset_label or expected is None or wait:
        current = out.api(api).get_job(name)
        if expected is None:
            expected = int(current["spec_version"])
        if conf or unset_conf:
            merged = {**current["conf"], **_pairs(conf, "--conf")}
            for key in unset_conf or []:
                merged.pop(key, None)
            body["conf"] = merged
        if label or unset_label:
            labels = {**current["labels"], **_pairs(label, "--label")}
            for key in unset_label or []:
                labels.pop(key, None)
            body["labels"] = labels
    if not body:
        out.fail("nothing to change: give at least one option", Exit.USAGE)
    job = out.api(api).update_job(
        name,
        body,
        if_match=out.etag(expected),
        grace_seconds=grace,
        rollback_after_seconds=rollback_after,
    )
    if not wait or current.get("desired_state") != "RUNNING":
        out.show(job, as_json, _render_job)  # a stopped job's change waits for nothing
        return
    old_run = (current.get("current_run") or {}).get("id")
    version = job["spec_version"]

    def verdict(now: dict[str, Any]) -> str:
        if now["spec_version"] != version:
            return out.FAILED  # rolled back (a new revision), or changed by someone else
        return judge("restart", now, old_run)

    def describe(now: dict[str, Any]) -> str:
        moved = now["spec_version"] != version
        note = f" (spec now at version {now['spec_version']}: rolled back?)" if moved else ""
        return f"upgrade to spec version {version}: {job_status(now)}{note}"

    out.wait_for(
        lambda: out.api(api).get_job(name),
        verdict,
        describe,
        timeout=timeout,
        interval=1.0,
        on_end=lambda now: out.show(now, as_json, _render_job),
    )


@jobs_app.command("delete")
def jobs_delete(
    name: str, api: ApiOption = None, if_match: IfMatchOption = None, as_json: JsonOption = False
) -> None:
    """Delete a stopped job (its runs and events go with it)."""
    out.api(api).delete_job(name, if_match=out.etag(if_match))
    out.show({"name": name, "deleted": True}, as_json, lambda d: typer.echo(f"{name}: deleted"))


def _render_runs(doc: dict[str, Any]) -> None:
    out.table(
        ("RUN", "ATTEMPT", "STATE", "CLUSTER", "NODE", "APP", "STARTED", "ENDED", "REASON"),
        (
            (
                r["id"], r["attempt"], r["state"], r["cluster"], r["node"],
                r["app_id"] or r["submission_id"], r["started_at"], r["ended_at"], r["reason"],
            )
            for r in doc["data"]
        ),
        empty="(no runs)",
    )  # fmt: skip


jobs_app.command("runs")(
    out.job_list_command(
        "runs", _render_runs, "The job's runs (its execution history), newest first."
    )
)


def _render_events(doc: dict[str, Any]) -> None:
    out.table(
        ("AT", "RUN", "CHANGE", "CAUSE", "MESSAGE"),
        (
            (
                e["at"],
                e["run_id"],
                f"{e['from_state'] or ''}->{e['to_state'] or ''}",
                e["cause"],
                e["message"],
            )
            for e in reversed(doc["data"])
        ),
        empty="(no events)",
    )


@jobs_app.command("events")
def jobs_events(
    name: str,
    api: ApiOption = None,
    limit: Annotated[
        int, typer.Option(min=0, help="the newest this many (0 = all, every page)")
    ] = 100,
    as_json: JsonOption = False,
) -> None:
    """The job's state transitions with their causes, and its other events (oldest first in the
    table; the newest --limit of them)."""
    url = out.job_url(api, name, "/events")
    out.show_all(url, "events", _render_events, as_json, limit, api)


@jobs_app.command("logs")
def jobs_logs(
    name: str,
    api: ApiOption = None,
    run: Annotated[
        int | None,
        typer.Option("--run", help="the run's attempt number (default: the current or last run)"),
    ] = None,
    stream: Annotated[
        str | None,
        typer.Option(
            help="stderr or stdout (a standalone driver), combined (a local run); default: "
            "the first the run's driver has",
            show_default=False,
        ),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="keep printing what the driver writes")
    ] = False,
    tail: Annotated[
        int,
        typer.Option(min=1, max=1 << 20, help="start with the last this many bytes of the log"),
    ] = 64 << 10,
    interval: Annotated[
        float, typer.Option(min=0.2, help="--follow asks for more every this many seconds")
    ] = 1.0,
    as_json: JsonOption = False,
) -> None:
    """Print a run's driver log: its end (--tail bytes), then with --follow what the driver
    writes until the run has ended (Ctrl-C stops following). The log comes from the run's
    cluster through any node (GET /v1/jobs/NAME/runs/ATTEMPT/log); --json prints that
    document instead (no following)."""
    attempt = run if run is not None else _last_attempt(api, name)
    read = out.api(api).get_job_run_log
    piece = read(name, attempt, stream=stream, limit=tail)
    if as_json:
        out.show(piece, True)
        return
    sys.stdout.write(piece["text"])
    sys.stdout.flush()
    try:
        while follow and not (piece["run_ended"] and piece["at_end"]):
            time.sleep(interval)
            piece = read(
                name, attempt, stream=piece["stream"], offset=piece["next_offset"], limit=1 << 20
            )
            sys.stdout.write(piece["text"])
            sys.stdout.flush()
    except KeyboardInterrupt:
        return
    if follow:
        out.note(f"drover: run {attempt} of {name} has ended")


def _last_attempt(api: str | None, name: str) -> int:
    """The job's current run's attempt, else its newest run's; exit 3 when it has none."""
    operations = out.api(api)
    current = operations.get_job(name).get("current_run")
    if current:
        return int(current["attempt"])
    runs = operations.list_job_runs(name, limit=1)
    if not runs["data"]:
        out.fail(f"job {name!r} has no run yet: no driver log", Exit.NOT_FOUND)
    return int(runs["data"][0]["attempt"])


# -- clusters and groups -------------------------------------------------------------------

KindOption = Annotated[str | None, typer.Option(help="standalone | yarn | spark-submit | local")]
RootOption = Annotated[
    str | None, typer.Option(help="checkpoint storage root: absolute path, file:// or s3a:// URI")
]
MasterOption = Annotated[str | None, typer.Option(help="Spark master URL")]
RestOption = Annotated[
    str | None,
    typer.Option(help="REST submission server URL (standalone); ResourceManager web URL (yarn)"),
]
ConfDirOption = Annotated[
    str | None, typer.Option(help="Hadoop client configuration directory on the nodes (yarn)")
]
UiOption = Annotated[str | None, typer.Option(help="master web UI URL (standalone)")]
AzOption = Annotated[str | None, typer.Option(help="availability zone")]
CloudOption = Annotated[str | None, typer.Option(help="cloud")]
SubmissionsOption = Annotated[
    int | None, typer.Option(help="most submissions in flight at once (0 = unlimited)")
]
AppsOption = Annotated[int | None, typer.Option(help="most live applications (0 = unlimited)")]
CoresOption = Annotated[int | None, typer.Option(help="most cores of live apps (0 = unlimited)")]


def _cluster_fields(**options: Any) -> dict[str, Any]:
    return {key: value for key, value in options.items() if value is not None}


def _render_clusters(doc: dict[str, Any]) -> None:
    headers = ("NAME", "KIND", "HEALTH", "AZ", "MASTER", "STORAGE ROOT")
    wide = ("CLOUD", "REST", "UI", "UPDATED")  # -o wide
    out.table(
        headers + wide if out.wide() else headers,
        (
            (c["name"], c["kind"], c["health"], c["az"], c["master_url"], c["storage_root"])
            + ((c["cloud"], c["rest_url"], c["ui_url"], c["updated_at"]) if out.wide() else ())
            for c in doc["data"]
        ),
        empty="(no clusters)",
    )
    out.footer(f"{doc['count']} cluster(s)" + (" (cut by --limit)" if doc["truncated"] else ""))


clusters_app.command("list")(
    out.list_command("clusters", _render_clusters, "Every cluster with its health.")
)


@clusters_app.command("get")
def clusters_get(name: str, api: ApiOption = None, as_json: JsonOption = False) -> None:
    out.show(out.api(api).get_cluster(name), as_json)


@clusters_app.command("create")
def clusters_create(
    name: str,
    kind: Annotated[str, typer.Option(help="standalone | yarn | spark-submit | local")],
    storage_root: Annotated[
        str,
        typer.Option(help="checkpoint storage root: absolute path, file://, hdfs:// or s3a:// URI"),
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
    hadoop_conf_dir: ConfDirOption = None,
    as_json: JsonOption = False,
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
        hadoop_conf_dir=hadoop_conf_dir,
    )
    out.show(out.api(api).create_cluster(body), as_json)


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
    hadoop_conf_dir: ConfDirOption = None,
    if_version: VersionOption = None,
    as_json: JsonOption = False,
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
        hadoop_conf_dir=hadoop_conf_dir,
    )
    if not body:
        out.fail("nothing to change: give at least one option", Exit.USAGE)
    out.show(out.api(api).update_cluster(name, body, if_match=out.etag(if_version)), as_json)


# -- cluster health (runbook: docs/runbooks/cluster-flapping.md) ------------------------------


def _short_time(value: str | None) -> str:
    """An ISO timestamp as ``HH:MM:SS`` (UTC), or ``-``."""
    return value[11:19] if value else "-"


def _render_health(data: dict[str, Any]) -> None:
    typer.echo(f"cluster  {data['cluster']}")
    typer.echo(f"state    {data['state']}  since {data['since'] or '-'}")
    typer.echo(f"reason   {data['reason'] or '-'}")
    assessment = data["assessment"]
    typer.echo(f"votes say {assessment['state']}: {assessment['reason']}")
    if assessment["normal_not_before"]:
        typer.echo(f"NORMAL not before {assessment['normal_not_before']}")
    typer.echo(f"failed probes in the threshold window: {assessment['recent_failures']}")
    typer.echo("")
    out.table(
        ("NODE", "VOTE", "AT", "LATENCY", "COUNTED", "DETAIL"),
        (
            (
                v["node_id"],
                "ok" if v["ok"] else "FAIL",
                _short_time(v["at"]),
                f"{v['latency_s']:.3f}s",
                v["counted"],
                v["detail"],
            )
            for v in data["votes"]
        ),
        empty="(no fresh votes)",
    )
    typer.echo("")
    out.table(
        ("AT", "FROM", "TO", "BY", "REASON"),
        (
            (
                e["at"][:19],
                e["from_state"],
                e["to_state"],
                f"{e['decided_by']}:{e['actor']}",
                e["reason"],
            )
            for e in data["history"]
        ),
        empty="(no transitions)",
    )


@clusters_app.command("health")
def clusters_health(
    name: str,
    api: ApiOption = None,
    as_json: JsonOption = False,
    history: Annotated[int, typer.Option(help="transitions shown")] = 10,
) -> None:
    """A cluster's health: state and reason, what the votes say now, each node's vote, history."""
    data = out.api(api).get_cluster_health(name, history=history)
    out.show(data, as_json, _render_health)


@clusters_app.command("mark-abnormal")
def clusters_mark_abnormal(
    name: str,
    reason: Annotated[str, typer.Option(help="why (shown on the cluster's jobs and audited)")],
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mark a cluster MANUAL_ABNORMAL: nothing is started there until it is cleared."""
    event = out.api(api).mark_cluster_abnormal(name, {"reason": reason})
    out.show(
        event,
        as_json,
        lambda e: typer.echo(
            f"cluster {name}: {e['from_state']} -> {e['to_state']} ({e['reason']})"
        ),
    )


@clusters_app.command("clear")
def clusters_clear(
    name: str,
    reason: Annotated[str, typer.Option(help="why (audited)")] = "",
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Lift a manual mark: the cluster is NORMAL again (the monitor keeps judging it)."""
    event = out.api(api).clear_cluster_abnormal(name, {"reason": reason})
    out.show(
        event,
        as_json,
        lambda e: typer.echo(f"cluster {name}: {e['from_state']} -> {e['to_state']}"),
    )


def _render_groups(doc: dict[str, Any]) -> None:
    out.table(
        ("NAME", "PRIMARY", "FAILOVER", "VERSION"),
        (
            (g["name"], g["primary_cluster"], g["failover_cluster"], g["version"])
            for g in doc["data"]
        ),
        empty="(no groups)",
    )
    out.footer(f"{doc['count']} group(s)" + (" (cut by --limit)" if doc["truncated"] else ""))


def _render_group(group: dict[str, Any]) -> None:
    out.record(group, ("name", "primary_cluster", "failover_cluster", "version", "pool", "epoch"))
    members = group.get("members")
    if members is None:
        return
    typer.echo("")
    out.table(
        ("MEMBER", "ROLE", "AZ", "CLOUD", "JOBS OWNED"),
        (
            (m.get("node_id"), m.get("role"), m.get("az"), m.get("cloud"), m.get("jobs"))
            for m in members
        ),
        empty="(no live members)",
    )


groups_app.command("list")(out.list_command("groups", _render_groups, "Every scheduling group."))


@groups_app.command("get")
def groups_get(name: str, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """A group, its live members (role, AZ, jobs owned), pool and epoch."""
    out.show(out.api(api).get_group(name), as_json, _render_group)


@groups_app.command("create")
def groups_create(
    name: str,
    primary: Annotated[str, typer.Option("--primary", help="primary cluster")],
    failover: Annotated[str | None, typer.Option("--failover", help="failover cluster")] = None,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a scheduling group bound to a primary (and optionally a failover) cluster."""
    body = {"name": name, "primary_cluster": primary, "failover_cluster": failover}
    out.show(out.api(api).create_group(body), as_json, _render_group)


@groups_app.command("delete")
def groups_delete(
    name: str, api: ApiOption = None, if_version: VersionOption = None, as_json: JsonOption = False
) -> None:
    """Delete an empty group (refused while it has jobs; never the default group)."""
    out.api(api).delete_group(name, if_match=out.etag(if_version))
    out.show({"name": name, "deleted": True}, as_json, lambda d: typer.echo(f"{name}: deleted"))


identity.register(app)
failover.register(app)
replication.register(app)
nodes.register(app)
bulk.register(app)
revisions.register(jobs_app)
quotas.register(app)
out.add_output_options(app)  # -o json|yaml|wide|name and --field on every command that prints


def main() -> None:  # pragma: no cover - console entry point
    """The ``drover`` console entry: the tree typer builds holds only the command group asked
    for (typer turns every command of the tree it runs into a click command on each start:
    61 of them, a fifth of a ``drover jobs get``)."""
    (narrowed(sys.argv[1:]) or app)()


#: root options that take a value (``drover --url U jobs list``)
_VALUED = frozenset({"--url", "--token"})


def narrowed(args: list[str]) -> typer.Typer | None:
    """A root with the root's options and the one command group ``args`` names, or None for
    everything else (the root's own help and commands, shell completion: the whole tree)."""
    if apps.COMPLETE_VAR in os.environ:
        return None
    name, skip = None, False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            name = arg
            break
    group = next((g for g in app.registered_groups if g.name == name), None)
    if group is None:
        return None
    root = out.new_app(add_completion=False, help=app.info.help, epilog=app.info.epilog)
    root.registered_callback = app.registered_callback
    root.registered_groups = [group]
    return root


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
