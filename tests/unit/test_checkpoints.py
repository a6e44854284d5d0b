"""Checkpoint file sets (pure): classification, the cut, the sync plan and its order, relocation,
lag. The property tests run a simulated Spark checkpoint (batches, replays, snapshots, purges, a
history that diverges) against a copy synced by plans executed only partly (a copy killed at any
step) and check that the copy is always at a complete batch of one history."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.decisions.checkpoints import (
    Entry,
    FileInfo,
    Kind,
    classify,
    copy_key,
    cut,
    lag,
    last_complete_batch,
    plan_sync,
    relocate,
)

# --------------------------------------------------------------------------- classification

#: files seen in real Spark 4.3 checkpoints (HDFS-backed and RocksDB state stores, rate and file
#: sources) and in Spark's sources (transformWithState metadata, checkpoint format v2)
LAYOUT = {
    "metadata": Entry(Kind.QUERY),
    ".metadata.crc": Entry(Kind.IGNORED),
    "offsets/12": Entry(Kind.OFFSETS, 12),
    "offsets/.12.crc": Entry(Kind.IGNORED),
    "offsets/.12.3f2a9c.tmp": Entry(Kind.IGNORED),
    "offsets/notes": Entry(Kind.IGNORED),
    "offsets/012": Entry(Kind.IGNORED),
    "commits/12": Entry(Kind.COMMITS, 12),
    "sources/0/0": Entry(Kind.SOURCE_LOG, 0),
    "sources/0/19.compact": Entry(Kind.SOURCE_LOG, 19),
    "sources/1/.19.compact.crc": Entry(Kind.IGNORED),
    "state/0/0/13.delta": Entry(Kind.STATE, 12),
    "state/0/1/10.snapshot": Entry(Kind.STATE, 9),
    "state/0/0/13.changelog": Entry(Kind.STATE, 12),
    "state/1/3/13.zip": Entry(Kind.STATE, 12),
    "state/0/0/13_1c2d3e4f-aaaa-bbbb.zip": Entry(Kind.STATE, 12),
    "state/0/0/SSTs/000008-1c2d3e4f.sst": Entry(Kind.SHARED),
    "state/0/0/logs/000009-1c2d3e4f.log": Entry(Kind.SHARED),
    "state/0/_metadata/metadata": Entry(Kind.STATE_META),
    "state/0/0/_metadata/schema": Entry(Kind.STATE_META),
    "state/0/_metadata/v2/12": Entry(Kind.STATE_META, 12),
    "state/0/_stateSchema/default/12_0a1b2c3d": Entry(Kind.STATE_META, 12),
    "state/0/0/.13.delta.crc": Entry(Kind.IGNORED),
    "state/0/0/.13.delta.9c1f.tmp": Entry(Kind.IGNORED),
    "state/0/0/whatever": Entry(Kind.OTHER),
    "_spark_metadata/0": Entry(Kind.OTHER),
}


def test_classification_of_a_spark_4_checkpoint() -> None:
    for path, entry in LAYOUT.items():
        assert classify(path) == entry, path


def test_the_cut_holds_the_batch_and_what_all_batches_share() -> None:
    files = [
        "metadata",
        "offsets/3",
        "commits/3",
        "offsets/4",
        "sources/0/4",
        "state/0/0/4.delta",
        "state/0/0/5.delta",
        "state/0/0/SSTs/a.sst",
        "state/0/_metadata/metadata",
        "offsets/.3.crc",
    ]
    assert last_complete_batch(files) == 3
    assert cut(files, 3) == {
        "metadata",
        "offsets/3",
        "commits/3",
        "state/0/0/4.delta",
        "state/0/0/SSTs/a.sst",
        "state/0/_metadata/metadata",
    }


def test_a_batch_is_copied_after_everything_it_needs() -> None:
    paths = ["commits/2", "offsets/2", "state/0/0/3.delta", "sources/0/2", "metadata"]
    paths += ["state/0/_metadata/v2/2", "state/0/0/_metadata/schema", "commits/1", "offsets/1"]
    ordered = sorted(paths, key=copy_key)
    assert ordered.index("state/0/0/_metadata/schema") < ordered.index("metadata")
    assert ordered[-5:] == [
        "sources/0/2",
        "state/0/_metadata/v2/2",
        "state/0/0/3.delta",
        "offsets/2",
        "commits/2",
    ]
    assert ordered.index("commits/1") < ordered.index("sources/0/2")


# --------------------------------------------------------------------------- relocation


def test_relocation_rewrites_every_form_of_the_location_once() -> None:
    text = (
        '{"stateSchemaFilePaths":["file:/ck/a/job/checkpoint/state/0/_stateSchema/default/0_x",'
        '"file:///ck/a/job/checkpoint/state/0/_stateSchema/default/1_y",'
        '"/ck/a/job/checkpoint/state/0/x","/ck/a/job/checkpointed/z","/x/ck/a/job/checkpoint/q"]}'
    )
    moved = relocate(
        text.encode(), "file:///ck/a/job/checkpoint", "file:///ck/b/ck/a/job/checkpoint"
    )
    assert moved.decode() == (
        '{"stateSchemaFilePaths":["file:/ck/b/ck/a/job/checkpoint/state/0/_stateSchema/default/0_x",'
        '"file:///ck/b/ck/a/job/checkpoint/state/0/_stateSchema/default/1_y",'
        '"/ck/b/ck/a/job/checkpoint/state/0/x","/ck/a/job/checkpointed/z","/x/ck/a/job/checkpoint/q"]}'
    )


def test_relocation_leaves_binary_and_unrelated_content_alone() -> None:
    blob = b"\xff\xfe\x00/ck/a/job/checkpoint"
    assert relocate(blob, "file:///ck/a/job/checkpoint", "file:///ck/b/job/checkpoint") is blob
    plain = b'v1\n{"operatorInfo":{"operatorId":0}}'
    assert relocate(plain, "file:///ck/a/j", "file:///ck/b/j") is plain


@given(
    st.lists(st.sampled_from(["a", "b", "ck", "job-1", "x y"]), min_size=1, max_size=4),
    st.lists(st.sampled_from(["a", "b", "ck", "job-1", "x y"]), min_size=1, max_size=4),
)
def test_relocation_there_and_back_is_the_identity(src: list[str], dst: list[str]) -> None:
    source, target = "file:///" + "/".join(src), "file:///" + "/".join(dst + ["t"])
    path = "/" + "/".join(src)
    text = f'["file:{path}/state/0/f","{source}/x",  "{path}"]'
    there = relocate(text.encode(), source, target).decode()
    assert path + "/" not in there.replace(target[len("file://") :], "")
    assert relocate(there.encode(), target, source).decode() == text


# --------------------------------------------------------------------------- lag

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _ns(seconds: float) -> int:
    return int((T0 + timedelta(seconds=seconds)).timestamp() * 1e9)


def test_lag_in_batches_and_seconds() -> None:
    source = {}
    for batch in range(10):
        source[f"offsets/{batch}"] = FileInfo(10, _ns(batch * 5))
        source[f"commits/{batch}"] = FileInfo(10, _ns(batch * 5 + 1))
    figures = lag(source, 6)
    assert (figures.source_batch, figures.replica_batch, figures.batches) == (9, 6, 3)
    assert figures.oldest_missing_at == T0 + timedelta(seconds=36)
    assert figures.seconds(T0 + timedelta(seconds=50)) == 14.0
    assert lag(source, 9).batches == 0 and lag(source, 9).seconds(T0) == 0.0
    assert lag(source, None).batches == 10
    assert lag({}, 4).batches == 0


# --------------------------------------------------------------------------- a simulated Spark


@dataclass
class Sim:
    """A Spark checkpoint that evolves: each file's content names the history that wrote it."""

    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    history: int = 0
    batch: int = -1
    clock: int = 1_000
    partitions: int = 2

    def write(self, path: str) -> None:
        self.clock += 1
        self.files[path] = (f"h{self.history}", self.clock)

    def run(self, complete: bool = True) -> None:
        b = self.batch + 1
        self.write(f"sources/0/{b}")
        self.write(f"offsets/{b}")
        for p in range(self.partitions):
            self.write(f"state/0/{p}/{b + 1}.delta")
        if complete:
            self.write(f"commits/{b}")
            self.batch = b

    def snapshot(self) -> None:
        if self.batch >= 0:
            for p in range(self.partitions):
                self.write(f"state/0/{p}/{self.batch + 1}.snapshot")

    def purge(self, keep: int) -> None:
        """Spark's cleanup: logs of old batches, state files older than the newest snapshot a
        retained batch can start from."""
        floor = self.batch - keep
        if floor <= 0:
            return
        for path in list(self.files):
            e = classify(path)
            if e.kind in (Kind.OFFSETS, Kind.COMMITS, Kind.SOURCE_LOG) and e.batch < floor:  # type: ignore[operator]
                del self.files[path]
        for p in range(self.partitions):
            snaps = [
                classify(x).batch + 1  # type: ignore[operator]
                for x in self.files
                if x.startswith(f"state/0/{p}/")
                and x.endswith(".snapshot")
                and classify(x).batch + 1 <= floor + 1  # type: ignore[operator]
            ]
            if not snaps:
                continue
            base = max(snaps)
            for path in list(self.files):
                e = classify(path)
                if path.startswith(f"state/0/{p}/") and e.kind is Kind.STATE and e.batch + 1 < base:  # type: ignore[operator]
                    del self.files[path]

    def diverge(self, back: int) -> None:
        """Another run resumes from an earlier batch (a failover from an older replica)."""
        keep = max(-1, self.batch - back)
        self.history += 1
        for path in list(self.files):
            e = classify(path)
            if e.batch is not None and e.batch > keep:
                del self.files[path]
        self.batch = keep

    def listing(self) -> dict[str, FileInfo]:
        return {p: FileInfo(len(c), m) for p, (c, m) in self.files.items()}


def execute(sim: Sim, copy: dict[str, tuple[str, int]], steps: int | None) -> None:
    """Run a sync plan against ``copy`` as the replicator does, stopping after ``steps``."""
    listing = {p: FileInfo(len(c), m) for p, (c, m) in copy.items()}
    plan = plan_sync(sim.listing(), listing)
    done = 0
    for path in plan.retract:
        if steps is not None and done >= steps:
            return
        copy.pop(path, None)
        done += 1
    for path in plan.copy:
        if steps is not None and done >= steps:
            return
        copy[path] = sim.files[path]
        done += 1
    for path in plan.remove:
        copy.pop(path, None)


def resumable(copy: dict[str, tuple[str, int]]) -> None:
    """The copy is a checkpoint Spark resumes from at its newest complete batch: its offsets and
    commit, and per state partition the chain Spark loads for version ``batch + 1`` (a snapshot
    of a version, else its delta and the version below, down to nothing), every log file and
    delta written by the history that committed its batch."""
    batch = last_complete_batch(copy)
    if batch is None:
        return
    for b in range(batch + 1):
        if f"offsets/{b}" in copy and f"commits/{b}" in copy:
            assert copy[f"offsets/{b}"][0] == copy[f"commits/{b}"][0], b
    for p in range(2):
        version = batch + 1
        while version > 0:
            if f"state/0/{p}/{version}.snapshot" in copy:
                break
            delta = f"state/0/{p}/{version}.delta"
            assert delta in copy, (batch, version, sorted(copy))
            commit = copy.get(f"commits/{version - 1}")
            if commit is not None:
                assert copy[delta][0] == commit[0], (delta, copy[delta], commit)
            version -= 1


Action = st.sampled_from(
    ["run", "run", "run", "partial", "snapshot", "purge", "sync", "kill", "diverge"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(Action, min_size=1, max_size=40), st.lists(st.integers(0, 12), max_size=40))
def test_a_copy_is_always_a_complete_batch_of_one_history(
    actions: list[str], kills: list[int]
) -> None:
    sim = Sim()
    copy: dict[str, tuple[str, int]] = {}
    kill_at = iter(kills)
    for action in actions:
        if action == "run":
            sim.run()  # after a "partial", this replays that batch
        elif action == "partial":
            sim.run(complete=False)
        elif action == "snapshot":
            sim.snapshot()
        elif action == "purge":
            sim.purge(keep=3)
        elif action == "diverge":
            sim.diverge(back=2)
        elif action == "sync":
            execute(sim, copy, None)
            batch = last_complete_batch(sim.files)
            assert last_complete_batch(copy) == batch
            wanted = cut(sim.files, batch) if batch is not None else frozenset()
            assert copy == {p: sim.files[p] for p in wanted}
        else:  # a sync killed after some of its steps
            execute(sim, copy, next(kill_at, 3))
        resumable(copy)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.integers(0, 30))
def test_only_missing_or_changed_files_are_copied(first: int, more: int) -> None:
    sim = Sim()
    for _ in range(first):
        sim.run()
    copy: dict[str, tuple[str, int]] = {}
    execute(sim, copy, None)
    for _ in range(more):
        sim.run()
    plan = plan_sync(sim.listing(), {p: FileInfo(len(c), m) for p, (c, m) in copy.items()})
    assert plan.retract == ()
    assert set(plan.copy) == {p for p in sim.files if p not in copy}
    assert len(plan.copy) == more * (3 + sim.partitions)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(0, 4),
    st.integers(0, 6),
    st.booleans(),
    st.booleans(),
)
def test_a_copy_killed_at_any_step_after_the_source_diverged_is_resumable(
    first: int, back: int, then: int, snapshot: bool, purge: bool
) -> None:
    """A replica synced at some batch, the source resumed from an earlier batch by another run
    (a fail-back), and the next sync killed after each of its steps in turn."""
    sim = Sim()
    for _ in range(first):
        sim.run()
    if snapshot:
        sim.snapshot()
    synced: dict[str, tuple[str, int]] = {}
    execute(sim, synced, None)
    sim.diverge(back)
    for _ in range(then):
        sim.run()
    if purge:
        sim.purge(keep=2)
    steps = len(
        plan_sync(sim.listing(), {p: FileInfo(len(c), m) for p, (c, m) in synced.items()}).copy
    )
    for kill in range(steps + 8):
        copy = dict(synced)
        execute(sim, copy, kill)
        resumable(copy)
