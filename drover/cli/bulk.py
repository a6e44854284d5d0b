"""``drover bulk start|stop|restart|status|cancel``: act on every job a selector picks, through
a node's API (``/v1/operations``).

    drover bulk stop --team ads --label env=prod --dry-run      # the plan, nothing changes
    drover bulk stop --team ads --label env=prod --expect-plan 3f2a... --wait
    drover bulk restart --prefix orders- --parallelism 5 --wait  # a rolling restart
    drover bulk status 42 --wait
    drover bulk cancel 42

Tables by default, the API's JSON with ``--json``. ``--wait`` follows the operation until it
ends or ``--timeout`` passes, drawing each item's step changes and a summary line on stderr,
then prints the final document; the exit code is then 0 only when it SUCCEEDED (8 FAILED or
CANCELLED, 7 still under way at the deadline; ``drover --help``). ``--idempotency-key``: run the
same command again with the same key after a timeout and no second operation is started.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from drover.cli import operations as ops
from drover.cli import output as out

bulk_app = out.new_app(
    no_args_is_help=True,
    help="Start, stop or restart every job a selector picks (plan, run, follow, cancel).",
)

ApiOption = out.ApiOption
JsonOption = out.JsonOption
Many = list[str] | None
TeamOption = Annotated[Many, typer.Option("--team", help="a team (repeatable)")]
BusinessOption = Annotated[Many, typer.Option("--business", help="a business (repeatable)")]
GroupOption = Annotated[Many, typer.Option("--group", help="a group (repeatable)")]
ClusterOption = Annotated[Many, typer.Option("--cluster", help="where the job is now (repeatable)")]
StateOption = Annotated[
    Many, typer.Option("--state", help="an observed state, e.g. FAILED (repeatable)")
]
PriorityOption = Annotated[Many, typer.Option("--priority", help="high | normal | low")]
PrefixOption = Annotated[
    str | None, typer.Option("--prefix", help="only jobs whose name begins with it")
]
LabelOption = Annotated[
    Many, typer.Option("--label", help="key=value, key!=value, key or !key (repeatable)")
]
JobOption = Annotated[Many, typer.Option("--job", help="a job name (repeatable)")]
AllOption = Annotated[bool, typer.Option("--all", help="every job you may act on")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="only show the plan; nothing changes")
]
WaitOption = out.WaitOption
TimeoutOption = Annotated[
    float, typer.Option(min=0.1, help="--wait gives up after this many seconds (exit 7)")
]
ReasonOption = Annotated[str, typer.Option(help="why (audited)")]
ParallelismOption = Annotated[
    int | None,
    typer.Option(help="items under way at once (default: 500 for start/stop, 10 for restart)"),
]
ExpectOption = Annotated[
    str | None,
    typer.Option("--expect-plan", help="refuse unless the plan is this dry run's digest"),
]
GraceOption = Annotated[
    float | None,
    typer.Option(
        "--grace",
        min=0,
        help="stop/restart: seconds each pipeline gets to finish its micro-batch and exit "
        "before a kill (default: the node's setting; 0: kill at once)",
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--idempotency-key",
        help="retrying with the same key returns the first answer and starts nothing again",
    ),
]

#: how --wait judges an operation's state
DEFAULT_WAIT = ops.DEFAULT_WAIT


def register(app: typer.Typer) -> None:
    app.add_typer(bulk_app, name="bulk")


def selector(
    team: Many,
    business: Many,
    group: Many,
    cluster: Many,
    state: Many,
    priority: Many,
    prefix: str | None,
    label: Many,
    job: Many,
    all_jobs: bool,
) -> dict[str, Any]:
    chosen: dict[str, Any] = {
        "teams": list(team or []),
        "businesses": list(business or []),
        "groups": list(group or []),
        "clusters": list(cluster or []),
        "states": [s.upper() for s in state or []],
        "priorities": [p.lower() for p in priority or []],
        "name_prefix": prefix or "",
        "labels": list(label or []),
        "jobs": list(job or []),
        "all": all_jobs,
    }
    if not any(chosen.values()):
        out.fail(
            "select the jobs: --team, --business, --group, --cluster, --state, --priority, "
            "--prefix, --label, --job, or --all",
            out.Exit.USAGE,
        )
    return chosen


def print_plan(data: dict[str, Any]) -> None:
    ops.print_plan(
        data,
        data["kind"],
        f"{'#':>4}  {'JOB':<32} {'TEAM':<12} {'PRIO':<6} {'ACTION':<8} WHY",
        lambda item: (
            f"{item['position']:>4}  {ops.short(item['job'], 32):<32} "
            f"{ops.short(item['team'] or '-', 12):<12} {item['priority'] or '-':<6} "
            f"{item['action']:<8} {item['why']}"
        ),
        "(no job you may act on matches the selector)",
    )


def _summary(data: dict[str, Any]) -> str:
    counts = ops.counts_text(data["counts"])
    return (
        f"{data['kind']} {data['id']} {data['state']}: {data['finished']}/{data['total']} ended"
        + (f" ({counts})" if counts else "")
    )


def print_status(data: dict[str, Any]) -> None:
    ops.print_progress(
        data,
        f"{data['kind']} {data['id']}  {data['state']}  team {data['team'] or '(several)'}",
        f"{'#':>4}  {'JOB':<32} {'ACTION':<8} {'STEP':<10} NOW",
        lambda item: (
            f"{item['position']:>4}  {ops.short(item['job'], 32):<32} {item['action']:<8} "
            f"{item['step']:<10} {ops.item_now(item)}"
        ),
        _summary(data),
    )


_CANCELLED = "{kind} {id}: cancel requested ({state}); items under way finish"
_HEADER = f"{'ID':>5}  {'KIND':<9} {'STATE':<10} {'TEAM':<12} {'CREATED':<20} ITEMS"


def _row(op: dict[str, Any]) -> str:
    return (
        f"{op['id']:>5}  {op['kind']:<9} {op['state']:<10} "
        f"{ops.short(op['team'] or '-', 12):<12} {op['created_at'][:19]:<20} "
        f"{ops.counts_text(op['counts'])}"
    )


KIND = ops.Kind(
    "/v1/operations", "operations", _HEADER, _row, print_status, _summary, 10, _CANCELLED
)


def _command(kind: str) -> Any:
    def command(
        team: TeamOption = None,
        business: BusinessOption = None,
        group: GroupOption = None,
        cluster: ClusterOption = None,
        state: StateOption = None,
        priority: PriorityOption = None,
        prefix: PrefixOption = None,
        label: LabelOption = None,
        job: JobOption = None,
        all_jobs: AllOption = False,
        dry_run: DryRunOption = False,
        reason: ReasonOption = "",
        parallelism: ParallelismOption = None,
        expect_plan: ExpectOption = None,
        grace: GraceOption = None,
        idempotency_key: KeyOption = None,
        wait: WaitOption = False,
        timeout: TimeoutOption = DEFAULT_WAIT,
        api: ApiOption = None,
        as_json: JsonOption = False,
    ) -> None:
        body: dict[str, Any] = {
            "kind": kind,
            "selector": selector(
                team, business, group, cluster, state, priority, prefix, label, job, all_jobs
            ),
            "dry_run": dry_run,
            "reason": reason,
        }
        if parallelism is not None:
            body["parallelism"] = parallelism
        if expect_plan is not None:
            body["expected_plan"] = expect_plan
        if grace is not None:
            body["grace_seconds"] = grace
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        data = out.call("POST", KIND.url(api), json=body, headers=headers)
        if dry_run:
            if as_json:
                out.print_json(data)
                return
            print_plan(data)
            typer.echo(
                f"run exactly this plan: drover bulk {kind} <same selector> --expect-plan "
                f"{data['plan_digest']}"
            )
            return
        if not wait:
            if as_json:
                out.print_json(data)
            else:
                typer.echo(
                    f"{data['kind']} {data['id']} {data['state']}: {data['total']} item(s), "
                    f"plan {data['plan_digest']}; follow it with: drover bulk status "
                    f"{data['id']} --wait"
                )
            return
        out.note(f"{data['kind']} {data['id']} started: {data['total']} item(s)")
        KIND.follow(api, int(data["id"]), timeout=timeout, as_json=as_json)

    command.__doc__ = {
        "start": "Start every selected job that is stopped or at rest (its owner submits it "
        "through the submission gate).",
        "stop": "Stop every selected job that should run.",
        "restart": "Replace the run of every selected job by a new one (rolling: --parallelism "
        "at a time).",
    }[kind]
    return command


for _kind in ("start", "stop", "restart"):
    bulk_app.command(_kind)(_command(_kind))


@bulk_app.command("status")
def bulk_status(
    operation_id: Annotated[int | None, typer.Argument(help="an operation id (none: list)")] = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = DEFAULT_WAIT,
    kind: Annotated[Many, typer.Option("--kind", help="start | stop | restart | failover")] = None,
    limit: Annotated[int, typer.Option(min=0, help="operations listed (0 = all)")] = 20,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """An operation's items and progress; without an id, the latest operations (every kind)."""
    params = {"kind": kind or []}
    KIND.status(api, operation_id, params, limit=limit, wait=wait, timeout=timeout, as_json=as_json)


@bulk_app.command("cancel")
def bulk_cancel(
    operation_id: Annotated[int, typer.Argument(help="the operation's id")],
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop an operation after its current steps (items whose command was applied finish)."""
    KIND.cancel(api, operation_id, as_json)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(bulk_app())
