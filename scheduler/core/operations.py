"""Operations and their items, as every layer speaks of them: kinds, states, records, changes.

An *operation* (kind ``failover``, or a bulk ``start``/``stop``/``restart`` by selector) is
created from a plan: an ordered list of *items*, one per job, each with its planned action and
why (:class:`NewOperation`). One node at a time executes it -- its *executor*, holding a fenced
claim (``executor``, ``executor_epoch``) that every write of the execution checks -- and moves
each item through its kind's steps (``scheduler.decisions.operations``); every step is
persisted, so another node resumes an operation where it stopped.

Operation states and every legal transition (``OPERATION_TRANSITIONS``)::

    PENDING   → RUNNING      an executor claimed it and started its items
              → SUCCEEDED    nothing to do (an empty plan)
              → CANCELLED    cancelled before any executor started it
    RUNNING   → SUCCEEDED    every item ended, none FAILED or REFUSED
              → FAILED       every item ended, at least one FAILED or REFUSED
              → CANCELLED    cancel requested: no new item started, the items under way ended

An item changes only through :meth:`ItemRecord.after` (what its next version is, given an
:class:`ItemChange`): the store writes exactly that, and the executor decides its next step on
it without reading it back.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from scheduler.core.errors import IllegalTransition


class OperationKind(enum.StrEnum):
    FAILOVER = "failover"
    #: bulk operations (scheduler.decisions.operations.bulk): a job command over a selector
    START = "start"
    STOP = "stop"
    RESTART = "restart"


class OperationState(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def is_final(self) -> bool:
        return self in (
            OperationState.SUCCEEDED,
            OperationState.FAILED,
            OperationState.CANCELLED,
        )


Op = OperationState
OPERATION_TRANSITIONS: Mapping[OperationState, frozenset[OperationState]] = {
    Op.PENDING: frozenset({Op.RUNNING, Op.SUCCEEDED, Op.CANCELLED}),
    Op.RUNNING: frozenset({Op.SUCCEEDED, Op.FAILED, Op.CANCELLED}),
    Op.SUCCEEDED: frozenset(),
    Op.FAILED: frozenset(),
    Op.CANCELLED: frozenset(),
}
del Op

#: operation states an executor works on
ACTIVE_STATES = (OperationState.PENDING, OperationState.RUNNING)


def transition_operation(current: OperationState, new: OperationState) -> OperationState:
    """``new`` if the table allows ``current → new`` (staying put is always allowed)."""
    if new != current and new not in OPERATION_TRANSITIONS[current]:
        raise IllegalTransition(f"an operation cannot go from {current} to {new}")
    return new


#: the final item steps every kind shares (each kind's step enum names them alike)
FINAL_STEP_NAMES = frozenset({"DONE", "SKIPPED", "REFUSED", "FAILED", "CANCELLED"})
#: the longest note kept in an item's history, and the most entries kept
MAX_NOTE = 2000
MAX_HISTORY = 100
#: the item columns an :class:`ItemChange` may set besides its detail
ITEM_FIELDS = frozenset({"source_run_id", "target_run_id"})


@dataclass(frozen=True)
class StepEntry:
    """One step an item entered: when, and what the executor saw."""

    step: str
    at: datetime
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "at": self.at.isoformat(), "note": self.note}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepEntry:
        return cls(str(data["step"]), datetime.fromisoformat(str(data["at"])), str(data["note"]))


@dataclass(frozen=True)
class ItemChange:
    """One change of an item: its next step (None: the same step, a note or fields only), a note
    for its history, and what else it records."""

    step: str | None
    note: str = ""
    #: item columns (``source_run_id``, ``target_run_id``: :data:`ITEM_FIELDS`)
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: entries merged into the item's detail
    detail: Mapping[str, Any] = field(default_factory=dict)
    #: the item's last error (None: unchanged)
    error: str | None = None
    #: not to be decided on again before then (None: clears it)
    not_before: datetime | None = None
    #: one more attempt of the step (a retry)
    attempt: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.fields) - ITEM_FIELDS
        if unknown:
            raise ValueError(f"not item fields: {sorted(unknown)}")


@dataclass(frozen=True)
class ItemRecord:
    """One job of an operation, as stored."""

    id: int
    operation_id: int
    position: int
    job_id: int | None
    job_name: str
    #: the planned action (kind-specific: ``scheduler.decisions.operations.failover.Action``) and
    #: why
    action: str
    why: str
    step: str
    history: tuple[StepEntry, ...]
    attempts: int
    last_error: str
    source_cluster: str | None
    target_cluster: str | None
    source_run_id: int | None
    target_run_id: int | None
    #: kind-specific facts (checkpoint from/to, the batch it resumes from, what it waits for)
    detail: Mapping[str, Any]
    not_before: datetime | None
    version: int
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def is_final(self) -> bool:
        return self.step in FINAL_STEP_NAMES

    def entered(self, step: str) -> datetime | None:
        """When the item last entered ``step``: the first entry of the latest run of entries in
        that step (the entries after it are notes written while in the step -- a new run
        recorded, a new reason to wait -- and restart no step's timeout)."""
        at = None
        for entry in reversed(self.history):
            if entry.step == step:
                at = entry.at
            elif at is not None:
                break
        return at

    def after(self, change: ItemChange, now: datetime) -> ItemRecord:
        """The item's next version once ``change`` is written at ``now``: a history entry for a
        new step (or a new note), the version moved, start and end times set on the way."""
        history = list(self.history)
        note = change.note[:MAX_NOTE]
        if note and (change.step is not None or not history or history[-1].note != note):
            history.append(StepEntry(change.step or self.step, now, note))
        if len(history) > MAX_HISTORY:
            history = history[:1] + history[-(MAX_HISTORY - 1) :]
        step = change.step or self.step
        new = replace(
            self,
            step=step,
            history=tuple(history),
            version=self.version + 1,
            updated_at=now,
            not_before=change.not_before,
            detail={**self.detail, **change.detail} if change.detail else self.detail,
            last_error=change.error[:MAX_NOTE] if change.error is not None else self.last_error,
            attempts=self.attempts + 1 if change.attempt else self.attempts,
            **dict(change.fields),
        )
        if change.step is not None:
            if self.started_at is None:
                new = replace(new, started_at=now)
            if step in FINAL_STEP_NAMES:
                new = replace(new, finished_at=now)
        return new


@dataclass(frozen=True)
class OperationRecord:
    id: int
    kind: OperationKind
    state: OperationState
    home_group: str
    source_cluster: str | None
    target_cluster: str | None
    selector: Mapping[str, Any]
    options: Mapping[str, Any]
    reason: str
    created_by: str
    incident: str | None
    plan_digest: str
    executor: str | None
    executor_epoch: int
    executor_since: datetime | None
    cancel_requested_at: datetime | None
    cancel_requested_by: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    items: tuple[ItemRecord, ...] = field(default=())
    #: the one team whose jobs it acts on (None: several teams, or the platform's)
    team: str | None = None

    @property
    def cancelling(self) -> bool:
        return self.cancel_requested_at is not None and not self.state.is_final

    def counts(self) -> dict[str, int]:
        """Items per step."""
        out: dict[str, int] = {}
        for item in self.items:
            out[item.step] = out.get(item.step, 0) + 1
        return out


@dataclass(frozen=True)
class NewItem:
    """An item of a plan, as it is stored."""

    job_id: int | None
    job_name: str
    action: str
    why: str
    step: str
    source_cluster: str | None = None
    target_cluster: str | None = None
    source_run_id: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewOperation:
    """A plan, as it is stored (PENDING; SUCCEEDED at once when no item is left to run), with
    what the audit entry of its creation says."""

    kind: OperationKind
    home_group: str
    selector: Mapping[str, Any]
    options: Mapping[str, Any]
    reason: str
    created_by: str
    plan_digest: str
    items: tuple[NewItem, ...]
    source_cluster: str | None = None
    target_cluster: str | None = None
    #: what it answers (automatic failovers: one operation per incident)
    incident: str | None = None
    #: the one team whose jobs it acts on (None: several teams, or the platform's)
    team: str | None = None
    #: the audit entry's detail
    audit: Mapping[str, Any] = field(default_factory=dict)


def audit_prefix(kind: OperationKind) -> str:
    """Audit actions: ``failover.*`` for failovers, ``operation.*`` for bulk operations (their
    kind is in the entry's detail)."""
    return "failover" if kind == OperationKind.FAILOVER else "operation"
