"""The operations ledger's contract (``scheduler.core.operations_ledger``), one function per
rule, for every implementation.

A test module parametrizes over :data:`CONTRACT` with a :class:`Harness` of its ledger: the
in-memory fake the executor's unit tests use and the SQL ledger on SQLite (unit), the SQL ledger
on SQLite and MariaDB (integration) -- so the fake cannot drift from the real thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

import pytest

from scheduler.core.directive import Directive, Phase
from scheduler.core.errors import AlreadyExists, NotFound, NotOwner, StaleWrite
from scheduler.core.operations import (
    ItemChange,
    ItemRecord,
    NewItem,
    NewOperation,
    OperationKind,
    OperationRecord,
    OperationState,
)
from scheduler.core.operations_ledger import (
    AutoDecision,
    FailoverPolicy,
    ItemWrite,
    OperationsLedger,
    SetDirective,
    SwitchCluster,
)
from scheduler.core.ownership import Fence
from scheduler.core.records import JobRecord
from scheduler.core.states import Command, DesiredState, JobState, Priority
from scheduler.store.db import Store

ME = Fence("node-a", 4)
OLDER = Fence("node-b", 3)
NEWER = Fence("node-b", 5)


class Harness(Protocol):
    """An operations ledger and the world around it (clusters A and B, group ``g``: primary A,
    failover B)."""

    ledger: OperationsLedger

    def add_job(
        self, name: str, *, cluster: str = "A", running: bool = True, desired: str = "RUNNING"
    ) -> JobRecord:
        """A job of group ``g`` on ``cluster``, with a RUNNING run there if ``running`` (else
        none, at rest)."""
        ...

    def job(self, job_id: int) -> JobRecord:
        """The job as stored, with its current run."""
        ...

    def close_run(self, job_id: int) -> JobRecord:
        """The job's owner confirmed its run gone (KILLED): the job as stored."""
        ...

    def api_write(self, job_id: int, desired: str | None = None) -> None:
        """An operator changes the job (its version moves); ``desired``: its desired state (a
        job set to STOPPED is at rest)."""
        ...

    def set_directive(self, job_id: int, directive: Directive) -> None:
        """The job is in another operation now."""
        ...

    def delete_job(self, job_id: int) -> None: ...

    def operation(self, operation_id: int) -> OperationRecord:
        """The operation as stored, with its items in plan order."""
        ...

    def audit(self) -> list[tuple[str, str]]:
        """(action, target) of every audit entry, oldest first."""
        ...

    def events(self, job_id: int) -> list[str]:
        """The messages of the job's events, oldest first."""
        ...

    def set_policy(self, group: str, *, enabled: bool) -> None: ...

    def now(self) -> datetime: ...


def new_operation(
    jobs: list[JobRecord],
    *,
    kind: OperationKind = OperationKind.FAILOVER,
    incident: str | None = None,
    action: str | None = None,
) -> NewOperation:
    failover = kind == OperationKind.FAILOVER
    return NewOperation(
        kind=kind,
        home_group="g",
        selector={"all": True},
        options={"parallelism": 10},
        reason="a drill",
        created_by="alice",
        plan_digest="0123abcd",
        source_cluster="A" if failover else None,
        target_cluster="B" if failover else None,
        incident=incident,
        team="t",
        items=tuple(
            NewItem(
                job_id=j.id,
                job_name=j.name,
                action=action or ("kill" if failover else kind.value),
                why=f"planned: {j.name}",
                step="PENDING",
                source_cluster="A" if failover else j.cluster,
                target_cluster="B" if failover else None,
                source_run_id=j.current_run_id if failover else None,
                detail={"priority": "high", "group": "g"},
            )
            for j in jobs
        ),
        audit={"items": len(jobs)},
    )


def _taken(
    h: Harness, *names: str, kind: OperationKind = OperationKind.FAILOVER
) -> OperationRecord:
    jobs = [h.add_job(n) for n in names]
    op = h.ledger.create(new_operation(jobs, kind=kind))
    assert h.ledger.take(op.id, ME) is not None
    return h.operation(op.id)


def _all(op: OperationRecord) -> tuple[ItemRecord, ...]:
    return op.items


def a_plan_is_stored_pending_in_plan_order_once_per_incident(h: Harness) -> None:
    jobs = [h.add_job("zeta"), h.add_job("alpha")]
    op = h.ledger.create(new_operation(jobs, incident="auto:g:A:7"))
    assert op == h.operation(op.id)
    assert (op.state, op.executor, op.version, op.team) == (OperationState.PENDING, None, 1, "t")
    assert [(i.position, i.job_name, i.step, i.version) for i in op.items] == [
        (0, "zeta", "PENDING", 1),
        (1, "alpha", "PENDING", 1),
    ]
    assert [(e.step, e.note) for e in op.items[0].history] == [("PENDING", "planned: zeta")]
    assert ("failover.create", str(op.id)) in h.audit()
    with pytest.raises(AlreadyExists):
        h.ledger.create(new_operation(jobs, incident="auto:g:A:7"))
    empty = h.ledger.create(new_operation([]))
    assert empty.state == OperationState.SUCCEEDED and empty.finished_at is not None
    assert [o.id for o in h.ledger.active(["g"])] == [op.id]


def a_take_starts_it_and_never_takes_it_back_from_a_newer_epoch(h: Harness) -> None:
    op = h.ledger.create(new_operation([h.add_job("a")]))
    taken = h.ledger.take(op.id, ME)
    assert taken is not None and taken.items == ()
    assert (taken.state, taken.executor, taken.executor_epoch) == (
        OperationState.RUNNING,
        ME.node_id,
        ME.epoch,
    )
    assert taken == replace(h.operation(op.id), items=())
    assert h.ledger.take(op.id, ME) is not None  # ours already: started once
    assert [a for a, t in h.audit() if t == str(op.id)] == ["failover.create", "failover.start"]
    assert h.ledger.take(op.id, OLDER) is None
    assert h.ledger.take(op.id, NEWER) is not None
    assert h.ledger.take(op.id, ME) is None  # never back from the newer epoch
    assert (h.operation(op.id).executor, h.operation(op.id).executor_epoch) == (
        NEWER.node_id,
        NEWER.epoch,
    )
    assert h.ledger.active(["other"]) == []


def a_read_brings_the_chosen_items_facts(h: Harness) -> None:
    op = _taken(h, "a", "b")
    first = op.items[0]
    read = h.ledger.read(op.id, lambda o: o.items[:1])
    assert read.operation == op and read.chosen == (first,)
    assert first.job_id is not None and first.source_run_id is not None
    assert dict(read.jobs) == {first.job_id: h.job(first.job_id)}
    source = h.job(first.job_id).current_run
    assert source is not None and read.runs[first.source_run_id] == source
    assert {"A", "B"} <= set(read.clusters)
    assert h.ledger.read(op.id, lambda o: ()).jobs == {}
    assert op.items[1].job_id is not None
    h.delete_job(op.items[1].job_id)
    assert op.items[1].job_id not in h.ledger.read(op.id, _all).jobs
    assert h.ledger.job(op.items[1].job_id) is None
    with pytest.raises(NotFound):
        h.ledger.read(op.id + 1000, _all)


def an_advance_writes_the_steps_and_the_job_write_together(h: Harness) -> None:
    op = _taken(h, "a")
    item = op.items[0]
    assert item.job_id is not None and item.source_run_id is not None
    job = h.job(item.job_id)
    drain = Directive(op.id, item.id, Phase.DRAIN, "A", "B")
    change = ItemChange(
        "DRAINING", "drain run", fields={"source_run_id": item.source_run_id}, detail={"x": 1}
    )
    done = h.ledger.advance(
        ME,
        op,
        [ItemWrite(item, [change], job=job, job_write=SetDirective(drain), message="drain it")],
    )[0]
    assert done.item == h.operation(op.id).items[0] and done.job == h.job(item.job_id)
    assert (done.item.step, done.item.version, done.item.detail["x"]) == ("DRAINING", 2, 1)
    assert done.item.started_at is not None and done.item.history[-1].note == "drain run"
    assert (done.job.directive, done.job.version) == (drain, job.version + 1)
    assert done.job.updated_at > job.updated_at
    assert h.events(item.job_id)[-1] == "drain it"

    # several steps at once, each with its history entry
    steps = [ItemChange("CHECKPOINT", "gone"), ItemChange("SWITCHING", "copied", detail={"y": 2})]
    chained = h.ledger.advance(ME, op, [ItemWrite(done.item, steps)])[0].item
    assert chained == h.operation(op.id).items[0] and chained.version == 4
    assert [e.step for e in chained.history[-2:]] == ["CHECKPOINT", "SWITCHING"]

    # a switch needs the run closed: refused with everything else of the transaction
    run = Directive(op.id, item.id, Phase.RUN, "A", "B")
    switch = SwitchCluster("B", run, "moved to B")
    with pytest.raises(StaleWrite):
        h.ledger.advance(
            ME,
            op,
            [ItemWrite(chained, [ItemChange("STARTING", "s")], job=done.job, job_write=switch)],
        )
    assert h.operation(op.id).items[0] == chained and h.job(item.job_id) == done.job
    closed = h.close_run(item.job_id)
    moved = h.ledger.advance(
        ME, op, [ItemWrite(chained, [ItemChange("STARTING", "s")], job=closed, job_write=switch)]
    )[0]
    assert moved.job == h.job(item.job_id)
    assert moved.job is not None and (moved.job.cluster, moved.job.state, moved.job.directive) == (
        "B",
        JobState.QUEUED,
        run,
    )
    assert h.events(item.job_id)[-1] == "moved to B"


def many_advances_land_together_or_not_at_all(h: Harness) -> None:
    """The advances of several items in one transaction (a round's): each item its own steps,
    each job its own write, in the order given; one stale job or item and nothing changes."""
    op = _taken(h, "a", "b", "c", "d")
    items = list(op.items)
    jobs = [h.job(i.job_id) for i in items if i.job_id is not None]
    drains = [Directive(op.id, i.id, Phase.DRAIN, "A", "B") for i in items]

    def drain(n: int, job: JobRecord | None = None) -> ItemWrite:
        change = ItemChange("DRAINING", f"drain {n}", detail={"n": n})
        return ItemWrite(
            items[n],
            [change],
            job=job or jobs[n],
            job_write=SetDirective(drains[n]),
            message=f"drain it {n}",
        )

    # the third job moved: nothing of the four lands
    h.api_write(jobs[2].id)
    batch = [drain(3), drain(0), ItemWrite(items[1], [ItemChange(None, "a note")]), drain(2)]
    with pytest.raises(StaleWrite):
        h.ledger.advance(ME, op, batch)
    assert h.operation(op.id).items == op.items
    assert [h.job(j.id) for j in (jobs[0], jobs[3])] == [jobs[0], jobs[3]]
    # decided again on the job as it is now: the four land, each as its own
    batch[3] = drain(2, h.ledger.job(jobs[2].id))
    done = h.ledger.advance(ME, op, batch)
    stored = {i.id: i for i in h.operation(op.id).items}
    assert [d.item for d in done] == [stored[items[n].id] for n in (3, 0, 1, 2)]
    assert [d.item.detail.get("n") for d in done] == [3, 0, None, 2]
    assert [d.item.step for d in done] == ["DRAINING", "DRAINING", "PENDING", "DRAINING"]
    assert done[2].job is None and done[2].item.history[-1].note == "a note"
    for d, n in zip((done[0], done[1], done[3]), (3, 0, 2), strict=True):
        assert d.job is not None and d.job == h.job(jobs[n].id)
        assert d.job.directive == drains[n] and h.events(jobs[n].id)[-1] == f"drain it {n}"
    assert h.ledger.advance(ME, op, []) == []
    with pytest.raises(ValueError):
        h.ledger.advance(ME, op, [ItemWrite(done[0].item, []), ItemWrite(done[0].item, [])])


def a_stale_claim_changes_nothing(h: Harness) -> None:
    op = _taken(h, "a")
    item = op.items[0]
    assert item.job_id is not None
    job = h.job(item.job_id)
    assert h.ledger.take(op.id, NEWER) is not None
    before = h.operation(op.id)
    with pytest.raises(NotOwner):
        h.ledger.advance(
            ME,
            op,
            [ItemWrite(item, [ItemChange("DRAINING", "d")], job=job, job_write=SetDirective(None))],
        )
    with pytest.raises(NotOwner):
        h.ledger.note(ME, op, [(item, [ItemChange(None, detail={"waiting": "w"})])])
    with pytest.raises(NotOwner):
        h.ledger.apply_command(ME, op, item, Command.STOP, "stop")
    with pytest.raises(NotOwner):
        h.ledger.finish(ME, op, OperationState.CANCELLED)
    assert h.operation(op.id) == before and h.job(item.job_id) == job


def a_stale_version_changes_nothing(h: Harness) -> None:
    op = _taken(h, "a")
    item = op.items[0]
    assert item.job_id is not None
    job = h.job(item.job_id)
    h.api_write(item.job_id)
    with pytest.raises(StaleWrite):
        h.ledger.advance(
            ME,
            op,
            [ItemWrite(item, [ItemChange("DRAINING", "d")], job=job, job_write=SetDirective(None))],
        )
    assert h.operation(op.id).items[0] == item  # the item's step went back with the job's
    assert h.ledger.job(item.job_id) == h.job(item.job_id)  # what a retry decides on
    noted = h.ledger.advance(ME, op, [ItemWrite(item, [ItemChange(None, "a note")])])[0].item
    with pytest.raises(StaleWrite):
        h.ledger.advance(ME, op, [ItemWrite(item, [ItemChange("DRAINING", "d")])])
    assert h.operation(op.id).items[0] == noted


def notes_land_where_the_item_did_not_move(h: Harness) -> None:
    op = _taken(h, "a", "b")
    first, second = op.items
    moved = h.ledger.advance(ME, op, [ItemWrite(second, [ItemChange(None, "moved")])])[0].item
    waiting = ItemChange(None, detail={"waiting": "the owner drains it"})
    written = h.ledger.note(ME, op, [(first, [waiting]), (second, [waiting])])
    stored = h.operation(op.id).items
    assert written == [stored[0]] and stored[1] == moved
    assert stored[0].detail["waiting"] == "the owner drains it"
    assert stored[0].history == first.history and stored[0].version == 2
    ended = h.ledger.note(ME, op, [(stored[0], [ItemChange("CANCELLED", "cancelled")])])
    assert ended == [h.operation(op.id).items[0]]
    assert ended[0].step == "CANCELLED" and ended[0].finished_at is not None
    assert h.ledger.note(ME, op, []) == []


def many_notes_land_each_on_its_own_item(h: Harness) -> None:
    """Notes of many items at once (one statement on SQL): each item gets its own changes, an
    item whose version moved is left out, the others are written whatever it was."""
    op = _taken(h, "a", "b", "c", "d", "e")
    a, b, c, d, e = op.items
    moved = h.ledger.advance(ME, op, [ItemWrite(c, [ItemChange(None, "moved")])])[0].item
    later = h.now() + timedelta(minutes=5)
    notes: list[tuple[ItemRecord, list[ItemChange]]] = [
        (a, [ItemChange(None, detail={"waiting": "the owner drains a"})]),
        (b, [ItemChange("SKIPPED", "skipped b", detail={"waiting": ""})]),
        (c, [ItemChange(None, detail={"waiting": "stale"})]),
        (d, [ItemChange(None, "ran", fields={"target_run_id": 42}), ItemChange(None, "again")]),
        (e, [ItemChange(None, "retry", error="boom", attempt=True, not_before=later)]),
    ]
    written = h.ledger.note(ME, op, notes)
    stored = h.operation(op.id).items
    assert written == [stored[0], stored[1], stored[3], stored[4]] and stored[2] == moved
    assert stored[0].detail["waiting"] == "the owner drains a" and stored[0].step == "PENDING"
    assert stored[0].history == a.history and stored[0].version == 2
    assert stored[1].step == "SKIPPED" and stored[1].finished_at is not None
    assert stored[1].history[-1].note == "skipped b" and stored[1].detail["waiting"] == ""
    assert stored[3].target_run_id == 42 and stored[3].step == "PENDING"
    assert [x.note for x in stored[3].history[1:]] == ["ran", "again"]
    assert stored[4].last_error == "boom" and stored[4].attempts == 1
    assert (
        stored[4].not_before is not None and abs(stored[4].not_before - later).total_seconds() < 1
    )
    assert stored[4].detail == e.detail and stored[4].target_run_id is None
    again = h.ledger.note(
        ME, op, [(x, [ItemChange(None, detail={"waiting": "w"})]) for x in stored]
    )
    assert again == list(h.operation(op.id).items)
    assert all(x.detail["waiting"] == "w" for x in again)
    with pytest.raises(ValueError):
        h.ledger.note(ME, op, [(x, [ItemChange(None, "twice")]) for x in (*again, again[0])])


def a_command_is_decided_on_the_job_as_it_is_then(h: Harness) -> None:
    op = _taken(h, "runs", "stopped", "moving", "gone", kind=OperationKind.STOP)
    runs, stopped, moving, gone = op.items
    ids = [i.job_id for i in op.items]
    assert all(isinstance(i, int) for i in ids)
    runs_id, stopped_id, moving_id, gone_id = (int(i or 0) for i in ids)
    before = h.job(runs_id)
    h.close_run(stopped_id)
    h.api_write(stopped_id, desired="STOPPED")
    h.set_directive(moving_id, Directive(99, 1, Phase.DRAIN, "A", "B"))
    h.delete_job(gone_id)

    done = h.ledger.apply_command(ME, op, runs, Command.STOP, "stop applied")
    assert done.item == h.operation(op.id).items[0] and done.item.step == "WAITING"
    assert done.item.detail["run_before"] == before.current_run_id
    assert done.job is not None and done.job.desired_state == DesiredState.STOPPED
    assert done.job.version == before.version + 1 == h.job(before.id).version
    assert ("job.stop", "runs") in h.audit()
    skipped = h.ledger.apply_command(ME, op, stopped, Command.STOP, "stop applied").item
    assert skipped.step == "SKIPPED" and "already stopped" in skipped.history[-1].note
    elsewhere = h.ledger.apply_command(ME, op, moving, Command.STOP, "stop applied").item
    assert elsewhere.step == "SKIPPED" and "failover 99" in elsewhere.history[-1].note
    deleted = h.ledger.apply_command(ME, op, gone, Command.STOP, "stop applied").item
    assert (deleted.step, deleted.last_error) == ("FAILED", "the job was deleted")
    assert h.operation(op.id).items == (done.item, skipped, elsewhere, deleted)


def the_end_of_an_operation_is_its_final_state(h: Harness) -> None:
    op = _taken(h, "a")
    ended = h.ledger.note(ME, op, [(op.items[0], [ItemChange("DONE", "done")])])
    h.ledger.finish(ME, replace(op, items=tuple(ended)), OperationState.SUCCEEDED)
    final = h.operation(op.id)
    assert final.state == OperationState.SUCCEEDED and final.finished_at is not None
    assert h.ledger.active(["g"]) == []
    assert h.audit()[-1] == ("failover.finish", str(op.id))


def automatic_failovers_and_plans_read_what_they_need(h: Harness) -> None:
    on_a, on_b = h.add_job("on-a"), h.add_job("on-b", cluster="B")
    assert h.ledger.automatic(["g"]).policies == []
    h.set_policy("g", enabled=True)
    facts = h.ledger.automatic(["g"])
    assert [(p.group, p.enabled, p.min_priority) for p in facts.policies] == [
        ("g", True, Priority.HIGH)
    ]
    assert isinstance(facts.policies[0], FailoverPolicy)
    assert "g" in facts.groups and {"A", "B"} <= set(facts.clusters)
    assert facts.incidents == {}  # every cluster NORMAL
    assert h.ledger.automatic(["other"]).policies == []
    found = h.ledger.candidates("A")
    assert [j.name for j in found.jobs] == ["on-a"] and found.jobs[0] == h.job(on_a.id)
    assert found.groups["g"].failover_cluster == "B" and "B" in found.clusters
    assert [j.name for j in h.ledger.candidates("B").jobs] == [on_b.name]


def automatic_decisions_are_recorded_once_per_change(h: Harness) -> None:
    held = AutoDecision("g", "A", "B", "auto:g:A:7", "held", "paused", "held: paused")
    assert h.ledger.decided([held]) == 1
    assert h.ledger.decided([held]) == 0  # said already
    assert h.ledger.decided([replace(held, why="held: paused (again)")]) == 0
    cooling = replace(held, code="target-cooling-down", why="held: B cooling down")
    assert h.ledger.decided([cooling, replace(held, cluster="B")]) == 2
    created = replace(held, verdict="created", code="created", why="created", operation_id=3)
    assert h.ledger.decided([created]) == 1
    later = replace(held, incident="auto:g:A:9")  # the next incident: said anew
    assert h.ledger.decided([later]) == 1
    assert h.ledger.decided([]) == 0


CONTRACT: list[Callable[[Harness], None]] = [
    a_plan_is_stored_pending_in_plan_order_once_per_incident,
    a_take_starts_it_and_never_takes_it_back_from_a_newer_epoch,
    a_read_brings_the_chosen_items_facts,
    an_advance_writes_the_steps_and_the_job_write_together,
    many_advances_land_together_or_not_at_all,
    a_stale_claim_changes_nothing,
    a_stale_version_changes_nothing,
    notes_land_where_the_item_did_not_move,
    many_notes_land_each_on_its_own_item,
    a_command_is_decided_on_the_job_as_it_is_then,
    the_end_of_an_operation_is_its_final_state,
    automatic_failovers_and_plans_read_what_they_need,
    automatic_decisions_are_recorded_once_per_change,
]


# -- harnesses ----------------------------------------------------------------------------------


class FakeHarness:
    """The contract around :class:`tests.support.operations_fakes.FakeOperationsLedger`."""

    def __init__(self) -> None:
        from tests.support.fakes import Clock
        from tests.support.operations_fakes import FakeOperationsLedger

        self.clock = Clock()
        self.fake = FakeOperationsLedger(self.clock, node_id=ME.node_id)
        self.ledger: OperationsLedger = self.fake

    def add_job(
        self, name: str, *, cluster: str = "A", running: bool = True, desired: str = "RUNNING"
    ) -> JobRecord:
        from scheduler.core.states import RunState

        return self.fake.add_job(
            name,
            cluster=cluster,
            run=RunState.RUNNING if running else None,
            desired=DesiredState(desired),
        )

    def job(self, job_id: int) -> JobRecord:
        return self.fake.stored(job_id)

    def close_run(self, job_id: int) -> JobRecord:
        from scheduler.core.states import RunState

        return self.fake.set_run(job_id, state=RunState.KILLED, ended_at=self.clock.now())

    def api_write(self, job_id: int, desired: str | None = None) -> None:
        changes = {"desired_state": DesiredState(desired)} if desired else {}
        if desired == "STOPPED":
            changes["state"] = JobState.STOPPED  # type: ignore[assignment]
        self.fake.owner_write(job_id, **changes)

    def set_directive(self, job_id: int, directive: Directive) -> None:
        self.fake.owner_write(job_id, directive=directive)

    def delete_job(self, job_id: int) -> None:
        self.fake.delete_job(job_id)

    def operation(self, operation_id: int) -> OperationRecord:
        return self.fake.operation(operation_id)

    def audit(self) -> list[tuple[str, str]]:
        return [(a.action, a.target) for a in self.fake.audit]

    def events(self, job_id: int) -> list[str]:
        return [e.message for e in self.fake.events if e.job_id == job_id]

    def set_policy(self, group: str, *, enabled: bool) -> None:
        self.fake.policies[group] = FailoverPolicy(group, enabled, 120.0, Priority.HIGH)

    def now(self) -> datetime:
        return self.clock.now()


class SqlHarness:
    """The contract around :class:`scheduler.store.operations_ledger.SqlOperationsLedger` on a
    migrated store, with clusters A and B and group ``g``."""

    def __init__(self, store: Store, root: str = "file:///tmp/drover-contract") -> None:
        from scheduler.store.operations_ledger import SqlOperationsLedger
        from tests.support.fakes import add_unreachable_clusters

        self.store = store
        self.ledger: OperationsLedger = SqlOperationsLedger(store, node_id=ME.node_id)
        self._names: dict[int, str] = {}
        self._writes = 0
        with store.transaction() as session:
            add_unreachable_clusters(session, root, ["A", "B"], group="g")

    def add_job(
        self, name: str, *, cluster: str = "A", running: bool = True, desired: str = "RUNNING"
    ) -> JobRecord:
        import secrets

        from sqlalchemy import update

        from scheduler.core.backend import app_name_for
        from scheduler.core.records import JobSpec
        from scheduler.store import jobs as jobs_store
        from scheduler.store.models import Job, Run, utcnow

        spec = JobSpec(
            name=name,
            entrypoint="file:///pipelines/p.py",
            group="g",
            team="t",
            priority=Priority.HIGH,
            desired_state=DesiredState(desired),
        )
        with self.store.transaction() as session:
            job = jobs_store.create_job(session, spec, cause="test", node_id="test")
            values: dict[str, object] = {"cluster_name": cluster}
            if running:
                now = utcnow()
                run = Run(
                    job_id=job.id,
                    attempt=1,
                    cluster_name=cluster,
                    node_id="owner",
                    owner_epoch=1,
                    fencing_token=secrets.token_hex(8),
                    app_name=app_name_for(name, 0),
                    checkpoint_location=f"file:///ck/{cluster}/{name}/checkpoint",
                    submission_id=f"driver-{name}",
                    state="RUNNING",
                    created_at=now,
                    submitted_at=now,
                    started_at=now,
                )
                session.add(run)
                session.flush()
                values.update(current_run_id=run.id, state="RUNNING")
            session.execute(update(Job).where(Job.id == job.id).values(**values))
        self._names[job.id] = name
        return self.job(job.id)

    def job(self, job_id: int) -> JobRecord:
        from scheduler.store import jobs as jobs_store

        with self.store.session() as session:
            return jobs_store.get_job(session, self._names[job_id])

    def close_run(self, job_id: int) -> JobRecord:
        from sqlalchemy import update

        from scheduler.store.models import Job, Run, utcnow

        job = self.job(job_id)
        assert job.current_run_id is not None
        state = "QUEUED" if job.desired_state == DesiredState.RUNNING else "STOPPED"
        with self.store.transaction() as session:
            session.execute(
                update(Run)
                .where(Run.id == job.current_run_id)
                .values(state="KILLED", ended_at=utcnow())
            )
            session.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(state=state, version=Job.version + 1, updated_at=utcnow())
            )
        return self.job(job_id)

    def api_write(self, job_id: int, desired: str | None = None) -> None:
        from sqlalchemy import update

        from scheduler.store.models import Job, utcnow

        self._writes += 1
        values: dict[str, object] = {"team": f"team-{self._writes}"}
        if desired is not None:
            values["desired_state"] = desired
            if desired == "STOPPED":
                values["state"] = "STOPPED"
        with self.store.transaction() as session:
            session.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(**values, version=Job.version + 1, updated_at=utcnow())
            )

    def set_directive(self, job_id: int, directive: Directive) -> None:
        from sqlalchemy import update

        from scheduler.store.models import Job

        with self.store.transaction() as session:
            session.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(directive=directive.to_json(), version=Job.version + 1)
            )

    def delete_job(self, job_id: int) -> None:
        from sqlalchemy import delete

        from scheduler.store.models import Job

        with self.store.transaction() as session:
            session.execute(delete(Job).where(Job.id == job_id))

    def operation(self, operation_id: int) -> OperationRecord:
        from scheduler.store import operations as ops

        with self.store.session() as session:
            return ops.get_operation(session, operation_id)

    def audit(self) -> list[tuple[str, str]]:
        from scheduler.store import journal

        with self.store.session() as session:
            entries = journal.list_audit(session, limit=1000)
        return [(a.action, a.target_name) for a in reversed(entries)]

    def events(self, job_id: int) -> list[str]:
        from sqlalchemy import select

        from scheduler.store.models import JobEvent

        with self.store.session() as session:
            rows = session.scalars(
                select(JobEvent.message).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
            )
            return list(rows)

    def set_policy(self, group: str, *, enabled: bool) -> None:
        from scheduler.store import operations as ops

        with self.store.transaction() as session:
            ops.put_policy(
                session,
                group,
                enabled=enabled,
                after_seconds=120.0,
                min_priority=Priority.HIGH,
                by="test",
            )

    def now(self) -> datetime:
        from scheduler.store.models import utcnow

        return utcnow()
