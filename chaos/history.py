"""What a chaos run saw, as plain records (pure data, JSON lines on disk).

A run's history is everything the checker needs to decide whether Drover kept its promises,
recorded from outside Drover (the clusters' own listings, the API's answers, the store's rows):

``AppSeen``     one observation of one application on one cluster: alive or not, at ``t``. The
                recorder polls every cluster's master and writes one record per listed Drover
                application per poll (``source`` ``master``); on real clusters it also lists the
                driver processes on the machine (``source`` ``process``, ``app_id``
                ``pid:<pid>``, only live ones).
``JobSeen``     one observation of one job through the API: its desired and observed state.
``WriteAcked``  an API write that was answered 2xx: what the job's desired state must be after
                it (``None`` for a delete: the job must be gone) and, when the answer showed it,
                the fingerprint of its spec (``spec``), unless a later acknowledged write to the
                same job says otherwise.
``FinalJob``    the store's final word on a job, read after the run (``exists`` false when gone).
``OperationAcked``  an operation (a failover) the API acknowledged with its id (0 and kind
                ``failover_in_doubt``: sent, never answered).
``FinalOperation``  whether the store holds that operation at the end, its state, when it was
                created and when it ended (``None``: not ended), and why it failed; one for every
                acknowledged operation and every failover the store holds (automatic ones too).
``BatchCommit`` run ``run`` of ``job`` wrote micro-batch ``batch`` (``committed`` false) or
                Spark committed it (``committed`` true): the sample pipeline's commit log, read
                at the end.
``PollMissed``  one poll of the recorder that failed (``source``: ``store``, ``cluster:<name>``,
                ``processes``), and why.
``Claim``       a claim recorded in the store: ``node`` took ``job`` under ``epoch`` at ``t``.
``Action``      a side effect a node took on a job under ``epoch``: a submission (its run row
                names node and epoch) or a kill (its fenced intent's event names both; an
                epoch of ``None``, from a store that did not record it, is taken from the
                sampled claims by the checker).
``Fault``       a fault injected (``kind``, ``target``) from ``t`` until ``until``.
``Quiet``       the moment every fault had cleared: the convergence clock starts here.

Times are seconds on one clock (the recorder's wall clock; the store's times are converted by
the recorder). One record per line, ``{"type": "<class name>", ...fields}``, so a history can be
written while the run goes on and replayed into the checker afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AppSeen:
    t: float
    cluster: str
    app_id: str
    job: str
    alive: bool
    #: master (the cluster's own listing) | process (a driver process on the machine)
    source: str = "master"


@dataclass(frozen=True)
class JobSeen:
    t: float
    job: str
    desired: str
    observed: str


@dataclass(frozen=True)
class WriteAcked:
    t: float
    job: str
    op: str  # create | start | stop | restart | delete | upgrade | in_doubt
    desired: str | None  # the desired state the write leaves; None: the job is deleted
    spec: str | None = None  # the spec's fingerprint the write leaves (None: not known)


@dataclass(frozen=True)
class FinalJob:
    job: str
    exists: bool
    desired: str | None = None
    spec: str | None = None


@dataclass(frozen=True)
class OperationAcked:
    t: float
    operation: int
    kind: str  # failover | failover_in_doubt
    detail: str = ""


@dataclass(frozen=True)
class FinalOperation:
    operation: int
    exists: bool
    state: str | None = None
    detail: str = ""  # each item: job, planned action, final step and why
    created: float | None = None
    finished: float | None = None  # None: not ended
    reason: str = ""  # why it ended as it did (a FAILED operation names one)
    kind: str = "failover"
    created_by: str = ""


@dataclass(frozen=True)
class BatchCommit:
    t: float
    job: str
    batch: int
    run: str
    committed: bool  # False: written (Spark may not have committed it: a replay may follow)


@dataclass(frozen=True)
class PollMissed:
    t: float
    source: str  # store | cluster:<name> | processes
    detail: str = ""


@dataclass(frozen=True)
class Claim:
    t: float
    job: str
    node: str
    epoch: int


@dataclass(frozen=True)
class Action:
    t: float
    job: str
    node: str
    epoch: int | None  # None: not recorded with the action (a kill)
    kind: str  # submit | kill


@dataclass(frozen=True)
class Fault:
    t: float
    kind: str
    target: str
    until: float | None = None


@dataclass(frozen=True)
class Quiet:
    t: float


Record = (
    AppSeen
    | JobSeen
    | WriteAcked
    | FinalJob
    | OperationAcked
    | FinalOperation
    | Claim
    | Action
    | Fault
    | Quiet
    | BatchCommit
    | PollMissed
)

_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        AppSeen,
        JobSeen,
        WriteAcked,
        FinalJob,
        OperationAcked,
        FinalOperation,
        Claim,
        Action,
        Fault,
        Quiet,
        BatchCommit,
        PollMissed,
    )
}


@dataclass
class History:
    """Every record of one run, by kind."""

    apps: list[AppSeen] = field(default_factory=list)
    jobs: list[JobSeen] = field(default_factory=list)
    writes: list[WriteAcked] = field(default_factory=list)
    final: list[FinalJob] = field(default_factory=list)
    operations: list[OperationAcked] = field(default_factory=list)
    final_operations: list[FinalOperation] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    quiet: list[Quiet] = field(default_factory=list)
    batches: list[BatchCommit] = field(default_factory=list)
    misses: list[PollMissed] = field(default_factory=list)

    def add(self, record: Record) -> None:
        buckets: dict[type[Any], list[Any]] = {
            AppSeen: self.apps,
            JobSeen: self.jobs,
            WriteAcked: self.writes,
            FinalJob: self.final,
            OperationAcked: self.operations,
            FinalOperation: self.final_operations,
            Claim: self.claims,
            Action: self.actions,
            Fault: self.faults,
            Quiet: self.quiet,
            BatchCommit: self.batches,
            PollMissed: self.misses,
        }
        buckets[type(record)].append(record)

    def records(self) -> Iterator[Record]:
        yield from self.faults
        yield from self.quiet
        yield from self.apps
        yield from self.jobs
        yield from self.writes
        yield from self.operations
        yield from self.claims
        yield from self.actions
        yield from self.final
        yield from self.final_operations
        yield from self.batches
        yield from self.misses

    @classmethod
    def of(cls, records: Iterable[Record]) -> History:
        history = cls()
        for record in records:
            history.add(record)
        return history


def encode(record: Record) -> str:
    return json.dumps({"type": type(record).__name__, **asdict(record)}, sort_keys=True)


def decode(line: str) -> Record:
    """One record from its JSON line; ``ValueError`` naming what is wrong otherwise."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("a record is a JSON object")
    kind = data.pop("type", None)
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown record type {kind!r}")
    try:
        record: Record = cls(**data)
    except TypeError as exc:
        raise ValueError(f"{kind}: {exc}") from None
    return record


def write(path: Path, records: Iterable[Record]) -> None:
    with path.open("a", encoding="utf-8") as out:
        for record in records:
            out.write(encode(record) + "\n")


def read(path: Path) -> History:
    history = History()
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    history.add(decode(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{number}: {exc}") from None
    return history
