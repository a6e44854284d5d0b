"""A steady tick looks at what changed, not at every owned job.

The change feed's bookkeeping (``ChangeLog``, with hypothesis: it never misses a change), the
reconciler's kept and quiet jobs (``KeptJobs``), and the reconciler against the in-memory ledger
and backend: a tick over quiet jobs asks the cluster about none of them, a change on the cluster
or in the store is picked up at the next tick, a full read and a health change look at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.backends.changes import ChangeLog, Mark, feed_of
from scheduler.core.backend import AppState, AppStatus
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import JobRecord
from scheduler.core.states import DesiredState, JobState
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.quiet import KeptJobs
from scheduler.loops.reconciler import Reconciler
from tests.support.fakes import Clock, FakeBackend, FakeBackends, FakeLedger

ME = Fence("node-a", 4)

# -- ChangeLog ------------------------------------------------------------------------------------


def test_a_first_answer_cannot_tell_and_later_ones_name_what_changed() -> None:
    log = ChangeLog()
    log.advance({"d1": "RUNNING", "d2": "RUNNING"})
    first = log.changes(None)
    assert first.changed is None and not first.complete
    log.advance({"d1": "RUNNING", "d2": "FAILED", "d3": "SUBMITTED"})
    second = log.changes(first.mark)
    assert second.changed == {"d2", "d3"}
    log.advance({"d1": "RUNNING", "d3": "SUBMITTED"})  # d2 left the listing
    assert log.changes(second.mark).changed == {"d2"}
    assert log.changes(log.changes(None).mark).changed == frozenset()


def test_touched_and_volatile_submissions_are_named() -> None:
    log = ChangeLog()
    log.advance({"d1": 1, "d2": 1})
    mark = log.changes(None).mark
    log.touch(["d1"])  # a kill sent: the listing does not show it yet
    answer = log.changes(mark)
    assert answer.changed == {"d1"}
    log.volatile("d2", True)  # its last status did not come from the listing
    assert log.changes(answer.mark).changed == {"d2"}
    log.volatile("d2", False)
    assert log.changes(log.changes(answer.mark).mark).changed == frozenset()


def test_a_mark_of_another_feed_or_beyond_the_history_cannot_tell() -> None:
    log, other = ChangeLog(history=3), ChangeLog()
    log.advance({"d1": 0})
    old = log.changes(None).mark
    assert log.changes(other.changes(None).mark).changed is None
    for i in range(1, 5):
        log.advance({"d1": i})
    assert log.changes(old).changed is None


def test_the_history_is_bounded_by_the_ids_it_holds() -> None:
    log = ChangeLog(history=64, held=10)
    log.advance({f"d{i}": 0 for i in range(3)})
    old = log.changes(None).mark
    for step in range(1, 20):
        log.advance({f"d{i}": step for i in range(3)})
    assert log.changes(old).changed is None  # dropped: more than max(10, 2 * 3) ids held


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["advance", "touch", "ask"]),
            st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 2), max_size=6),
        ),
        max_size=30,
    )
)
def test_the_feed_never_misses_a_change(steps: list[tuple[str, dict[str, int]]]) -> None:
    """Whatever happens between two answers, every submission whose fingerprint differs from
    what it was at the earlier answer is named (or the answer cannot tell)."""
    log = ChangeLog(history=4, held=8)
    listing: dict[str, int] = {}
    asked: list[tuple[Mark, dict[str, int], set[str]]] = []
    touched_since: list[set[str]] = []
    for kind, data in steps:
        if kind == "advance":
            listing = dict(data)
            log.advance(listing)
        elif kind == "touch":
            log.touch(data)
            for seen in touched_since:
                seen.update(data)
        else:
            answer = log.changes(asked[-1][0] if asked else None)
            if asked and answer.changed is not None:
                _, before, touched = asked[-1]
                moved = {k for k in set(before) | set(listing) if before.get(k) != listing.get(k)}
                assert moved | touched <= answer.changed
            asked.append((answer.mark, dict(listing), set()))
            touched_since = [asked[-1][2]]


# -- KeptJobs -------------------------------------------------------------------------------------


def _job(ledger: FakeLedger, name: str) -> JobRecord:
    return ledger.add_job(name)


def test_kept_jobs_are_busy_until_quiet_and_busy_again_when_their_row_moves() -> None:
    clock = Clock()
    ledger = FakeLedger(clock, node_id=ME.node_id)
    backend = FakeBackend(start_running=True)
    rec = _reconciler(ledger, backend, clock)
    job = ledger.add_job("orders")
    rec.tick()
    rec.tick()
    kept = KeptJobs()
    stored = ledger.job(job.id)
    kept.put(stored)
    assert kept.busy() == {job.id}
    status = AppStatus(AppState.RUNNING, "app-1")
    kept.set_quiet(stored, status)
    assert kept.busy() == set() and kept.is_quiet(stored, status)
    assert kept.quiet_clusters() == ["c1"]
    kept.put(stored)  # the same version again: still quiet
    assert kept.busy() == set()
    moved = ledger.api_write(job.id)
    kept.put(moved)
    assert kept.busy() == {job.id} and kept.quiet_count() == 0
    kept.drop(job.id)
    assert len(kept) == 0 and kept.busy() == set()


# -- the reconciler -------------------------------------------------------------------------------


@dataclass
class Steady:
    clock: Clock = field(default_factory=Clock)
    ledger: FakeLedger = field(init=False)
    backend: FakeBackend = field(init=False)

    def __post_init__(self) -> None:
        self.ledger = FakeLedger(self.clock, node_id=ME.node_id)
        self.backend = FakeBackend(calls=self.ledger.calls, start_running=True)

    def statuses(self) -> int:
        return sum(1 for c in self.ledger.calls if c.startswith("backend.status"))


def _reconciler(ledger: FakeLedger, backend: object, clock: Clock, **options: object) -> Reconciler:
    claim = Claim("default", ME, 0, 1)
    return Reconciler(
        ledger,
        FakeBackends(c1=backend),  # type: ignore[arg-type]
        node_id=ME.node_id,
        group="default",
        claim=lambda: claim,
        policy=RestartPolicy(),
        clock=clock.now,
        monotonic=clock.monotonic,
        **options,  # type: ignore[arg-type]
    )


def _steady(world: Steady, jobs: int, **options: object) -> tuple[Reconciler, list[JobRecord]]:
    made = [world.ledger.add_job(f"job-{i}") for i in range(jobs)]
    rec = _reconciler(world.ledger, world.backend, world.clock, **options)
    rec.tick()  # submitted, RUNNING at once
    rec.tick()  # observed RUNNING
    rec.tick()  # planned Noop: quiet
    assert all(world.ledger.job(j.id).state == JobState.RUNNING for j in made)
    return rec, made


def test_a_steady_tick_asks_the_cluster_about_no_quiet_job() -> None:
    world = Steady()
    assert feed_of(world.backend) is not None
    rec, _ = _steady(world, 20)
    before = world.statuses()
    stats = rec.tick()
    assert (stats.jobs, stats.quiet, stats.looked_at, stats.actions) == (20, 20, 0, 0)
    assert world.statuses() == before


def test_a_change_on_the_cluster_is_seen_at_the_next_tick() -> None:
    world = Steady()
    rec, jobs = _steady(world, 20)
    run = world.ledger.job(jobs[7].id).current_run
    assert run is not None and run.submission_id is not None
    before = world.statuses()
    world.backend.set_state(run.submission_id, AppState.FAILED)
    stats = rec.tick()
    assert stats.looked_at == 1 and world.statuses() == before + 1
    assert world.ledger.job(jobs[7].id).current_run_id != run.id or (
        world.ledger.job(jobs[7].id).state != JobState.RUNNING
    )


def test_a_change_in_the_store_is_seen_at_the_next_tick() -> None:
    world = Steady()
    rec, jobs = _steady(world, 10)
    world.ledger.api_write(jobs[3].id, desired_state=DesiredState.STOPPED)
    stats = rec.tick()
    assert stats.looked_at == 1 and stats.actions == 1
    assert world.ledger.job(jobs[3].id).state == JobState.STOPPING


def test_without_a_feed_every_quiet_job_is_asked_about_and_not_planned() -> None:
    world = Steady()
    plain = _NoFeed(world.backend)
    made = [world.ledger.add_job(f"job-{i}") for i in range(5)]
    rec = _reconciler(world.ledger, plain, world.clock)
    for _ in range(3):
        rec.tick()
    assert all(world.ledger.job(j.id).state == JobState.RUNNING for j in made)
    before = world.statuses()
    stats = rec.tick()
    assert stats.looked_at == 5 and stats.actions == 0
    assert world.statuses() == before + 5


def test_a_full_read_asks_about_every_job() -> None:
    world = Steady()
    rec, _ = _steady(world, 6, full_read_every=30.0)
    world.clock.advance(31)
    before = world.statuses()
    stats = rec.tick()
    assert stats.full_read and stats.looked_at == 6 and stats.actions == 0
    assert world.statuses() == before + 6


def test_a_cluster_that_cannot_answer_its_feed_gets_every_quiet_job_asked_about() -> None:
    world = Steady()
    rec, _ = _steady(world, 4)
    world.backend.unreachable = True
    stats = rec.tick()
    assert stats.looked_at == 4 and stats.actions == 0  # no guess: no writes either
    world.backend.unreachable = False
    stats = rec.tick()  # the feed's mark was forgotten: it cannot tell, so all are asked
    assert stats.looked_at == 4
    assert rec.tick().looked_at == 0


class _NoFeed:
    """A backend without a change feed (like the local and spark-submit backends)."""

    def __init__(self, inner: FakeBackend) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        if name == "changes":
            raise AttributeError(name)
        return getattr(self._inner, name)
