"""A job's directive: what an operation (a failover) asks of the job's owner. Pure.

An operation's executor never submits or kills anything itself. It writes a *directive* on the job
(``jobs.directive``, a versioned write fenced by the executor's claim on the operation) and the
job's owner -- its reconciler, the only actor that acts on the job's applications -- turns it
into actions (:mod:`scheduler.decisions.steering`, called by ``planning.plan``). The executor then
advances by observing what the owner recorded.

Phases::

    DRAIN   take the job off ``source``: kill its live run there until the cluster confirms the
            application is gone; or, when ``source`` cannot be reached and is abnormal, fence the
            run (close it in the store: its fencing token is superseded, and a self-fencing
            driver stops at its next check). Nothing is submitted while it holds.
    RUN     the job's cluster has been switched to ``target``: plan as usual (submit there from
            the checkpoint made available under ``target``'s storage root).

A directive names the operation and item that wrote it: a directive of an operation that is over
is cleared by that operation's executor, never by anyone else.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from scheduler.core.errors import InvalidInput


class Phase(enum.StrEnum):
    DRAIN = "drain"
    RUN = "run"


@dataclass(frozen=True)
class Directive:
    operation_id: int
    item_id: int
    phase: Phase
    #: the cluster the job leaves, and the one it goes to
    source: str
    target: str
    #: the operator acknowledged that this job's run may be fenced although it is not
    #: self-fencing (its driver on ``source`` may go on running)
    force_unfenced: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation_id,
            "item": self.item_id,
            "phase": self.phase.value,
            "source": self.source,
            "target": self.target,
            "force_unfenced": self.force_unfenced,
        }

    @classmethod
    def from_json(cls, data: Any) -> Directive | None:
        """The directive stored as ``data`` (None: no directive). A malformed one raises
        InvalidInput: it is never guessed at."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise InvalidInput(f"malformed job directive {data!r:.200}")
        try:
            return cls(
                operation_id=int(data["operation"]),
                item_id=int(data["item"]),
                phase=Phase(data["phase"]),
                source=str(data["source"]),
                target=str(data["target"]),
                force_unfenced=bool(data.get("force_unfenced", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(f"malformed job directive {data!r:.200}: {exc}") from exc

    def describe(self) -> str:
        if self.phase == Phase.DRAIN:
            return f"failover {self.operation_id}: leaving cluster {self.source} for {self.target}"
        return f"failover {self.operation_id}: moved from cluster {self.source} to {self.target}"
