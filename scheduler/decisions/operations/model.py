"""The item machine every kind of operation shares. Pure.

Operations, their items and their states are words of ``scheduler.core.operations`` (imported
here too). What a failover (``scheduler.decisions.operations.failover``) and a bulk operation
(``scheduler.decisions.operations.bulk``) have in common is here, each kind keeping only its own
steps:

- every item starts PENDING and ends in one of the same final steps (:data:`FINAL_STEP_NAMES`);
  from PENDING it may always be SKIPPED, REFUSED, CANCELLED or FAILED
  (:func:`item_transitions` builds a kind's table from its own moves and these);
- what selects jobs by their fields (:class:`JobSelector`; each kind adds its own);
- the decisions' results: :class:`Wait` (what the item waits for) and :class:`Advance` (its next
  step, with the job write that goes with it);
- which items a round advances (:func:`chosen`: those under way, then pending ones up to the
  operation's parallelism), who executes an operation (:func:`executor_index`) and its state once
  every item ended (:func:`final_state`).
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from scheduler.core.errors import IllegalTransition
from scheduler.core.operations import (
    ACTIVE_STATES,
    FINAL_STEP_NAMES,
    OPERATION_TRANSITIONS,
    ItemChange,
    ItemRecord,
    NewItem,
    NewOperation,
    OperationKind,
    OperationRecord,
    OperationState,
    StepEntry,
    audit_prefix,
    transition_operation,
)
from scheduler.core.operations_ledger import JobWrite
from scheduler.core.records import JobRecord
from scheduler.core.states import Priority

#: a kind's item step enum
StepT = TypeVar("StepT", bound=enum.Enum)

#: the final item steps that make an operation FAILED (every kind)
FAILED_STEP_NAMES = frozenset({"FAILED", "REFUSED"})
#: the steps every kind's item may leave PENDING for, besides its own first step
PENDING_EXITS = ("SKIPPED", "REFUSED", "CANCELLED", "FAILED")
#: planned actions (every kind) that leave their job alone
IDLE_ACTIONS = frozenset({"skip", "refuse"})


class ItemSteps:
    """What every kind's step enum says of its steps (mixed into each kind's ``Step``)."""

    value: str

    @property
    def is_final(self) -> bool:
        return self.value in FINAL_STEP_NAMES

    @property
    def started(self) -> bool:
        """The item is under way (not pending, not ended)."""
        return item_started(self.value)


def item_started(step: str) -> bool:
    """Whether an item at ``step`` is under way (not pending, not ended), whatever its kind."""
    return step != "PENDING" and step not in FINAL_STEP_NAMES


def item_transitions(
    steps: type[StepT], moves: Mapping[StepT, Iterable[StepT]]
) -> Mapping[StepT, frozenset[StepT]]:
    """A kind's step table from its own ``moves`` (PENDING to its first step, and between its
    steps under way): every item may also leave PENDING for :data:`PENDING_EXITS`, and never
    leaves a final step."""
    table: dict[StepT, frozenset[StepT]] = {}
    for step in steps:
        allowed = set(moves.get(step, ()))
        if step.value == "PENDING":
            allowed.update(steps[name] for name in PENDING_EXITS)
        if step.value in FINAL_STEP_NAMES and allowed:
            raise ValueError(f"final step {step.value} cannot have moves")
        table[step] = frozenset(allowed)
    return table


def step_transition(
    table: Mapping[StepT, frozenset[StepT]], current: StepT, new: StepT, *, item: str
) -> StepT:
    """``new`` if a kind's step ``table`` allows ``current → new``; IllegalTransition otherwise
    (``item`` names the kind's item in the message: "a failover item")."""
    if new not in table[current]:
        raise IllegalTransition(f"{item} cannot go from {current} to {new}")
    return new


# -- selectors ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSelector:
    """What every kind selects jobs by: every non-empty field must match (``all``: every job).
    A kind's selector adds its own fields (keyword-only), their parts and their matches."""

    priorities: frozenset[Priority] = frozenset()
    teams: frozenset[str] = frozenset()
    businesses: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    jobs: frozenset[str] = frozenset()
    all: bool = False

    def parts(self) -> list[tuple[str, list[str]]]:
        """(label, values) of each field that picks jobs, for :meth:`describe`."""
        return [
            ("priority", sorted(p.value for p in self.priorities)),
            ("team", sorted(self.teams)),
            ("business", sorted(self.businesses)),
            ("group", sorted(self.groups)),
            ("job", sorted(self.jobs)),
        ]

    @property
    def empty(self) -> bool:
        return not self.all and not any(values for _, values in self.parts())

    def matches_fields(self, job: JobRecord) -> bool:
        """Whether ``job``'s own fields match (a kind's ``matches`` adds its fields)."""
        return (
            (not self.priorities or job.priority in self.priorities)
            and (not self.teams or job.team in self.teams)
            and (not self.businesses or job.business in self.businesses)
            and (not self.groups or job.group in self.groups)
            and (not self.jobs or job.name in self.jobs)
        )

    def describe(self) -> str:
        picked = [f"{label} {'|'.join(values)}" for label, values in self.parts() if values]
        return ", ".join(picked) if picked else "every job"

    def to_json(self) -> dict[str, Any]:
        return {
            "priorities": sorted(p.value for p in self.priorities),
            "teams": sorted(self.teams),
            "businesses": sorted(self.businesses),
            "groups": sorted(self.groups),
            "jobs": sorted(self.jobs),
            "all": self.all,
        }

    @staticmethod
    def fields_from_json(data: Mapping[str, Any]) -> dict[str, Any]:
        """The shared fields of a selector's JSON, as keyword arguments."""
        return {
            "priorities": frozenset(Priority(p) for p in data.get("priorities", ())),
            "teams": frozenset(data.get("teams", ())),
            "businesses": frozenset(data.get("businesses", ())),
            "groups": frozenset(data.get("groups", ())),
            "jobs": frozenset(data.get("jobs", ())),
            "all": bool(data.get("all", False)),
        }


# -- decisions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Nothing to do yet: ``why`` is shown as what the item waits for."""

    why: str


@dataclass(frozen=True)
class Advance(Generic[StepT]):
    """The item's next step, with ``note`` for its history."""

    step: StepT
    note: str
    #: the job write that goes with the step, in the same transaction
    job_write: JobWrite | None = None
    #: item fields to record (source_run_id, target_run_id, detail entries)
    fields: Mapping[str, Any] = field(default_factory=dict)


# -- plans --------------------------------------------------------------------------------------


def plan_digest(head: Sequence[Any], keys: Iterable[list[Any]]) -> str:
    """What identifies a plan (its ``head``: what it is of; ``keys``: its items' keys in order):
    the same digest, the same items in the same order."""
    body = json.dumps([*head, list(keys)], separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def home_group(items: Sequence[Any], fallback: str) -> str:
    """The group whose pool executes a plan of ``items``: the first item's group whose action
    changes its job (``action.runs``), else the first item's, else ``fallback``."""
    for item in items:
        if item.action.runs:
            return str(item.group)
    return str(items[0].group) if items else fallback


# -- the executor's choices ---------------------------------------------------------------------


def executor_index(operation_id: int, pool_size: int) -> int:
    """The pool slot that executes an operation: crc32 of its id (decimal, UTF-8) over the pool,
    the rule a job's owner follows with its name (``scheduler.core.ownership``)."""
    from scheduler.core.ownership import owner_index

    return owner_index(str(operation_id), pool_size)


def chosen(op: OperationRecord, default_parallelism: int) -> list[ItemRecord]:
    """The items a round advances: those under way, then pending ones in plan order while fewer
    than the operation's parallelism are under way (a skip or a refusal costs no slot); every
    pending one when the operation is cancelled."""
    limit = int(op.options.get("parallelism") or default_parallelism)
    under_way = [i for i in op.items if item_started(i.step)]
    picked = list(under_way)
    slots = limit - len(under_way)
    for item in op.items:
        if item.step != "PENDING":
            continue
        if op.cancelling or item.action in IDLE_ACTIONS:
            picked.append(item)
        elif slots > 0:
            picked.append(item)
            slots -= 1
    return picked


def all_ended(items: Iterable[ItemRecord]) -> bool:
    return all(i.step in FINAL_STEP_NAMES for i in items)


def final_state(
    item_steps: Sequence[str],
    *,
    failed_steps: frozenset[str] = FAILED_STEP_NAMES,
    cancelled: bool,
) -> str:
    """The state of an operation whose items all ended."""
    if cancelled:
        return OperationState.CANCELLED.value
    if any(step in failed_steps for step in item_steps):
        return OperationState.FAILED.value
    return OperationState.SUCCEEDED.value


def ended_state(op: OperationRecord) -> OperationState | None:
    """The final state of ``op`` when every item ended and it is not final yet (None: not)."""
    if op.state.is_final or not all_ended(op.items):
        return None
    steps = [i.step for i in op.items]
    cancelled = op.cancel_requested_at is not None and "CANCELLED" in steps
    return OperationState(final_state(steps, cancelled=cancelled))


__all__ = [
    "ACTIVE_STATES",
    "FAILED_STEP_NAMES",
    "FINAL_STEP_NAMES",
    "OPERATION_TRANSITIONS",
    "Advance",
    "ItemChange",
    "ItemRecord",
    "ItemSteps",
    "JobSelector",
    "NewItem",
    "NewOperation",
    "OperationKind",
    "OperationRecord",
    "OperationState",
    "StepEntry",
    "Wait",
    "all_ended",
    "audit_prefix",
    "chosen",
    "ended_state",
    "executor_index",
    "final_state",
    "home_group",
    "item_started",
    "item_transitions",
    "plan_digest",
    "step_transition",
    "transition_operation",
]
