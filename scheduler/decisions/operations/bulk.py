"""Bulk operations, the second family of operations: start, stop or restart every job a selector
picks. Pure: the selector, the plan and the item step machine.

A bulk operation is persisted and executed like a failover (``scheduler.loops.operations``:
one node at a time, chosen like a job's owner, every write fenced by its claim, every step
idempotent), but its items only change what the job *should* be: the executor applies the
command to the job (the same desired-state change ``POST /v1/jobs/{name}/start|stop|restart``
makes, in the transaction that records the item's step) and the job's owner then acts on it
through its reconcile loop -- and, for the submissions a start or restart makes, through the
submission gate (``scheduler.decisions.gate``: per-business rates, per-cluster caps, priority
order), so a bulk start of thousands of jobs is paced by the quotas, not by this module. The item
then waits until the job reached what the command asked for.

**Selector** (:class:`Selector`): every non-empty field must match -- teams, businesses, groups,
clusters (where the job is: its live run's cluster, else its cluster, else its group's primary),
observed states, priorities, a name prefix, label requirements (``scheduler.decisions.labels``), job
names. An empty selector is refused unless ``all`` is set.

**Plan** (:func:`plan_bulk`): the selected jobs in order (priority high first, then by name),
each with its planned :class:`Action` and why. A dry run answers exactly the items an execution
then runs, in that order (same inputs, same plan; the digest tells when they differ).

    start    the job is stopped or at rest: set it to RUNNING (its owner submits it)
    stop     the job should run: set it to STOPPED (its owner kills its application)
    restart  the job should run: replace its run by a new one (its owner kills, then submits)
    skip     nothing to do (already started / already stopped / stopped: start it instead /
             in a failover)
    refuse   not safe now (its cluster is abnormal: fail it over instead of restarting it there)

**Items** walk persisted steps (:class:`Step`); :func:`decide` is the pure decision of the next
one from what the store says, applied by the executor in one fenced transaction::

    PENDING   → WAITING     the command was applied to the job (desired state written)
              → SKIPPED     as planned, or the job no longer needs it (someone did it meanwhile)
              → REFUSED     as planned
              → CANCELLED   the operation was cancelled before the item started
              → FAILED      the job was deleted
    WAITING   → DONE        the job reached what the command asked for (or an operator changed
                            its desired state meanwhile: the note says so)
              → FAILED      not reached within the timeout, or the job gave up (FAILED)

:func:`transition` is the one function that checks a step change. A cancel stops new items;
items already WAITING finish (their command was applied).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.core.errors import InvalidInput
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord
from scheduler.core.states import Command, DesiredState, JobState, Priority
from scheduler.decisions import labels as label_rules
from scheduler.decisions.health import ClusterHealth
from scheduler.decisions.operations.failover import current_cluster, sort_key
from scheduler.decisions.operations.model import (
    Advance,
    ItemRecord,
    ItemSteps,
    JobSelector,
    NewItem,
    NewOperation,
    OperationKind,
    Wait,
    home_group,
    item_transitions,
    plan_digest,
    step_transition,
)

#: the operation kinds this module plans and decides, and the job command each applies
COMMANDS: Mapping[OperationKind, Command] = {
    OperationKind.START: Command.START,
    OperationKind.STOP: Command.STOP,
    OperationKind.RESTART: Command.RESTART,
}
KINDS = frozenset(COMMANDS)
#: items under way at once when the request names no parallelism: a start or a stop only
#: changes desired states (the gate paces the submissions); a restart rolls
DEFAULT_PARALLELISM: Mapping[OperationKind, int] = {
    OperationKind.START: 500,
    OperationKind.STOP: 500,
    OperationKind.RESTART: 10,
}
#: the most items one bulk operation may hold
MAX_ITEMS = 20_000


class Action(enum.StrEnum):
    START = "start"
    STOP = "stop"
    RESTART = "restart"
    SKIP = "skip"
    REFUSE = "refuse"

    @property
    def runs(self) -> bool:
        """Whether an item with this action changes its job."""
        return self in (Action.START, Action.STOP, Action.RESTART)


class Step(ItemSteps, enum.StrEnum):
    PENDING = "PENDING"
    WAITING = "WAITING"
    DONE = "DONE"
    SKIPPED = "SKIPPED"
    REFUSED = "REFUSED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


S = Step
#: a bulk item's own moves; from PENDING also SKIPPED, REFUSED, CANCELLED and FAILED, as every
#: kind's item (``model.item_transitions``)
STEP_TRANSITIONS: Mapping[Step, frozenset[Step]] = item_transitions(
    Step, {S.PENDING: {S.WAITING}, S.WAITING: {S.DONE, S.FAILED}}
)
del S


def transition(current: Step, new: Step) -> Step:
    """``new`` if the table allows ``current → new``; IllegalTransition otherwise."""
    return step_transition(STEP_TRANSITIONS, current, new, item="a bulk item")


# -- the selector --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Selector(JobSelector):
    """Which jobs: every non-empty field must match (``all``: every job); besides the fields of
    every kind, where the job is, its observed state, a name prefix and label requirements."""

    clusters: frozenset[str] = frozenset()
    states: frozenset[JobState] = frozenset()
    name_prefix: str = ""
    labels: tuple[str, ...] = ()

    def parts(self) -> list[tuple[str, list[str]]]:
        return [
            *super().parts(),
            ("cluster", sorted(self.clusters)),
            ("state", sorted(s.value for s in self.states)),
            ("label", list(self.labels)),
            ("name", [f"{self.name_prefix}*"] if self.name_prefix else []),
        ]

    def requirements(self) -> tuple[label_rules.Requirement, ...]:
        return label_rules.parse_selector(self.labels)

    def matches(self, job: JobRecord, groups: Mapping[str, GroupRecord]) -> bool:
        return (
            self.matches_fields(job)
            and (not self.states or job.state in self.states)
            and job.name.startswith(self.name_prefix)
            and (not self.clusters or current_cluster(job, groups) in self.clusters)
            and label_rules.matches(self.requirements(), job.labels)
        )

    def check(self) -> Selector:
        """Refuse a selector that selects nothing explicitly (InvalidInput), or whose label
        requirements do not parse."""
        if self.empty:
            raise InvalidInput(
                "select the jobs (teams, businesses, groups, clusters, states, priorities, "
                "name_prefix, labels, jobs) or ask for all of them explicitly (all: true)"
            )
        self.requirements()
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            **super().to_json(),
            "clusters": sorted(self.clusters),
            "states": sorted(s.value for s in self.states),
            "name_prefix": self.name_prefix,
            "labels": list(self.labels),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Selector:
        return cls(
            **cls.fields_from_json(data),
            clusters=frozenset(data.get("clusters", ())),
            states=frozenset(JobState(s) for s in data.get("states", ())),
            name_prefix=str(data.get("name_prefix", "")),
            labels=tuple(data.get("labels", ())),
        )


# -- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedItem:
    job_id: int
    job_name: str
    group: str
    team: str
    priority: Priority
    action: Action
    why: str
    cluster: str | None

    def key(self) -> list[Any]:
        return [self.job_name, self.action.value]


@dataclass(frozen=True)
class Plan:
    kind: OperationKind
    items: tuple[PlannedItem, ...]

    @property
    def digest(self) -> str:
        return plan_digest([self.kind.value], (i.key() for i in self.items))

    @property
    def teams(self) -> frozenset[str]:
        return frozenset(i.team for i in self.items)

    def home_group(self, fallback: str) -> str:
        return home_group(self.items, fallback)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for item in self.items:
            out[item.action.value] = out.get(item.action.value, 0) + 1
        return out


def select(
    selector: Selector, jobs: Iterable[JobRecord], groups: Mapping[str, GroupRecord]
) -> list[JobRecord]:
    """The jobs ``selector`` picks, in plan order (priority high first, then by name)."""
    return sorted((j for j in jobs if selector.matches(j, groups)), key=sort_key)


def plan_bulk(
    kind: OperationKind,
    selector: Selector,
    jobs: Iterable[JobRecord],
    groups: Mapping[str, GroupRecord],
    clusters: Mapping[str, ClusterRecord],
) -> Plan:
    """The ordered plan of ``kind`` over the jobs ``selector`` picks among ``jobs`` (any
    superset of them)."""
    if kind not in COMMANDS:
        raise InvalidInput(f"{kind} is not a bulk operation")
    chosen = select(selector, jobs, groups)
    if len(chosen) > MAX_ITEMS:
        raise InvalidInput(
            f"the selector picks {len(chosen)} jobs; one bulk operation takes at most "
            f"{MAX_ITEMS}: narrow it"
        )
    return Plan(kind, tuple(_plan_item(kind, job, groups, clusters) for job in chosen))


def _plan_item(
    kind: OperationKind,
    job: JobRecord,
    groups: Mapping[str, GroupRecord],
    clusters: Mapping[str, ClusterRecord],
) -> PlannedItem:
    where = current_cluster(job, groups)

    def item(action: Action, why: str) -> PlannedItem:
        return PlannedItem(job.id, job.name, job.group, job.team, job.priority, action, why, where)

    if job.directive is not None:
        return item(Action.SKIP, f"in failover {job.directive.operation_id}: skipped")
    skip = why_not(COMMANDS[kind], job)
    if skip is not None:
        return item(Action.SKIP, f"{skip}: skipped")
    health = clusters[where].health if where is not None and where in clusters else None
    if kind != OperationKind.STOP and health not in (None, ClusterHealth.NORMAL.value):
        return item(
            Action.REFUSE,
            f"cluster {where} is {health}: refused (fail the job over instead)",
        )
    return item(Action(COMMANDS[kind].value), _why(kind, job, where))


def why_not(command: Command, job: JobRecord) -> str | None:
    """Why ``command`` has nothing to do for ``job`` now (None: it has);
    ``states.command_effect``'s rules, told as an operator reads them."""
    running = job.desired_state == DesiredState.RUNNING
    if command == Command.START and running and not job.state.is_at_rest:
        return f"already started ({job.state})"
    if command == Command.STOP and not running:
        return f"already stopped ({job.state})"
    if command == Command.RESTART and not running:
        return f"stopped ({job.state}): start it instead"
    return None


def _why(kind: OperationKind, job: JobRecord, where: str | None) -> str:
    on = f" on {where}" if where else ""
    if kind == OperationKind.START:
        return f"{job.state}: will start{on} (through the submission gate)"
    if kind == OperationKind.STOP:
        return f"{job.state}: will stop{on}"
    run = job.current_run.id if job.current_run is not None else None
    replaced = f"run {run}" if run is not None else "its run"
    return f"{job.state}: will replace {replaced}{on} by a new run"


# -- decisions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """How long an item may wait for its job (seconds; 0: no limit)."""

    start_timeout: float = 900.0
    stop_timeout: float = 600.0


@dataclass(frozen=True)
class Facts:
    """What the executor read for one item this round."""

    job: JobRecord | None
    cancelling: bool
    now: datetime


@dataclass(frozen=True)
class Apply:
    """Apply ``command`` to the job and go to WAITING, in one transaction; when the job's state
    read under its row lock says the command has nothing to do any more, SKIPPED instead."""

    command: Command
    note: str


Decision = Wait | Apply | Advance[Step]


def decide(item: ItemRecord, facts: Facts, timing: Timing, kind: OperationKind) -> Decision:
    """The next step of ``item`` (see the module docstring)."""
    step = Step(item.step)
    job = facts.job
    if step.is_final:
        return Wait("")
    action = Action(item.action)
    if step == Step.PENDING:
        if facts.cancelling:
            return Advance(Step.CANCELLED, "the operation was cancelled before the item started")
        if action == Action.SKIP:
            return Advance(Step.SKIPPED, item.why)
        if action == Action.REFUSE:
            return Advance(Step.REFUSED, item.why)
        if job is None:
            return Advance(Step.FAILED, "the job was deleted")
        command = COMMANDS[kind]
        skip = recheck(command, job)
        if skip is not None:
            return Advance(Step.SKIPPED, skip)
        return Apply(command, f"{command} applied (the job was {job.state})")
    # WAITING
    if job is None:
        return Advance(Step.FAILED, "the job was deleted")
    since = item.entered(Step.WAITING.value)
    waited = (facts.now - since).total_seconds() if since is not None else 0.0
    command = COMMANDS[kind]
    reached = _reached(command, job, item)
    if reached is not None:
        return Advance(Step.DONE, reached)
    if command != Command.STOP and job.state == JobState.FAILED:
        return Advance(Step.FAILED, f"the job FAILED: {job.state_reason or 'it gave up'}")
    limit = timing.stop_timeout if command == Command.STOP else timing.start_timeout
    if limit and waited > limit:
        goal = "stopped" if command == Command.STOP else "RUNNING"
        return Advance(Step.FAILED, f"not {goal} within {limit:g} s (the job is {job.state})")
    reason = f": {job.state_reason}" if job.state_reason else ""
    return Wait(f"the job is {job.state}{reason}")


def recheck(command: Command, job: JobRecord) -> str | None:
    """Why a planned ``command`` is skipped when its item comes to apply it (None: apply it):
    the job went into a failover, or needs it no more. Decided again on the job's row under its
    lock when the command is applied (``OperationsLedger.apply_command``)."""
    if job.directive is not None:
        return f"the job went into failover {job.directive.operation_id}"
    skip = why_not(command, job)
    return f"{skip} meanwhile: nothing to do" if skip is not None else None


def new_operation(
    plan: Plan,
    selector: Selector,
    *,
    created_by: str,
    reason: str,
    home_group: str,
    parallelism: int,
    grace_seconds: float | None = None,
) -> NewOperation:
    """``plan`` as it is stored: a PENDING bulk operation, with its audit entry's detail. Its team
    is the one team of its jobs (None when they are several teams')."""
    teams = plan.teams
    return NewOperation(
        kind=plan.kind,
        home_group=home_group,
        selector=selector.to_json(),
        options={
            "parallelism": parallelism,
            "teams": sorted(teams),
            "grace_seconds": grace_seconds,
        },
        reason=reason,
        created_by=created_by,
        plan_digest=plan.digest,
        team=next(iter(teams)) if len(teams) == 1 else None,
        items=tuple(
            NewItem(
                job_id=i.job_id,
                job_name=i.job_name,
                action=i.action.value,
                why=i.why,
                step=Step.PENDING.value,
                source_cluster=i.cluster,
                detail={"priority": i.priority.value, "group": i.group, "team": i.team},
            )
            for i in plan.items
        ),
        audit={
            "kind": plan.kind.value,
            "selector": selector.to_json(),
            "reason": reason,
            "plan_digest": plan.digest,
            "items": len(plan.items),
            "counts": plan.counts(),
            "parallelism": parallelism,
        },
    )


def _reached(command: Command, job: JobRecord, item: ItemRecord) -> str | None:
    """What the job shows that the command took effect (None: not yet)."""
    running = job.desired_state == DesiredState.RUNNING
    if command == Command.STOP:
        if running:
            return "started again by an operator meanwhile"
        if job.state.is_at_rest:
            return f"stopped ({job.state})"
        return None
    if not running:
        return "stopped by an operator meanwhile"
    if job.state != JobState.RUNNING or job.current_run is None:
        return None
    if command == Command.RESTART:
        before = item.detail.get("run_before")
        if before is not None and job.current_run.id == before:
            return None
        return f"RUNNING with run {job.current_run.id}" + (
            f" (replaced run {before})" if before is not None else ""
        )
    return f"RUNNING with run {job.current_run.id}"


__all__ = [
    "COMMANDS",
    "KINDS",
    "Action",
    "Advance",
    "Apply",
    "Facts",
    "Plan",
    "PlannedItem",
    "Selector",
    "Step",
    "Timing",
    "Wait",
    "decide",
    "new_operation",
    "plan_bulk",
    "recheck",
    "transition",
]
