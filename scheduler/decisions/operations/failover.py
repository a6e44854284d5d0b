"""Failover, the first kind of operation: its plan and its item step machine. Pure.

**Plan.** A failover names a *source* cluster, an optional *target* (default: each job's group's
other cluster -- the failover cluster for a job on its primary, the primary for a job on its
failover cluster, so a fail-back needs no target either) and a *selector* (priorities, teams,
businesses, groups, job names; at least one, or ``all``). :func:`plan_failover` turns the jobs
on the source into an ordered plan -- priority high first, then by name -- in which every item
says what will happen and why. A dry run returns exactly the items an execution then runs, in
that order (same inputs, same plan; the plan's digest tells when they differ).

Planned actions (:class:`Action`):

    kill     the source answers: kill the job's application there and wait until the cluster
             confirms it gone, then start it on the target from its checkpoint
    fence    the source cannot be reached and is abnormal: supersede the run's fencing token and
             wait until its self-fencing driver was told so, or its last fence lease surely
             lapsed (or, without a lease, its blind limit surely passed)
    move     no application on the source: switch the job to the target (and start it there
             if its desired state is RUNNING) -- once the fence lease of its last run, if that
             run ended unconfirmed (LOST), surely lapsed
    skip     nothing to do for this job (no target, already elsewhere, in another failover)
    refuse   not safe: the source is unreachable but NORMAL, the run is not self-fencing and the
             operator did not force it, or the target is abnormal

**Items** walk persisted steps (:class:`Step`); :func:`decide` is the pure decision of the next
one from what the store says (the item, its job, the clusters), and the executor
(``scheduler.loops.operations``) applies it in one fenced transaction::

    PENDING     → DRAINING     the drain directive is on the job (its owner kills or fences)
                → SKIPPED | REFUSED      as planned (or the job left the source meanwhile)
                → CANCELLED    the operation was cancelled before the item started
                → FAILED       the job was deleted
    DRAINING    → FENCING      the owner fenced the run (source unreachable and abnormal), or
                               the job's last run on the source ended unconfirmed (LOST) and
                               its driver may still hold a fence lease
                → CHECKPOINT   the source confirmed the application gone (or there was none)
                → CANCELLED    cancelled, and the application is gone: the job stays where it is
                → FAILED       not drained within the drain timeout
    FENCING     → CHECKPOINT   the stale driver was answered "superseded" by a fence check and
                               the exit grace passed; or its last fence lease surely lapsed
                               (recorded end + clock margin + exit grace), whether or not the
                               driver was ever reached; or, for a run without a lease, its blind
                               limit surely expired, or the operator forced a run that is not
                               self-fencing
                → CANCELLED    cancelled, once the driver is surely gone
                → FAILED       (only with a fence timeout configured)
    CHECKPOINT  → SWITCHING    the checkpoint is available under the target's storage root
                → CANCELLED
                → FAILED       it could not be made available (after retries)
    SWITCHING   → STARTING     the job's cluster is the target: its owner submits there
                → DONE         a stopped job: only its cluster was switched
                → FAILED
    STARTING    → DONE         RUNNING on the target (or stopped there by an operator)
                → FAILED       not RUNNING within the start timeout, or it gave up

:func:`transition` is the one function that checks a step change. A cancel takes effect at the
next step boundary before the switch; once switched, an item finishes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scheduler.core.directive import Directive, Phase
from scheduler.core.errors import InvalidInput
from scheduler.core.names import validate_name
from scheduler.core.operations_ledger import SetDirective, SwitchCluster
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, Priority
from scheduler.decisions import leases, storage
from scheduler.decisions.health import ClusterHealth
from scheduler.decisions.operations.model import (
    FAILED_STEP_NAMES,
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
from scheduler.decisions.planning import GAVE_UP
from scheduler.decisions.selffencing import self_fencing

#: the Spark properties a run's driver reads its blind limit and idle check from
MAX_BLIND_PROPERTY = "spark.drover.fenceMaxBlindSeconds"
IDLE_CHECK_PROPERTY = "spark.drover.fenceIdleCheckSeconds"
#: drover_runtime's default idle check (pipelines/drover_runtime.py)
DEFAULT_IDLE_CHECK_S = 30.0

PRIORITY_ORDER = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}


class Action(enum.StrEnum):
    KILL = "kill"
    FENCE = "fence"
    MOVE = "move"
    SKIP = "skip"
    REFUSE = "refuse"

    @property
    def runs(self) -> bool:
        """Whether an item with this action moves its job (not skipped, not refused)."""
        return self in (Action.KILL, Action.FENCE, Action.MOVE)


class Step(ItemSteps, enum.StrEnum):
    PENDING = "PENDING"
    DRAINING = "DRAINING"
    FENCING = "FENCING"
    CHECKPOINT = "CHECKPOINT"
    SWITCHING = "SWITCHING"
    STARTING = "STARTING"
    DONE = "DONE"
    SKIPPED = "SKIPPED"
    REFUSED = "REFUSED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


S = Step
#: a failover item's own moves; from PENDING also SKIPPED, REFUSED, CANCELLED and FAILED, as
#: every kind's item (``model.item_transitions``)
STEP_TRANSITIONS: Mapping[Step, frozenset[Step]] = item_transitions(
    Step,
    {
        S.PENDING: {S.DRAINING},
        S.DRAINING: {S.FENCING, S.CHECKPOINT, S.CANCELLED, S.FAILED},
        S.FENCING: {S.CHECKPOINT, S.CANCELLED, S.FAILED},
        S.CHECKPOINT: {S.SWITCHING, S.CANCELLED, S.FAILED},
        S.SWITCHING: {S.STARTING, S.DONE, S.FAILED},
        S.STARTING: {S.DONE, S.FAILED},
    },
)
del S
#: final steps that make the operation FAILED
FAILED_STEPS = FAILED_STEP_NAMES


def transition(current: Step, new: Step) -> Step:
    """``new`` if the table allows ``current → new``; IllegalTransition otherwise."""
    return step_transition(STEP_TRANSITIONS, current, new, item="a failover item")


# -- the request ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selector(JobSelector):
    """Which jobs of the source: every non-empty field must match (``all``: every job)."""

    def matches(self, job: JobRecord) -> bool:
        return self.matches_fields(job)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Selector:
        return cls(**cls.fields_from_json(data))

    @classmethod
    def at_or_above(cls, priority: Priority, *, groups: Iterable[str] = ()) -> Selector:
        """The jobs at ``priority`` or higher (automatic failover)."""
        rank = PRIORITY_ORDER[priority]
        return cls(
            priorities=frozenset(p for p, r in PRIORITY_ORDER.items() if r <= rank),
            groups=frozenset(groups),
        )


ALL_JOBS = "*"


@dataclass(frozen=True)
class Force:
    """The operator's acknowledgement that runs which are not self-fencing may be fenced: their
    drivers on the source may keep running (and writing) after the job started on the target."""

    jobs: frozenset[str]
    acknowledgement: str
    by: str = ""

    def covers(self, job: str) -> bool:
        return ALL_JOBS in self.jobs or job in self.jobs

    def to_json(self) -> dict[str, Any]:
        return {"jobs": sorted(self.jobs), "acknowledgement": self.acknowledgement, "by": self.by}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Force | None:
        if not data:
            return None
        return cls(
            frozenset(data.get("jobs", ())), str(data.get("acknowledgement", "")), str(data["by"])
        )


@dataclass(frozen=True)
class Request:
    source: str
    target: str | None = None
    selector: Selector = field(default_factory=Selector)
    force: Force | None = None

    def check(self) -> Request:
        """Refuse a request that is not well formed (InvalidInput)."""
        validate_name(self.source, "source cluster")
        if self.target is not None:
            validate_name(self.target, "target cluster")
            if self.target == self.source:
                raise InvalidInput("the target cluster must differ from the source cluster")
        if self.selector.empty:
            raise InvalidInput(
                "select the jobs to fail over (priorities, teams, businesses, groups, jobs) "
                "or ask for all of them explicitly (all: true)"
            )
        if self.force is not None:
            if not self.force.jobs:
                raise InvalidInput("force names no job (list job names, or '*' for every job)")
            if not self.force.acknowledgement.strip():
                raise InvalidInput(
                    "forcing the fence of runs that are not self-fencing needs an "
                    "acknowledgement: their drivers may go on running on the source"
                )
        return self


# -- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedItem:
    job_id: int
    job_name: str
    group: str
    priority: Priority
    action: Action
    why: str
    source: str
    target: str | None
    #: the live run on the source the item drains (None: none)
    source_run_id: int | None = None
    #: the operator forced the fence of a run that is not self-fencing
    forced: bool = False

    def key(self) -> list[Any]:
        return [self.job_name, self.action.value, self.target, self.source_run_id, self.forced]


@dataclass(frozen=True)
class Plan:
    source: str
    target: str | None
    source_reachable: bool
    items: tuple[PlannedItem, ...]

    @property
    def digest(self) -> str:
        return plan_digest([self.source, self.target], (i.key() for i in self.items))

    def home_group(self, fallback: str) -> str:
        return home_group(self.items, fallback)


def live_run(job: JobRecord) -> RunRecord | None:
    run = job.current_run
    return run if run is not None and not run.state.is_final else None


def current_cluster(job: JobRecord, groups: Mapping[str, GroupRecord]) -> str | None:
    """Where the job is: its live run's cluster, else its cluster, else its group's primary."""
    run = live_run(job)
    if run is not None:
        return run.cluster
    if job.cluster:
        return job.cluster
    group = groups.get(job.group)
    return group.primary_cluster if group is not None else None


def default_target(group: GroupRecord | None, source: str) -> str | None:
    """The group's other cluster: its failover cluster, or its primary for a job on the failover
    cluster (a fail-back)."""
    if group is None:
        return None
    if source == group.failover_cluster:
        return group.primary_cluster
    return group.failover_cluster


def sort_key(job: JobRecord) -> tuple[int, str]:
    return PRIORITY_ORDER.get(job.priority, len(PRIORITY_ORDER)), job.name


def plan_failover(
    request: Request,
    jobs: Iterable[JobRecord],
    groups: Mapping[str, GroupRecord],
    clusters: Mapping[str, ClusterRecord],
    *,
    source_reachable: bool,
    now: datetime,
) -> Plan:
    """The ordered plan for ``request`` (see the module docstring). ``jobs``: candidates (any
    superset of the jobs on the source); ``source_reachable``: whether the source answered a
    probe just now."""
    source = clusters.get(request.source)
    if source is None:
        raise InvalidInput(f"no cluster named {request.source!r}")
    if request.target is not None and request.target not in clusters:
        raise InvalidInput(f"no cluster named {request.target!r}")
    chosen = [
        j
        for j in jobs
        if current_cluster(j, groups) == request.source and request.selector.matches(j)
    ]
    items = tuple(
        _plan_item(job, request, groups, clusters, source, source_reachable, now)
        for job in sorted(chosen, key=sort_key)
    )
    return Plan(request.source, request.target, source_reachable, items)


def _plan_item(
    job: JobRecord,
    request: Request,
    groups: Mapping[str, GroupRecord],
    clusters: Mapping[str, ClusterRecord],
    source: ClusterRecord,
    reachable: bool,
    now: datetime,
) -> PlannedItem:
    target = request.target or default_target(groups.get(job.group), source.name)
    run = live_run(job)

    def item(action: Action, why: str, *, forced: bool = False) -> PlannedItem:
        return PlannedItem(
            job.id,
            job.name,
            job.group,
            job.priority,
            action,
            why,
            source.name,
            target,
            run.id if run is not None else None,
            forced,
        )

    if target is None:
        return item(Action.SKIP, f"no failover cluster for group {job.group}: skipped")
    if target == source.name:
        return item(Action.SKIP, f"the target of group {job.group} is {target} itself: skipped")
    if job.directive is not None:
        return item(Action.SKIP, f"already in failover {job.directive.operation_id}: skipped")
    target_health = clusters[target].health
    if target_health != ClusterHealth.NORMAL.value:
        return item(Action.REFUSE, f"target {target} is {target_health}: refused")
    start = "start on" if job.desired_state == DesiredState.RUNNING else "switch to"
    then = f"then {start} {target} from its checkpoint"
    if run is None:
        last = job.current_run
        wait = ""
        if last is not None and last.cluster == source.name and last.lease_until is not None:
            if leases.holds(last, now, 0.0) is not None:
                wait = (
                    f" once the fence lease of run {last.id} (ended {last.state}, unconfirmed) "
                    f"has lapsed (granted until {last.lease_until.isoformat(timespec='seconds')})"
                )
        if job.desired_state == DesiredState.RUNNING:
            return item(
                Action.MOVE,
                f"no application on {source.name}: start on {target} from its checkpoint{wait}",
            )
        return item(
            Action.MOVE,
            f"stopped: switch to {target} (its checkpoint made available there){wait}",
        )
    if reachable:
        return item(
            Action.KILL,
            f"source {source.name} reachable: kill run {run.id} and confirm it gone, {then}",
        )
    if source.health == ClusterHealth.NORMAL.value:
        return item(
            Action.REFUSE,
            f"source {source.name} unreachable but NORMAL: refused (mark it abnormal to fence: "
            f"drover clusters mark-abnormal {source.name})",
        )
    fencing = self_fencing(run, now)
    if fencing:
        return item(
            Action.FENCE,
            f"source {source.name} unreachable and {source.health}: will fence run {run.id} "
            f"(self-fencing), {then}",
        )
    if request.force is not None and request.force.covers(job.name):
        return item(
            Action.FENCE,
            f"source {source.name} unreachable and {source.health}; run {run.id} is not "
            f"self-fencing: fence forced by {request.force.by or 'the operator'} "
            f"(acknowledged: {request.force.acknowledgement}), {then}",
            forced=True,
        )
    what = "not self-fencing" if fencing is False else "not known to be self-fencing yet"
    return item(
        Action.REFUSE,
        f"{what} and source {source.name} unreachable: refused unless forced (its driver "
        "would go on running there)",
    )


# -- the step machine ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """How long the steps may take (settings ``DROVER_FAILOVER_*``), in seconds."""

    #: after a stale driver was answered "superseded", how long it gets to exit
    fence_exit_grace: float = 15.0
    #: how long the owner may take to drain a job (0: no limit)
    drain_timeout: float = 600.0
    #: how long a stale driver may take to be fenced (0: no limit)
    fence_timeout: float = 0.0
    #: how long the job may take to be RUNNING on the target (0: no limit)
    start_timeout: float = 900.0
    #: retries of a failed checkpoint step before the item fails, and the pause between them
    checkpoint_attempts: int = 5
    retry_after: float = 5.0
    #: added to a run's recorded fence lease end before its lease surely lapsed (clock margin)
    lease_margin: float = leases.DEFAULT_MARGIN_S


@dataclass(frozen=True)
class Facts:
    """What the executor read for one item this round: every fact a step is decided on (a new
    one is one more field here, filled by the executor from its round's read, and read by the
    step's function such as :func:`fence_done`). Until when the source run's driver may hold a
    fence lease is the run's own ``lease_until``, as stored now."""

    job: JobRecord | None
    #: the run the item drained or waits for (the source run), if any, as stored now, with its
    #: recorded fence lease end
    source_run: RunRecord | None
    clusters: Mapping[str, ClusterRecord]
    cancelling: bool
    now: datetime
    force: Force | None = None


# decisions (besides model.Wait and model.Advance; the job writes that go with a step are the
# ledger's: scheduler.core.operations_ledger.SetDirective and SwitchCluster) ---------------------


@dataclass(frozen=True)
class MakeAvailable:
    """Make the checkpoint ``source_location`` available at ``target_location`` (I/O: the
    executor asks ``scheduler.loops.replication``), then go to SWITCHING."""

    job: str
    source_location: str | None
    target_location: str
    #: the target cluster's storage root (the target must lie inside it)
    target_root: str | None = None


@dataclass(frozen=True)
class Record:
    """Record item fields (and a history note) without changing the step."""

    fields: Mapping[str, Any]
    note: str


Decision = Wait | Advance[Step] | MakeAvailable | Record


def _overdue(limit: float, entered: datetime, now: datetime) -> bool:
    """Whether a step entered at ``entered`` has outlasted ``limit`` seconds (0: no limit)."""
    return bool(limit) and (now - entered).total_seconds() > limit


def _failed(job: JobRecord, item: ItemRecord, note: str, **fields: Any) -> Advance[Step]:
    """The item fails; its job goes back to its usual management."""
    return Advance(Step.FAILED, note, job_write=_clear(job, item), fields=fields)


def _conf_seconds(job: JobRecord, key: str, default: float) -> float:
    try:
        return max(0.0, float(job.conf.get(key, default)))
    except (TypeError, ValueError):
        return default


def drain_directive(item: ItemRecord, operation_id: int, forced: bool) -> Directive:
    assert item.source_cluster is not None and item.target_cluster is not None
    return Directive(
        operation_id, item.id, Phase.DRAIN, item.source_cluster, item.target_cluster, forced
    )


def _ours(job: JobRecord, item: ItemRecord) -> bool:
    d = job.directive
    return d is not None and d.operation_id == item.operation_id and d.item_id == item.id


def _clear(job: JobRecord | None, item: ItemRecord) -> SetDirective | None:
    return SetDirective(None) if job is not None and _ours(job, item) else None


def decide(item: ItemRecord, facts: Facts, timing: Timing) -> Decision:
    """The next move of a failover item (see the module docstring). Never raises for what the
    store says: an item that cannot go on FAILs with the reason."""
    step = Step(item.step)
    job = facts.job
    if step.is_final:
        return Wait("ended")
    if step == Step.PENDING and item.action in (Action.SKIP, Action.REFUSE):
        return Advance(Step.SKIPPED if item.action == Action.SKIP else Step.REFUSED, item.why)
    if job is None:
        return Advance(Step.FAILED, f"job {item.job_name} no longer exists")
    if step == Step.PENDING:
        return _start(item, job, facts)
    if not _ours(job, item) and step in (
        Step.DRAINING,
        Step.FENCING,
        Step.CHECKPOINT,
        Step.SWITCHING,
    ):
        return Advance(
            Step.FAILED,
            "the job's failover directive was replaced or removed meanwhile: "
            f"{job.directive.describe() if job.directive else 'none'}",
        )
    entered = item.entered(step.value) or item.updated_at
    if step == Step.DRAINING:
        return _draining(item, job, facts, timing, entered)
    if step == Step.FENCING:
        return _fencing(item, job, facts, timing, entered)
    if step == Step.CHECKPOINT:
        if facts.cancelling:
            return Advance(
                Step.CANCELLED,
                f"cancelled: the job stays on {item.source_cluster}",
                job_write=_clear(job, item),
            )
        return _checkpoint(item, job, facts)
    if step == Step.SWITCHING:
        return _switch(item, job, facts)
    return _starting(item, job, facts, timing, entered)


def _start(item: ItemRecord, job: JobRecord, facts: Facts) -> Decision:
    action = Action(item.action)
    if facts.cancelling:
        return Advance(Step.CANCELLED, "cancelled before it started")
    if job.directive is not None and not _ours(job, item):
        return Advance(
            Step.SKIPPED, f"the job is in failover {job.directive.operation_id} now: skipped"
        )
    run = live_run(job)
    where = run.cluster if run is not None else (job.cluster or item.source_cluster)
    if where != item.source_cluster:
        return Advance(Step.SKIPPED, f"the job is on {where} now, no longer on the source")
    forced = bool(item.detail.get("forced"))
    directive = drain_directive(item, item.operation_id, forced)
    if run is None:
        note = f"no application on {item.source_cluster}: held for the move"
    elif action == Action.FENCE:
        note = f"drain run {run.id}: its owner fences it ({item.source_cluster} unreachable)"
    else:
        note = f"drain run {run.id}: its owner kills it on {item.source_cluster} and confirms"
    return Advance(
        Step.DRAINING,
        note,
        job_write=SetDirective(directive),
        fields={"source_run_id": run.id if run is not None else item.source_run_id},
    )


def _draining(
    item: ItemRecord, job: JobRecord, facts: Facts, timing: Timing, entered: datetime
) -> Decision:
    run = live_run(job)
    if run is not None and run.cluster == item.source_cluster:
        if _overdue(timing.drain_timeout, entered, facts.now):
            return _failed(
                job,
                item,
                f"run {run.id} not drained from {item.source_cluster} within "
                f"{timing.drain_timeout:g} s (job {job.state}: {job.state_reason}); the job "
                "goes back to its usual management",
            )
        return Wait(
            f"the owner drains run {run.id} from {item.source_cluster} "
            f"(job {job.state}: {job.state_reason or '-'})"
        )
    if run is not None:
        return _failed(
            job,
            item,
            f"run {run.id} was started on {run.cluster} meanwhile",
        )
    drained = facts.source_run
    if drained is not None and drained.fenced_at is not None:
        return Advance(
            Step.FENCING,
            f"run {drained.id} fenced at {drained.fenced_at.isoformat(timespec='seconds')}: "
            "its token is superseded; waiting for its driver to stop",
            fields={"fenced_at": drained.fenced_at.isoformat()},
        )
    last = drained or job.current_run
    if last is not None and last.cluster == item.source_cluster:
        # ended without its cluster's word (a fence that failed earlier, a cluster that forgot
        # it): its driver may still commit, so it is waited out as a fence is
        why = stale_driver(last, job, facts.now, timing)
        if why is not None:
            return Advance(Step.FENCING, why, fields={"source_run_id": last.id})
    if facts.cancelling:
        return Advance(
            Step.CANCELLED,
            f"cancelled: drained, the job stays on {item.source_cluster}",
            job_write=_clear(job, item),
        )
    if drained is not None:
        note = f"run {drained.id} gone from {item.source_cluster} ({drained.state}: "
        note += f"{drained.reason or 'confirmed by the cluster'})"
    else:
        note = f"no application on {item.source_cluster}"
    return Advance(Step.CHECKPOINT, note)


def fence_done(
    run: RunRecord, job: JobRecord, directive_forced: bool, now: datetime, timing: Timing
) -> str | None:
    """Why the stale driver of the fenced ``run`` is surely gone, or None while it may not be.

    - it was answered "superseded" by a fence check and had ``fence_exit_grace`` to exit;
    - its last fence lease surely lapsed: the recorded lease end (no answer granted a lease
      ending later, and the run, closed, is granted none any more), the clock margin and the
      exit grace have passed -- whether or not the driver was ever reached (a dead cluster);
    - for a run that was never granted a lease (a runtime that does not honour leases):
      its blind limit (``spark.drover.fenceMaxBlindSeconds``: the driver stops when it has not
      seen its token confirmed for that long) surely expired: the fence closed the run, so no
      check succeeded after ``fenced_at``; the driver stops at its next check after the limit
      (a batch, or its idle check) and then needs the exit grace; or the operator forced the
      fence of a run that is not self-fencing (acknowledged).

    A run that holds a lease which may still be valid is never done by any other way than the
    superseded answer (after which its runtime commits nothing more).
    """
    if run.fence_superseded_at is not None:
        ready = run.fence_superseded_at + timedelta(seconds=timing.fence_exit_grace)
        if now >= ready:
            return (
                f"its driver was answered 'superseded' at "
                f"{run.fence_superseded_at.isoformat(timespec='seconds')} and had "
                f"{timing.fence_exit_grace:g} s to exit"
            )
    gone = lease_gone_at(run, timing)
    if gone is not None:
        if now < gone:
            return None
        assert run.lease_until is not None
        return (
            f"its fence lease surely lapsed (granted until "
            f"{run.lease_until.isoformat(timespec='seconds')}, + {timing.lease_margin:g} s clock "
            f"margin + {timing.fence_exit_grace:g} s to exit): it commits nothing more"
        )
    if directive_forced and self_fencing(run, now) is not True:
        return "forced by the operator: not self-fencing, not waited for (acknowledged)"
    blind = _conf_seconds(job, MAX_BLIND_PROPERTY, 0.0)
    if blind > 0 and run.fenced_at is not None:
        idle = _conf_seconds(job, IDLE_CHECK_PROPERTY, DEFAULT_IDLE_CHECK_S)
        limit = blind + idle + timing.fence_exit_grace
        if now >= run.fenced_at + timedelta(seconds=limit):
            return (
                f"its blind limit of {blind:g} s surely expired ({limit:g} s since the fence, "
                "with its idle check and the exit grace)"
            )
    return None


def _fencing(
    item: ItemRecord, job: JobRecord, facts: Facts, timing: Timing, entered: datetime
) -> Decision:
    run = facts.source_run
    if run is None and job.current_run is not None and job.current_run.id == item.source_run_id:
        run = job.current_run  # recorded this round: the round's read did not have it
    if run is None:
        return Advance(Step.FAILED, f"the fenced run {item.source_run_id} no longer exists")
    forced = bool(job.directive and job.directive.force_unfenced)
    why = fence_done(run, job, forced, facts.now, timing)
    if why is not None:
        if facts.cancelling:
            return Advance(
                Step.CANCELLED,
                f"cancelled once fenced ({why}): the job stays on {item.source_cluster}",
                job_write=_clear(job, item),
            )
        return Advance(Step.CHECKPOINT, f"run {run.id} fenced: {why}")
    if _overdue(timing.fence_timeout, entered, facts.now):
        return _failed(
            job,
            item,
            f"the stale driver of run {run.id} was not answered 'superseded' within "
            f"{timing.fence_timeout:g} s",
        )
    gone = lease_gone_at(run, timing)
    if gone is not None:
        limit = (
            f"its fence lease surely lapsed at {gone.isoformat(timespec='seconds')} (granted "
            f"until {run.lease_until.isoformat(timespec='seconds') if run.lease_until else '-'}"
            f" + {timing.lease_margin:g} s clock margin + {timing.fence_exit_grace:g} s to exit)"
        )
    else:
        blind = _conf_seconds(job, MAX_BLIND_PROPERTY, 0.0)
        limit = (
            f"no fence lease was granted to it; its blind limit is {blind:g} s"
            if blind
            else "no fence lease was granted to it and no blind limit is set"
        )
    return Wait(
        f"the stale driver of run {run.id} on {item.source_cluster} stops at its next fence "
        f"check (answered 'superseded' + {timing.fence_exit_grace:g} s), or when {limit}"
    )


def stale_driver(run: RunRecord, job: JobRecord, now: datetime, timing: Timing) -> str | None:
    """Why the driver of ``run`` -- closed, but without its cluster confirming its application
    gone (LOST) -- may still be committing, or None when it surely is not: it may hold a lease
    (:mod:`scheduler.decisions.leases`), or it checked its fence with a runtime that grants no
    lease (fail-open) and no way of :func:`fence_done` says it is gone."""
    if not run.state.is_final or not leases.unconfirmed_end(run):
        return None
    if run.lease_until is None and run.fence_checked_at is None:
        return None  # it never checked its fence: nothing of it can be waited for
    if fence_done(run, job, False, now, timing) is not None:
        return None
    gone = lease_gone_at(run, timing)
    if gone is not None:
        assert run.lease_until is not None
        return (
            f"run {run.id} on {run.cluster} ended without its cluster confirming it "
            f"({run.state}) and its driver may hold a fence lease until "
            f"{run.lease_until.isoformat(timespec='seconds')}: waiting until "
            f"{gone.isoformat(timespec='seconds')} (+ clock margin and exit grace)"
        )
    return (
        f"run {run.id} on {run.cluster} ended without its cluster confirming it "
        f"({run.state}); its driver checks its fence without a lease (an older runtime) "
        "and was never answered 'superseded': it may still commit"
    )


def lease_gone_at(run: RunRecord, timing: Timing) -> datetime | None:
    """When the driver of ``run`` is surely gone by its lease: its recorded lease end, the
    clock margin and the exit grace; None when it was never granted a lease."""
    until = leases.lapses_at(run, timing.lease_margin)
    return None if until is None else until + timedelta(seconds=timing.fence_exit_grace)


def _checkpoint(item: ItemRecord, job: JobRecord, facts: Facts) -> Decision:
    if item.not_before is not None and facts.now < item.not_before:
        return Wait(f"retrying the checkpoint at {item.not_before.isoformat(timespec='seconds')}")
    target = facts.clusters.get(item.target_cluster or "")
    if target is None:
        return Advance(Step.FAILED, f"no cluster named {item.target_cluster!r} any more")
    clusters = list(facts.clusters.values())
    try:
        location = storage.checkpoint_location(target, job, clusters)
    except InvalidInput as exc:
        return Advance(Step.FAILED, f"no checkpoint location on {target.name}: {exc.message}")
    source = source_checkpoint(item, job, facts)
    if source == location:  # a job moved back and forth never shares a checkpoint, but be sure
        source = None
    return MakeAvailable(job.name, source, location, target.storage_root)


def source_checkpoint(item: ItemRecord, job: JobRecord, facts: Facts) -> str | None:
    """Where the job last checkpointed on the source: the drained run's location, else its last
    run's there, else where a run on the source would have checkpointed."""
    run = facts.source_run
    if run is None and job.current_run is not None:
        if job.current_run.cluster == item.source_cluster:
            run = job.current_run
    if run is not None and run.checkpoint_location:
        return run.checkpoint_location
    source = facts.clusters.get(item.source_cluster or "")
    if source is None:
        return None
    try:
        return storage.checkpoint_location(source, job, list(facts.clusters.values()))
    except InvalidInput:
        return None


def _switch(item: ItemRecord, job: JobRecord, facts: Facts) -> Decision:
    target = item.target_cluster
    assert target is not None and job.directive is not None
    live = live_run(job)
    if live is not None:  # the drain directive still holds: its owner kills it first
        return Wait(f"run {live.id} is live on {live.cluster}: it is drained before the switch")
    checkpoint = item.detail.get("checkpoint_to", "")
    resume = item.detail.get("resume")
    fields = {"last_run_before_switch": job.current_run_id}
    if job.desired_state != DesiredState.RUNNING:
        return Advance(
            Step.DONE,
            f"switched to {target}; the job stays stopped (checkpoint {checkpoint or 'none'})",
            job_write=SwitchCluster(
                target, None, f"failover {item.operation_id}: switched to {target}"
            ),
            fields=fields,
        )
    directive = Directive(
        item.operation_id,
        item.id,
        Phase.RUN,
        job.directive.source,
        target,
        job.directive.force_unfenced,
    )
    reason = f"failover {item.operation_id}: moved to {target}; starts there " + (
        f"from checkpoint {checkpoint} ({resume})" if checkpoint else "afresh"
    )
    return Advance(
        Step.STARTING,
        f"switched to {target}: its owner submits it there",
        job_write=SwitchCluster(target, directive, reason),
        fields=fields,
    )


def _starting(
    item: ItemRecord, job: JobRecord, facts: Facts, timing: Timing, entered: datetime
) -> Decision:
    target = item.target_cluster
    run = job.current_run
    fields: dict[str, Any] = {}
    before = item.detail.get("last_run_before_switch")
    if run is not None and run.cluster == target and (before is None or run.id > int(before)):
        fields["target_run_id"] = run.id
    if job.desired_state != DesiredState.RUNNING:
        return Advance(
            Step.DONE,
            f"stopped by an operator on {target} meanwhile",
            job_write=_clear(job, item),
            fields=fields,
        )
    if (
        "target_run_id" in fields
        and run is not None
        and job.state == JobState.RUNNING
        and not run.state.is_final
    ):
        return Advance(
            Step.DONE,
            f"RUNNING on {target} as run {run.id}",
            job_write=_clear(job, item),
            fields=fields,
        )
    if job.state == JobState.FAILED and job.state_reason.startswith(GAVE_UP):
        return _failed(
            job,
            item,
            f"the job gave up on {target}: {job.state_reason}",
            **fields,
        )
    if _overdue(timing.start_timeout, entered, facts.now):
        return _failed(
            job,
            item,
            f"not RUNNING on {target} within {timing.start_timeout:g} s (job {job.state}: "
            f"{job.state_reason}); it stays there under its usual management",
            **fields,
        )
    if fields.get("target_run_id", item.target_run_id) != item.target_run_id:
        return Record(fields, f"submitted on {target} as run {fields['target_run_id']}")
    return Wait(f"job {job.state} on {target}: {job.state_reason or '-'}")


def job_event_message(item: ItemRecord, note: str) -> str:
    return f"failover {item.operation_id}: {note}"


def new_operation(
    plan: Plan,
    request: Request,
    *,
    created_by: str,
    reason: str,
    home_group: str,
    parallelism: int,
    incident: str | None = None,
) -> NewOperation:
    """``plan`` as it is stored: a PENDING failover operation, with its audit entry's detail."""
    force = request.force.to_json() if request.force is not None else None
    return NewOperation(
        kind=OperationKind.FAILOVER,
        home_group=home_group,
        source_cluster=plan.source,
        target_cluster=plan.target,
        selector=request.selector.to_json(),
        options={
            "parallelism": parallelism,
            "force": force,
            "source_reachable": plan.source_reachable,
        },
        reason=reason,
        created_by=created_by,
        plan_digest=plan.digest,
        incident=incident,
        items=tuple(
            NewItem(
                job_id=i.job_id,
                job_name=i.job_name,
                action=i.action.value,
                why=i.why,
                step=Step.PENDING.value,
                source_cluster=i.source,
                target_cluster=i.target,
                source_run_id=i.source_run_id,
                detail={"forced": i.forced, "priority": i.priority.value, "group": i.group},
            )
            for i in plan.items
        ),
        audit={
            "source": plan.source,
            "target": plan.target,
            "selector": request.selector.to_json(),
            "reason": reason,
            "plan_digest": plan.digest,
            "items": len(plan.items),
            "incident": incident,
            "force": force,
        },
    )
