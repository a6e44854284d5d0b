"""Pydantic models of ``/v1/failovers`` and ``/v1/groups/{name}/auto-failover``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictBool, StrictInt

from api.paging import Page
from api.schemas import attributes
from api.schemas.resources import TEXT_SCHEMA, CleanText, Label, Name, _Strict
from scheduler.core.states import Priority
from scheduler.decisions.operations import bulk
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.operations.model import (
    FINAL_STEP_NAMES,
    ItemRecord,
    OperationRecord,
    OperationState,
)
from scheduler.store.auto_failover import AutoEvent
from scheduler.store.operations import PolicyRecord

Reason = Annotated[str, Field(max_length=2000, json_schema_extra=TEXT_SCHEMA), CleanText]
PlanDigest = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$")]
#: a job name, or ``*`` for every job (force)
JobOrAll = Annotated[
    str, Field(min_length=1, max_length=128, json_schema_extra=TEXT_SCHEMA), CleanText
]


class SelectorIn(_Strict):
    """Which jobs on the source fail over: every non-empty list must match; ``all`` selects every
    job (a selector must name something: an empty one is refused)."""

    priorities: Annotated[list[Priority], Field(max_length=3)] = Field(default_factory=list)
    teams: Annotated[list[Label], Field(max_length=1000)] = Field(default_factory=list)
    businesses: Annotated[list[Label], Field(max_length=1000)] = Field(default_factory=list)
    groups: Annotated[list[Name], Field(max_length=1000)] = Field(default_factory=list)
    jobs: Annotated[list[Name], Field(max_length=10000)] = Field(default_factory=list)
    all: StrictBool = False

    def selector(self) -> fo.Selector:
        return fo.Selector(
            frozenset(self.priorities),
            frozenset(self.teams),
            frozenset(self.businesses),
            frozenset(self.groups),
            frozenset(self.jobs),
            self.all,
        )


class ForceIn(_Strict):
    """Fence runs that are not self-fencing although the source cannot be reached: their
    drivers may go on running there. Needs the operator's acknowledgement (audited)."""

    jobs: Annotated[list[JobOrAll], Field(min_length=1, max_length=10000)] = Field(
        description="job names, or `*` for every job of the plan"
    )
    acknowledgement: Annotated[
        str, Field(min_length=1, max_length=2000, json_schema_extra=TEXT_SCHEMA), CleanText
    ] = Field(
        description="what the operator knows that makes it safe (e.g. 'AZ a1 is powered off')"
    )


class FailoverCreate(_Strict):
    source: Name = Field(description="the cluster the jobs leave")
    target: Name | None = Field(
        default=None,
        description="the cluster they go to; default: each job's group's other cluster (its "
        "failover cluster, or its primary for a job on the failover cluster: a fail-back)",
    )
    selector: SelectorIn
    dry_run: StrictBool = Field(
        default=False,
        description="only plan: answer the items an execution would run, in that order, and "
        "store nothing",
    )
    reason: Reason = ""
    parallelism: Annotated[StrictInt, Field(ge=1, le=1000)] | None = Field(
        default=None, description="items under way at once (default: the node's setting)"
    )
    force: ForceIn | None = None
    expected_plan: PlanDigest | None = Field(
        default=None,
        description="the `plan_digest` of the dry run reviewed: the execution is refused (409) "
        "when the plan differs now",
    )

    def request(self, by: str) -> fo.Request:
        force = None
        if self.force is not None:
            force = fo.Force(frozenset(self.force.jobs), self.force.acknowledgement, by)
        return fo.Request(self.source, self.target, self.selector.selector(), force)


class StepPublic(BaseModel):
    step: str
    at: datetime
    note: str


def item_fields(item: ItemRecord) -> dict[str, Any]:
    """What a stored item of any operation (failover or bulk) says of its job and its progress,
    by the names of the public item's fields."""
    d = item.detail
    priority = d.get("priority")
    return {
        "position": item.position,
        "job": item.job_name,
        "group": str(d.get("group", "")),
        "priority": Priority(priority) if priority else None,
        "why": item.why,
        "step": item.step,
        "waiting": str(d.get("waiting") or ""),
        "attempts": item.attempts,
        "last_error": item.last_error,
        "history": [StepPublic(step=h.step, at=h.at, note=h.note) for h in item.history],
        "started_at": item.started_at,
        "finished_at": item.finished_at,
        "updated_at": item.updated_at,
    }


def planned_fields(
    position: int, item: fo.PlannedItem | bulk.PlannedItem, pending: str
) -> dict[str, Any]:
    """What a planned item of any operation (a dry run's) says of its job, by the names of the
    public item's fields: it is at its operation's first step, ``pending``, waiting for nothing."""
    return {
        "position": position,
        "job": item.job_name,
        "group": item.group,
        "priority": item.priority,
        "why": item.why,
        "step": pending,
        "waiting": "",
    }


def operation_fields(op: OperationRecord, counts: dict[str, int] | None) -> dict[str, Any]:
    """What a stored operation of any kind says of its plan and its progress (``counts``: its
    items per step, read already; None: count its items), by the public fields' names."""
    counted = counts if counts is not None else op.counts()
    return {
        "id": op.id,
        "dry_run": False,
        "state": op.state,
        "source": op.source_cluster,
        "target": op.target_cluster,
        "selector": dict(op.selector),
        "reason": op.reason,
        "created_by": op.created_by,
        "plan_digest": op.plan_digest,
        "parallelism": op.options.get("parallelism"),
        "executor": op.executor,
        "executor_epoch": op.executor_epoch if op.executor else None,
        "cancel_requested": op.cancel_requested_at is not None,
        "cancel_requested_at": op.cancel_requested_at,
        "cancel_requested_by": op.cancel_requested_by,
        "created_at": op.created_at,
        "started_at": op.started_at,
        "finished_at": op.finished_at,
        "updated_at": op.updated_at,
        "counts": counted,
        "total": sum(counted.values()),
        "finished": sum(n for step, n in counted.items() if step in FINAL_STEP_NAMES),
    }


def dry_fields(
    digest: str, items: int, *, reason: str, by: str, parallelism: int
) -> dict[str, Any]:
    """What the dry run of any operation says: its plan (``digest``, ``items`` of it), nothing
    stored, by the public fields' names."""
    return {
        "id": None,
        "dry_run": True,
        "state": None,
        "reason": reason,
        "created_by": by,
        "plan_digest": digest,
        "parallelism": parallelism,
        "total": items,
        "finished": 0,
    }


class ItemPublic(BaseModel):
    position: int
    job: str
    group: str
    priority: Priority | None
    action: fo.Action = Field(description="what the plan does: kill, fence, move, skip, refuse")
    why: str
    step: str = Field(
        description="PENDING, DRAINING, FENCING, CHECKPOINT, SWITCHING, STARTING; then DONE, "
        "SKIPPED, REFUSED, FAILED or CANCELLED"
    )
    waiting: str = Field(description="what the item waits for now ('' when it does not)")
    source_cluster: str | None
    target_cluster: str | None
    source_run_id: int | None
    target_run_id: int | None
    forced: bool
    checkpoint_from: str | None = None
    checkpoint_to: str | None = None
    resume_batch: int | None = Field(
        default=None, description="the batch the job resumes from on the target (null: afresh)"
    )
    attempts: int = 0
    last_error: str = ""
    history: list[StepPublic] = Field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None

    @classmethod
    def of(cls, item: ItemRecord) -> ItemPublic:
        return cls(
            **item_fields(item),
            action=fo.Action(item.action),
            source_cluster=item.source_cluster,
            target_cluster=item.target_cluster,
            source_run_id=item.source_run_id,
            target_run_id=item.target_run_id,
            forced=bool(item.detail.get("forced")),
            checkpoint_from=item.detail.get("checkpoint_from") or None,
            checkpoint_to=item.detail.get("checkpoint_to") or None,
            resume_batch=item.detail.get("resume_batch"),
        )

    @classmethod
    def planned(cls, position: int, item: fo.PlannedItem) -> ItemPublic:
        return cls(
            **planned_fields(position, item, fo.Step.PENDING.value),
            action=item.action,
            source_cluster=item.source,
            target_cluster=item.target,
            source_run_id=item.source_run_id,
            target_run_id=None,
            forced=item.forced,
        )


class FailoverPublic(BaseModel):
    """A failover: its plan and, once executed, each item's progress."""

    id: int | None = Field(description="null for a dry run (nothing is stored)")
    dry_run: bool
    state: OperationState | None = Field(
        description="PENDING, RUNNING, SUCCEEDED, FAILED (an item failed or was refused), "
        "CANCELLED; null for a dry run"
    )
    source: str | None
    target: str | None
    selector: dict[str, Any]
    reason: str
    created_by: str
    incident: str | None = Field(
        default=None, description="an automatic failover's incident (one per abnormal period)"
    )
    plan_digest: str = Field(description="identifies the plan: the same items in the same order")
    source_reachable: bool | None
    parallelism: int | None
    executor: str | None = None
    executor_epoch: int | None = None
    cancel_requested: bool = False
    cancel_requested_at: datetime | None = None
    cancel_requested_by: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None
    counts: dict[str, int] = Field(description="items per step")
    total: int = Field(description="items in the plan")
    finished: int = Field(
        description="items that ended (DONE, SKIPPED, REFUSED, FAILED, CANCELLED)"
    )
    items: list[ItemPublic] = Field(default_factory=list)

    @classmethod
    def of(
        cls, op: OperationRecord, *, counts: dict[str, int] | None = None, items: bool = True
    ) -> FailoverPublic:
        return cls(
            **operation_fields(op, counts),
            incident=op.incident,
            source_reachable=op.options.get("source_reachable"),
            items=[ItemPublic.of(i) for i in op.items] if items else [],
        )

    @classmethod
    def dry(
        cls, plan: fo.Plan, request: fo.Request, *, reason: str, by: str, parallelism: int
    ) -> FailoverPublic:
        counts: dict[str, int] = {}
        for item in plan.items:
            counts[item.action.value] = counts.get(item.action.value, 0) + 1
        fields = dry_fields(
            plan.digest, len(plan.items), reason=reason, by=by, parallelism=parallelism
        )
        return cls(
            **fields,
            source=plan.source,
            target=plan.target,
            selector=request.selector.to_json(),
            source_reachable=plan.source_reachable,
            counts=counts,
            items=[ItemPublic.planned(n, i) for n, i in enumerate(plan.items)],
        )


class FailoverPage(Page[FailoverPublic]):
    """A page of failovers, newest first (their items: ``GET /v1/failovers/{id}``)."""


class AutoFailoverPolicy(_Strict):
    """A group's automatic failover (off by default)."""

    enabled: StrictBool
    after_seconds: Annotated[float, Field(strict=True, ge=0, le=86400, allow_inf_nan=False)] = (
        Field(
            default=120.0,
            description="how long a cluster of the group stays VOTE_ABNORMAL or THRESHOLD_ABNORMAL "
            "before its jobs fail over",
        )
    )
    min_priority: Priority = Field(
        default=Priority.HIGH, description="the jobs at or above this priority fail over"
    )


class AutoFailoverPublic(AutoFailoverPolicy):
    group: str
    version: int = Field(description="0 until the policy is first written; `If-Match` checks it")
    updated_by: str
    updated_at: datetime | None

    @classmethod
    def of(cls, p: PolicyRecord) -> AutoFailoverPublic:
        return cls(**attributes(cls, p))


# -- automatic failover's switch, cool-downs and decisions ----------------------------------------


class AutoSwitchIn(_Strict):
    """Why automatic failover is paused, resumed, or a cluster's cool-down cleared (audited)."""

    reason: Annotated[
        str,
        Field(
            min_length=1,
            max_length=2000,
            json_schema_extra=TEXT_SCHEMA,
            description="why (audited, shown in the status)",
            examples=["INC-4711: failing back by hand"],
        ),
        CleanText,
    ]


class AutoEventPublic(BaseModel):
    """One thing automatic failover decided, or an operator did to it."""

    id: int = Field(description="the event's id", examples=[12])
    at: datetime = Field(description="when (UTC)", examples=["2026-11-25T03:12:45Z"])
    kind: str = Field(
        description="`created` or `held` (a decision about a group's abnormal cluster), "
        "`paused`, `resumed` (the switch), `cleared` (a cluster's cool-down)",
        examples=["held"],
    )
    code: str = Field(
        description="why a failover was held: `paused`, `no-target`, `target-abnormal`, "
        "`target-cooling-down` ('' otherwise)",
        examples=["target-cooling-down"],
    )
    group: str | None = Field(description="the group decided about", examples=["ads"])
    cluster: str | None = Field(
        description="the abnormal cluster (a decision), or the cluster cleared",
        examples=["spark-a"],
    )
    target: str | None = Field(description="where its jobs would go", examples=["spark-b"])
    incident: str | None = Field(
        description="the incident (one automatic failover at most per incident)",
        examples=["auto:ads:spark-a:41"],
    )
    operation_id: int | None = Field(description="the failover created", examples=[17])
    message: str = Field(
        description="the decision and why, or the operator's reason",
        examples=["automatic failover of group ads held: ...; its target spark-b was abnormal"],
    )
    actor: str = Field(
        description="`drover:auto-failover` or the operator", examples=["drover:auto-failover"]
    )

    @classmethod
    def of(cls, e: AutoEvent) -> AutoEventPublic:
        return cls(**attributes(cls, e))


class CoolingDownPublic(BaseModel):
    """A cluster automatic failover does not move jobs onto for now."""

    cluster: str = Field(description="the cluster", examples=["spark-b"])
    abnormal_until: datetime = Field(
        description="when its last abnormal period ended", examples=["2026-11-25T03:12:45Z"]
    )
    until: datetime = Field(
        description="when its cool-down ends (unless an operator clears it sooner)",
        examples=["2026-11-25T04:12:45Z"],
    )


class AutoFailoverStatus(BaseModel):
    """Automatic failover platform-wide: its switch, the clusters cooling down, the groups that
    use it, and its latest decisions."""

    paused: bool = Field(description="automatic failover is paused platform-wide", examples=[False])
    paused_by: str | None = Field(description="who paused it (null: running)", examples=[None])
    paused_at: datetime | None = Field(description="since when (null: running)", examples=[None])
    reason: str | None = Field(description="why it was paused (null: running)", examples=[None])
    cooldown_seconds: float = Field(
        description="how long after its last abnormal period a cluster is not failed over onto "
        "automatically (`DROVER_FAILOVER_AUTO_COOLDOWN`)",
        examples=[3600.0],
    )
    cooling_down: list[CoolingDownPublic] = Field(
        description="the clusters in their cool-down now", examples=[[]]
    )
    groups: list[str] = Field(
        description="the groups whose automatic failover is enabled", examples=[["ads"]]
    )
    events: list[AutoEventPublic] = Field(
        description="the latest decisions and operator actions, newest first", examples=[[]]
    )
