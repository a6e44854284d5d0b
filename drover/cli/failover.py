"""``drover failover plan|run|status|cancel``, ``drover failover auto status|pause|resume|clear``
and ``drover groups auto-failover``: the failover runbooks' commands (docs/runbooks/), through a
node's API.

Tables by default, the API's JSON with ``--json``. ``run --wait`` and ``status --wait`` follow
the failover until it ends or ``--timeout`` passes, drawing each item's step changes and a
summary line on stderr, then print the final document; the exit code is then 0 only when it
SUCCEEDED (8 FAILED or CANCELLED, 7 still under way at the deadline; ``drover --help``).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from drover.cli import apps
from drover.cli import operations as ops
from drover.cli import output as out

failover_app = out.new_app(
    no_args_is_help=True,
    help="Move a cluster's jobs to another cluster (plan, run, status, cancel).",
)

ApiOption = out.ApiOption
JsonOption = out.JsonOption
SourceArgument = Annotated[str, typer.Argument(help="the cluster the jobs leave")]
TargetOption = Annotated[
    str | None,
    typer.Option("--to", help="the cluster they go to (default: each job's group's other cluster)"),
]
PriorityOption = Annotated[
    list[str] | None, typer.Option("--priority", help="high | normal | low (repeatable)")
]
TeamOption = Annotated[list[str] | None, typer.Option("--team", help="a team (repeatable)")]
BusinessOption = Annotated[
    list[str] | None, typer.Option("--business", help="a business (repeatable)")
]
GroupOption = Annotated[list[str] | None, typer.Option("--group", help="a group (repeatable)")]
JobOption = Annotated[list[str] | None, typer.Option("--job", help="a job name (repeatable)")]
AllOption = Annotated[bool, typer.Option("--all", help="every job on the source")]
ForceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--force",
        help="fence this job although it is not self-fencing and the source is unreachable "
        "(repeatable; '*' for every job); needs --acknowledge",
    ),
]
AckOption = Annotated[
    str | None,
    typer.Option("--acknowledge", help="why forcing is safe (audited), e.g. 'AZ a1 is off'"),
]

#: how --wait judges a failover's state
DEFAULT_WAIT = ops.DEFAULT_WAIT


auto_app = typer.Typer(
    no_args_is_help=True,
    help="Automatic failover platform-wide: status, pause, resume, clear a cluster's cool-down.",
)
failover_app.add_typer(auto_app, name="auto")

ReasonOption = Annotated[str, typer.Option("--reason", help="why (audited)")]


def register(app: typer.Typer) -> None:
    app.add_typer(failover_app, name="failover")
    apps.groups_app.command("auto-failover")(groups_auto_failover)


def _body(
    source: SourceArgument,
    to: TargetOption = None,
    priority: PriorityOption = None,
    team: TeamOption = None,
    business: BusinessOption = None,
    group: GroupOption = None,
    job: JobOption = None,
    all_jobs: AllOption = False,
    force: ForceOption = None,
    acknowledge: AckOption = None,
) -> dict[str, Any]:
    """The request's body from the options that select the jobs (``plan`` and ``run`` take
    them, :func:`_selecting`)."""
    body: dict[str, Any] = {
        "source": source,
        "target": to,
        "selector": {
            "priorities": list(priority or []),
            "teams": list(team or []),
            "businesses": list(business or []),
            "groups": list(group or []),
            "jobs": list(job or []),
            "all": all_jobs,
        },
    }
    if not any(body["selector"].values()):
        out.fail(
            "select the jobs: --priority, --team, --business, --group, --job, or --all",
            out.Exit.USAGE,
        )
    if force:
        if not acknowledge:
            out.fail(
                "--force needs --acknowledge (why the drivers on the source are no risk)",
                out.Exit.USAGE,
            )
        body["force"] = {"jobs": list(force), "acknowledgement": acknowledge}
    elif acknowledge:
        out.fail("--acknowledge goes with --force", out.Exit.USAGE)
    return body


def _selecting(command: Callable[..., None]) -> Callable[..., None]:
    """``command(body, ...)`` as a command that takes the options of :func:`_body` first (the
    source and the selector) and is handed the request's body they make."""
    selector = list(inspect.signature(_body, eval_str=True).parameters.values())
    own = list(inspect.signature(command, eval_str=True).parameters.values())[1:]

    @functools.wraps(command)
    def wrapped(**kwargs: Any) -> None:
        chosen = {p.name: kwargs.pop(p.name) for p in selector}
        command(_body(**chosen), **kwargs)

    parameters = [*selector, *own]
    wrapped.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapped.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapped


def print_plan(data: dict[str, Any]) -> None:
    reach = "reachable" if data["source_reachable"] else "UNREACHABLE"
    ops.print_plan(
        data,
        f"source {data['source']} ({reach}) -> {data['target'] or 'each group’s other cluster'}",
        f"{'#':>3}  {'JOB':<32} {'GROUP':<12} {'PRIO':<6} {'ACTION':<7} {'TARGET':<12} WHY",
        lambda item: (
            f"{item['position']:>3}  {ops.short(item['job'], 32):<32} "
            f"{ops.short(item['group'], 12):<12} "
            f"{item['priority'] or '-':<6} {item['action']:<7} "
            f"{item['target_cluster'] or '-':<12} {item['why']}"
        ),
        "(no job of the selector is on the source)",
    )


def print_status(data: dict[str, Any]) -> None:
    def row(item: dict[str, Any]) -> str:
        runs = f"{item['source_run_id'] or '-'}>{item['target_run_id'] or '-'}"
        return (
            f"{item['position']:>3}  {ops.short(item['job'], 32):<32} {item['action']:<7} "
            f"{item['step']:<11} {runs:<11} {ops.item_now(item)}"
        )

    ops.print_progress(
        data,
        f"failover {data['id']}  {data['state']}  {data['source']} -> "
        f"{data['target'] or 'each group’s other cluster'}",
        f"{'#':>3}  {'JOB':<32} {'ACTION':<7} {'STEP':<11} {'RUNS':<11} NOW",
        row,
        _summary(data),
    )


def _summary(data: dict[str, Any]) -> str:
    counts = ops.counts_text(data["counts"])
    return f"failover {data['id']} {data['state']}: {counts or 'no items'}"


_CANCELLED = "failover {id}: cancel requested ({state}); items under way finish their current step"
_HEADER = f"{'ID':>5}  {'STATE':<10} {'SOURCE':<12} {'TARGET':<12} {'CREATED':<20} ITEMS"


def _row(op: dict[str, Any]) -> str:
    return (
        f"{op['id']:>5}  {op['state']:<10} {op['source'] or '-':<12} "
        f"{op['target'] or '-':<12} {op['created_at'][:19]:<20} "
        f"{ops.counts_text(op['counts'])}"
    )


KIND = ops.Kind("/v1/failovers", "failovers", _HEADER, _row, print_status, _summary, 11, _CANCELLED)


@failover_app.command("plan")
@_selecting
def failover_plan(body: dict[str, Any], api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Dry run: the items a failover would run, in order, each with what happens and why.
    Nothing is stored or changed."""
    data = out.call("POST", KIND.url(api), json={**body, "dry_run": True})
    if as_json:
        out.print_json(data)
        return
    print_plan(data)
    typer.echo(
        f"run exactly this plan: drover failover run <same options> --expect-plan "
        f"{data['plan_digest']}"
    )


@failover_app.command("run")
@_selecting
def failover_run(
    body: dict[str, Any],
    reason: Annotated[str, typer.Option(help="why (audited)")] = "",
    parallelism: Annotated[int | None, typer.Option(help="items under way at once")] = None,
    expect_plan: Annotated[
        str | None,
        typer.Option("--expect-plan", help="refuse unless the plan is this dry run's digest"),
    ] = None,
    wait: out.WaitOption = False,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="--wait gives up after this many seconds (exit 7)")
    ] = DEFAULT_WAIT,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a failover (the same plan as `drover failover plan` with the same options)."""
    body.update({"reason": reason, "dry_run": False})
    if parallelism is not None:
        body["parallelism"] = parallelism
    if expect_plan is not None:
        body["expected_plan"] = expect_plan
    data = out.call("POST", KIND.url(api), json=body)
    if not wait:
        if as_json:
            out.print_json(data)
        else:
            typer.echo(
                f"failover {data['id']} {data['state']}: {len(data['items'])} item(s), plan "
                f"{data['plan_digest']}; follow it with: drover failover status {data['id']} "
                "--wait"
            )
        return
    out.note(f"failover {data['id']} started: {len(data['items'])} item(s)")
    KIND.follow(api, int(data["id"]), timeout=timeout, as_json=as_json)


@failover_app.command("status")
def failover_status(
    operation_id: Annotated[int | None, typer.Argument(help="a failover id (none: list)")] = None,
    wait: out.WaitOption = False,
    timeout: Annotated[
        float, typer.Option(min=0.1, help="--wait gives up after this many seconds (exit 7)")
    ] = DEFAULT_WAIT,
    limit: Annotated[int, typer.Option(min=0, help="failovers listed (0 = all)")] = 20,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """A failover's items and progress; without an id, the latest failovers."""
    KIND.status(api, operation_id, None, limit=limit, wait=wait, timeout=timeout, as_json=as_json)


@failover_app.command("cancel")
def failover_cancel(
    operation_id: Annotated[int, typer.Argument(help="the failover's id")],
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop a failover after its current steps (items not yet switched stay where they are)."""
    KIND.cancel(api, operation_id, as_json)


def groups_auto_failover(
    name: Annotated[str, typer.Argument(help="the group")],
    enable: Annotated[
        bool | None, typer.Option("--enable/--disable", help="turn it on or off")
    ] = None,
    after: Annotated[
        float | None, typer.Option(help="seconds a cluster is abnormal before it fails over")
    ] = None,
    min_priority: Annotated[
        str | None, typer.Option(help="jobs at or above this priority fail over")
    ] = None,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a group's automatic failover, or change it (--enable/--disable, --after, ...)."""
    url = out.resource_url(api, "groups", name) + "/auto-failover"
    current = out.call("GET", url)
    if enable is not None or after is not None or min_priority is not None:
        body = {
            "enabled": current["enabled"] if enable is None else enable,
            "after_seconds": current["after_seconds"] if after is None else after,
            "min_priority": current["min_priority"] if min_priority is None else min_priority,
        }
        current = out.call("PUT", url, json=body, headers=out.if_match(current["version"]))
    if as_json:
        out.print_json(current)
        return
    state = "enabled" if current["enabled"] else "disabled"
    typer.echo(
        f"group {current['group']}: automatic failover {state} (after {current['after_seconds']:g}"
        f" s abnormal, priority {current['min_priority']} and above; version "
        f"{current['version']})"
    )


def _auto_url(api: str | None, suffix: str = "") -> str:
    return f"{out.api_url(api)}/v1/auto-failover{suffix}"


def show_auto(data: dict[str, Any], as_json: bool) -> None:
    """The automatic-failover state as the command's answer: JSON, or the text of print_auto."""
    if as_json:
        out.print_json(data)
    else:
        print_auto(data)


def print_auto(data: dict[str, Any]) -> None:
    if data["paused"]:
        typer.echo(
            f"automatic failover: PAUSED by {data['paused_by']} since "
            f"{data['paused_at'][:19]} ({data['reason']})"
        )
    else:
        typer.echo("automatic failover: running")
    groups = ", ".join(data["groups"]) or "none"
    typer.echo(f"groups with automatic failover enabled: {groups}")
    cool = data["cooldown_seconds"]
    for c in data["cooling_down"]:
        typer.echo(
            f"cooling down: {c['cluster']} (abnormal until {c['abnormal_until'][:19]}, not "
            f"failed over onto before {c['until'][:19]}; cool-down {cool:g} s)"
        )
    if data["events"]:
        typer.echo(f"{'AT':<20} {'KIND':<8} {'CODE':<20} {'GROUP':<12} {'CLUSTER':<12} MESSAGE")
    for e in data["events"]:
        typer.echo(
            f"{e['at'][:19]:<20} {e['kind']:<8} {e['code'] or '-':<20} {e['group'] or '-':<12} "
            f"{e['cluster'] or '-':<12} {e['message']}"
        )


@auto_app.command("status")
def auto_status(api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Whether automatic failover is paused, the clusters cooling down, its latest decisions."""
    data = out.call("GET", _auto_url(api))
    show_auto(data, as_json)


@auto_app.command("pause")
def auto_pause(reason: ReasonOption, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Pause automatic failover platform-wide (a failover falling due is held, and alerted)."""
    data = out.call("POST", _auto_url(api, "/pause"), json={"reason": reason})
    show_auto(data, as_json)


@auto_app.command("resume")
def auto_resume(reason: ReasonOption, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Resume automatic failover platform-wide."""
    data = out.call("POST", _auto_url(api, "/resume"), json={"reason": reason})
    show_auto(data, as_json)


@auto_app.command("clear")
def auto_clear(
    cluster: Annotated[str, typer.Argument(help="the cluster automatic failover may use again")],
    reason: ReasonOption,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """End a cluster's cool-down: automatic failover may move jobs onto it again."""
    data = out.call("POST", _auto_url(api, f"/clusters/{cluster}/clear"), json={"reason": reason})
    show_auto(data, as_json)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(failover_app())
