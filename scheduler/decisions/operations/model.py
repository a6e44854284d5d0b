"""Operations: persisted plans over many jobs, executed item by item, resumably. Pure.

An *operation* (kind ``failover``, or a bulk ``start``/``stop``/``restart`` by selector:
``scheduler.decisions.operations.bulk``) is created from a plan: an ordered list of *items*, one per
job, each with its planned action and why. One node at a time executes it -- its *executor*, chosen
like a job's owner (crc32 of the operation's id over the pool of its ``home_group``) and holding
a fenced claim (``executor``, ``executor_epoch``) that every write of the execution checks. Every
step of an item is idempotent and persisted, so another node resumes an operation where it
stopped.

Operation states and every legal transition (``OPERATION_TRANSITIONS``)::

    PENDING   → RUNNING      an executor claimed it and started its items
              → SUCCEEDED    nothing to do (an empty plan)
              → CANCELLED    cancelled before any executor started it
    RUNNING   → SUCCEEDED    every item ended, none FAILED or REFUSED
              → FAILED       every item ended, at least one FAILED or REFUSED
              → CANCELLED    cancel requested: no new item started, the items under way ended

Each kind has its own item step machine (``scheduler.decisions.operations.failover.Step`` for
failovers): an enum, its transition table and one function applying a transition, as every state
here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from scheduler.core.errors import IllegalTransition

#: a kind's item step enum
StepT = TypeVar("StepT", bound=enum.Enum)


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

    def entered(self, step: str) -> datetime | None:
        """When the item last entered ``step``."""
        for entry in reversed(self.history):
            if entry.step == step:
                return entry.at
        return None


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


#: the final item steps every kind shares (each kind's step enum names them alike)
FINAL_STEP_NAMES = frozenset({"DONE", "SKIPPED", "REFUSED", "FAILED", "CANCELLED"})
#: the final item steps that make an operation FAILED (every kind)
FAILED_STEP_NAMES = frozenset({"FAILED", "REFUSED"})


def step_transition(
    table: Mapping[StepT, frozenset[StepT]], current: StepT, new: StepT, *, item: str
) -> StepT:
    """``new`` if a kind's step ``table`` allows ``current → new``; IllegalTransition otherwise
    (``item`` names the kind's item in the message: "a failover item")."""
    if new not in table[current]:
        raise IllegalTransition(f"{item} cannot go from {current} to {new}")
    return new


def executor_index(operation_id: int, pool_size: int) -> int:
    """The pool slot that executes an operation: crc32 of its id (decimal, UTF-8) over the pool,
    the rule a job's owner follows with its name (``scheduler.core.ownership``)."""
    from scheduler.core.ownership import owner_index

    return owner_index(str(operation_id), pool_size)


def final_state(item_steps: list[str], *, failed_steps: frozenset[str], cancelled: bool) -> str:
    """The state of an operation whose items all ended."""
    if cancelled:
        return OperationState.CANCELLED.value
    if any(step in failed_steps for step in item_steps):
        return OperationState.FAILED.value
    return OperationState.SUCCEEDED.value
