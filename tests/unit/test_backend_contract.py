"""One contract every cluster backend passes, without real services, in seconds.

Each backend runs against something fast and fake, named here so nobody mistakes it for Spark
(and the reconciler's own in-memory fake backend, ``tests/support/fakes.py``, keeps the contract
as well, so the reconciler's unit tests run against a backend that behaves like the real ones):

- ``standalone``: :class:`StandaloneRestBackend` against the simulated master and worker of
  ``harness/simcluster.py`` (REST submission server, ``/json/``, the worker's ``/log/``);
- ``yarn``: :class:`YarnBackend` against the simulated ResourceManager of ``harness/simyarn.py``
  (its REST API and a NodeManager's container logs) and a fake ``spark-submit`` that submits to
  it (the real YARN clusters: ``tests/integration/test_yarn_backend.py``);
- ``local`` and ``spark-submit``: :class:`LocalSparkSubmitBackend` (local mode, and client mode
  against a ``spark://`` master) with a fake ``$SPARK_HOME/bin/spark-submit``: a shell script
  that prints the lines Spark's JVM would log (``Submitted application``, for a non-local master
  ``Connected to Spark cluster with app ID``, the BlockManager start marker) and runs the
  pipeline with ``$PYSPARK_PYTHON``; the "pipeline" sleeps, after printing drover_runtime's
  ``drover-runtime: started app_id=...`` line when it is meant to use the runtime. No JVM, no
  Spark: the real things are covered by tests/integration and tests/e2e.

Every backend runs pipelines that set their own application name (``builder.appName``), the
case the driver <-> application link must survive; the standalone simulator also runs pipelines
that keep Drover's name, and drivers whose log configuration hides Spark's INFO line.

The contract: submit -> status progresses to RUNNING (with the linked app id where the backend
can know it); find by the run's tag returns that submission, from this instance and from a fresh
one (a restarted node), and None for an unknown tag; a fresh instance handed the recorded tag
and app id reports the same application (takeover); kill is idempotent and confirmed (a terminal
status, KILLED); an unknown submission is NOT_FOUND; an unreachable cluster raises
ClusterUnreachable from every call that must ask it and fails the probe; list_applications
shows the application with its run's tag and job; a backend that reads driver logs
(``DriverLogs``) serves any byte range of each stream, the tail, nothing past the end, the same
bytes from a fresh instance and after the kill, and refuses an unknown stream or submission.
"""

from __future__ import annotations

import shutil
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.procs import pids_with_env_prefix, signal_all
from harness.simcluster import SimCluster
from harness.simyarn import SimResourceManager, fake_spark_submit
from scheduler.backends.changes import Mark, feed_of
from scheduler.backends.local import LocalSparkSubmitBackend
from scheduler.backends.standalone import StandaloneRestBackend
from scheduler.backends.yarn import YarnBackend
from scheduler.core.backend import (
    AppState,
    AppStatus,
    ClusterBackend,
    SubmitRequest,
    logs_of,
    parse_app_name,
)
from scheduler.core.errors import ClusterUnreachable, InvalidInput, NotFound
from tests.conftest import wait_until
from tests.support.fakes import FakeBackend

OWN_NAME = "rate-counter"
DEADLINE_S = 10.0

# The fake spark-submit: the JVM's part (log lines on stderr, as log4j would write them), then
# the Python driver. ``FAKE_APP_NAME`` is the name the pipeline gives itself.
FAKE_SPARK_SUBMIT = """\
#!/bin/sh
master=""; name=""
while [ $# -gt 0 ]; do
  case "$1" in
    --master) master=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --*) shift 2 ;;
    *) break ;;
  esac
done
log() { echo "26/11/23 08:44:18 INFO $*" >&2; }
log "SparkContext: Submitted application: ${FAKE_APP_NAME:-$name}"
case "$master" in
  local*) ;;
  *) log "StandaloneSchedulerBackend: Connected to Spark cluster with app ID app-2026-$$" ;;
esac
log "BlockManager: Initialized BlockManager: BlockManagerId(driver, 127.0.0.1, 1, None)"
exec "$PYSPARK_PYTHON" "$@"
"""

FAKE_PIPELINE = """\
import os, sys, time
if os.environ.get("FAKE_RUNTIME"):
    app_id = f"local-{int(time.time() * 1000)}"
    print(f"drover-runtime: started app_id={app_id} job={os.environ['DROVER_JOB']} "
          f"run_id={os.environ['DROVER_RUN_ID']}", file=sys.stderr, flush=True)
time.sleep(600)
"""


@dataclass
class Cluster:
    """One backend under contract, its fake cluster, and how to break and heal it."""

    backend: ClusterBackend
    #: a new backend instance on the same cluster (another node, or this one restarted)
    fresh: Callable[[], ClusterBackend]
    entrypoint: str
    env: dict[str, str]
    unknown_id: str
    #: whether the app id can be known for this variant (local mode: only through the runtime)
    knows_app_id: bool
    breaks: Callable[[], None]
    heals: Callable[[], None]

    def request(self, job: str, run_id: int) -> SubmitRequest:
        return SubmitRequest(
            job_name=job,
            run_id=run_id,
            fencing_token=f"tok-{job}-{run_id}",
            entrypoint=self.entrypoint,
            checkpoint_location=f"/ckpt/{job}",
            env=self.env,
        )

    def running(self, status: AppStatus) -> bool:
        """RUNNING, and linked where the app id can be known (local mode reports RUNNING at
        Spark's start marker, a moment before drover_runtime prints the id)."""
        return status.state is AppState.RUNNING and (bool(status.app_id) or not self.knows_app_id)

    def wait_status(
        self, submission_id: str, done: Callable[[AppStatus], bool], what: str
    ) -> AppStatus:
        return wait_until(
            lambda: s if done(s := self.backend.status(submission_id)) else None,
            timeout=DEADLINE_S,
            interval=0.02,
            what=what,
        )


# --------------------------------------------------------------------------- the clusters

#: simulator settings per standalone variant
SIM_VARIANTS: dict[str, dict[str, object]] = {
    "drover-name": {},
    "own-name": {"pipeline_app_name": OWN_NAME},
    # a cluster whose log4j hides INFO: drover_runtime's own line (stdout) is the link
    "own-name-quiet-log-runtime": {
        "pipeline_app_name": OWN_NAME,
        "log_app_id": False,
        "runtime_announces": True,
    },
    # INFO hidden and no runtime, but the pipeline kept Drover's name: the name hint links it
    "drover-name-quiet-log": {"log_app_id": False},
}
#: fake-pipeline environment per local / spark-submit variant
SUBMIT_VARIANTS: dict[str, dict[str, str]] = {
    "own-name": {"FAKE_APP_NAME": OWN_NAME},
    "own-name-runtime": {"FAKE_APP_NAME": OWN_NAME, "FAKE_RUNTIME": "1"},
}
PARAMS = (
    [pytest.param(("fake", "in-memory"), id="fake-in-memory")]
    + [pytest.param(("standalone", v), id=f"standalone-{v}") for v in SIM_VARIANTS]
    + [pytest.param(("local", v), id=f"local-{v}") for v in SUBMIT_VARIANTS]
    + [pytest.param(("spark-submit", "own-name"), id="spark-submit-own-name")]
    + [pytest.param(("yarn", "sim"), id="yarn-sim")]
)


@pytest.fixture(params=PARAMS)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    kind, variant = request.param
    if kind == "fake":
        yield _fake()
    elif kind == "standalone":
        yield from _standalone(variant)
    elif kind == "yarn":
        yield from _yarn(tmp_path)
    else:
        yield from _spark_submit(kind, variant, tmp_path)


def _fake() -> Cluster:
    """The reconciler's in-memory backend (tests/support/fakes.py) keeps the contract too; it
    has no nodes of its own, so a "fresh" instance is the same one."""
    fake = FakeBackend(start_running=True)

    def breaks() -> None:
        fake.unreachable = True

    def heals() -> None:
        fake.unreachable = False

    return Cluster(
        backend=fake,
        fresh=lambda: fake,
        entrypoint="/pipelines/p.py",
        env={},
        unknown_id="driver-999",
        knows_app_id=True,
        breaks=breaks,
        heals=heals,
    )


def _standalone(variant: str) -> Iterator[Cluster]:
    sim = SimCluster(app_start_delay=0.1, **SIM_VARIANTS[variant]).start()  # type: ignore[arg-type]
    made: list[StandaloneRestBackend] = []

    def new() -> StandaloneRestBackend:
        made.append(
            StandaloneRestBackend(
                sim.rest_url, sim.master_url, sim.ui_url, timeout_s=2.0, listing_ttl_s=0.0
            )
        )
        return made[-1]

    try:
        yield Cluster(
            backend=new(),
            fresh=new,
            entrypoint="/pipelines/p.py",
            env={},
            unknown_id="driver-20990101000000-9999",
            knows_app_id=True,
            breaks=lambda: sim.unreachable_for(600, mode="close"),
            heals=sim.reachable,
        )
    finally:
        for backend in made:
            backend.close()
        sim.stop()


def _yarn(tmp_path: Path) -> Iterator[Cluster]:
    rm = SimResourceManager(app_start_delay=0.1).start()
    conf = rm.write_conf(tmp_path / "hadoop-conf")
    home = fake_spark_submit(tmp_path / "spark")
    pipeline = tmp_path / "pipeline.py"
    pipeline.write_text("print('never run: the simulated ResourceManager runs nothing')\n")
    made: list[YarnBackend] = []

    def new() -> YarnBackend:
        made.append(YarnBackend(rm.url, conf, spark_home=home, work_dir=tmp_path / "work"))
        return made[-1]

    try:
        yield Cluster(
            backend=new(),
            fresh=new,
            entrypoint=str(pipeline),
            env={},
            unknown_id="application_1700000000000_9999",
            knows_app_id=True,
            breaks=rm.unreachable,
            heals=rm.reachable,
        )
    finally:
        for backend in made:
            backend.close()
        rm.stop()


def _spark_submit(kind: str, variant: str, tmp_path: Path) -> Iterator[Cluster]:
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text(FAKE_SPARK_SUBMIT)
    script.chmod(0o755)
    pipeline = tmp_path / "pipeline.py"
    pipeline.write_text(textwrap.dedent(FAKE_PIPELINE))
    runs = tmp_path / "runs"
    master = "local[2]" if kind == "local" else "spark://127.0.0.1:7999"
    made: list[LocalSparkSubmitBackend] = []

    def new() -> LocalSparkSubmitBackend:
        made.append(LocalSparkSubmitBackend(home, runs, master=master, kill_grace_s=1.0))
        return made[-1]

    aside = tmp_path / "runs.aside"

    def breaks() -> None:  # no spark-submit, and the run records' directory is not one
        script.rename(tmp_path / "spark-submit.aside")
        runs.rename(aside)
        runs.write_text("not a directory\n")

    def heals() -> None:
        (tmp_path / "spark-submit.aside").rename(script)
        runs.unlink()
        aside.rename(runs)

    env = SUBMIT_VARIANTS[variant]
    try:
        yield Cluster(
            backend=new(),
            fresh=new,
            entrypoint=str(pipeline),
            env=dict(env),
            unknown_id="local-1-1",
            knows_app_id=kind == "spark-submit" or "FAKE_RUNTIME" in env,
            breaks=breaks,
            heals=heals,
        )
    finally:
        for backend in made:
            backend.close()
        if runs.is_file():
            heals()
        signal_all(pids_with_env_prefix(f"DROVER_RUN_DIR={runs.resolve()}/".encode()))
        shutil.rmtree(home, ignore_errors=True)


# --------------------------------------------------------------------------- the contract


def test_submit_then_status_progresses_to_running_with_the_linked_app(cluster: Cluster) -> None:
    sub = cluster.backend.submit(cluster.request("orders", 1))
    assert sub.submission_id
    first = cluster.backend.status(sub.submission_id)
    assert first.state in (AppState.STARTING, AppState.RUNNING), first
    status = cluster.wait_status(sub.submission_id, cluster.running, "the app to run")
    if cluster.knows_app_id:
        assert status.app_id, status
        # the link holds: the same app id on every later call
        assert cluster.backend.status(sub.submission_id).app_id == status.app_id


def test_find_by_the_runs_tag_returns_that_submission_and_never_guesses(cluster: Cluster) -> None:
    tag = cluster.request("orders", 7).app_name
    assert cluster.backend.find(tag) is None  # nothing submitted yet
    sub = cluster.backend.submit(cluster.request("orders", 7))
    other = cluster.backend.submit(cluster.request("payments", 8))
    status = cluster.wait_status(sub.submission_id, cluster.running, "the app to run")
    found = cluster.backend.find(tag)
    assert found is not None and found.submission_id == sub.submission_id
    assert found.submission_id != other.submission_id
    if cluster.knows_app_id:
        assert found.app_id == status.app_id
    assert cluster.backend.find("drover:orders:70") is None
    assert cluster.backend.find("drover:unknown-job:1") is None
    # a crash between "submitted" and "recorded": a restarted node finds it by the tag alone
    restarted = cluster.fresh()
    again = restarted.find(tag)
    assert again is not None and again.submission_id == sub.submission_id
    if cluster.knows_app_id:
        adopted = wait_until(
            lambda: (s := restarted.status(sub.submission_id, tag)).app_id and s,
            timeout=DEADLINE_S,
            interval=0.02,
            what="the adopted run's app id",
        )
        assert adopted.app_id == status.app_id


def test_takeover_with_the_recorded_link_sees_the_same_application(cluster: Cluster) -> None:
    request = cluster.request("orders", 3)
    sub = cluster.backend.submit(request)
    status = cluster.wait_status(sub.submission_id, cluster.running, "the app to run")
    other_node = cluster.fresh()
    seen = other_node.status(sub.submission_id, request.app_name, status.app_id)
    assert seen.state is AppState.RUNNING
    assert seen.app_id == status.app_id


def test_kill_is_idempotent_and_confirmed(cluster: Cluster) -> None:
    sub = cluster.backend.submit(cluster.request("orders", 2))
    cluster.wait_status(sub.submission_id, cluster.running, "the app to run")
    cluster.backend.kill(sub.submission_id)
    cluster.backend.kill(sub.submission_id)  # a repeated kill is fine
    killed = cluster.wait_status(sub.submission_id, lambda s: s.state.is_terminal, "the kill")
    assert killed.state is AppState.KILLED, killed
    cluster.backend.kill(sub.submission_id)  # and so is a kill of an ended application
    assert cluster.backend.status(sub.submission_id).state is AppState.KILLED
    assert cluster.backend.find(cluster.request("orders", 2).app_name) is None


def test_status_of_an_unknown_submission_is_not_found(cluster: Cluster) -> None:
    assert cluster.backend.status(cluster.unknown_id).state is AppState.NOT_FOUND
    cluster.backend.kill(cluster.unknown_id)  # nothing to kill: no error


def test_an_unreachable_cluster_raises_cluster_unreachable(cluster: Cluster) -> None:
    sub = cluster.backend.submit(cluster.request("orders", 4))
    tag = cluster.request("orders", 4).app_name
    # running before the break: a spark-submit wrapper still starting when the script and the run
    # directory vanish would end by itself (exit 127, no exit_code written) -- not the case here
    cluster.wait_status(sub.submission_id, cluster.running, "the run RUNNING before the break")
    assert cluster.backend.probe().ok
    cluster.breaks()
    # a new instance (another node): nothing cached from before the break may answer for it
    # (the standalone backend reuses a listing for a moment after fetching it)
    backend = cluster.fresh()
    try:
        calls: list[Callable[[], object]] = [
            lambda: backend.submit(cluster.request("orders", 5)),
            lambda: backend.status(sub.submission_id),
            lambda: backend.find(tag),
            backend.list_applications,
            lambda: backend.kill(sub.submission_id),
        ]
        for call in calls:
            with pytest.raises(ClusterUnreachable):
                call()
        assert not backend.probe().ok
    finally:
        cluster.heals()
    assert cluster.backend.probe().ok
    assert cluster.backend.status(sub.submission_id).state.is_alive


def test_list_applications_shows_the_app_with_its_tag_and_job(cluster: Cluster) -> None:
    request = cluster.request("orders", 6)
    sub = cluster.backend.submit(request)
    status = cluster.wait_status(sub.submission_id, cluster.running, "the app to run")
    apps = {a.submission_id: a for a in cluster.backend.list_applications()}
    app = apps[sub.submission_id]
    assert app.app_name == request.app_name == "drover:orders:6"
    assert app.job == "orders" and parse_app_name(app.app_name) == ("orders", 6)
    assert app.state is AppState.RUNNING
    assert app.app_id == status.app_id
    # a fresh instance (another node) lists it the same way
    fresh = {a.submission_id: a for a in cluster.fresh().list_applications()}
    assert fresh[sub.submission_id].app_name == request.app_name


def test_a_change_feed_names_every_change_and_settles(cluster: Cluster) -> None:
    """A backend with a change feed (scheduler/backends/changes.py) names a submission whose
    status changed since the mark it answered before that status was asked, and, once nothing
    changes, names nothing (a backend without a feed has nothing to keep here)."""
    feed = feed_of(cluster.backend)
    if feed is None:
        assert not isinstance(cluster.backend, StandaloneRestBackend | FakeBackend)
        return
    sub = cluster.backend.submit(cluster.request("orders", 9))
    sid = sub.submission_id
    cluster.wait_status(sid, cluster.running, "the app to run")

    def settled() -> Mark | None:
        mark = feed.changes(None).mark
        cluster.backend.status(sid)
        answer = feed.changes(mark)
        return answer.mark if answer.changed is not None and sid not in answer.changed else None

    mark = wait_until(settled, timeout=DEADLINE_S, interval=0.02, what="a feed naming nothing")
    seen = cluster.backend.status(sid)  # asked after the mark
    assert seen.state is AppState.RUNNING
    cluster.backend.kill(sid)
    # from here on, whenever the status differs from the one seen after the last mark, the next
    # answer names the submission
    deadline = time.monotonic() + DEADLINE_S
    while True:
        assert time.monotonic() < deadline, f"the kill of {sid} was not confirmed"
        now = cluster.backend.status(sid)
        answer = feed.changes(mark)
        if now != seen:
            assert answer.changed is None or sid in answer.changed, (seen, now, answer)
        mark, seen = answer.mark, cluster.backend.status(sid)
        if seen.state.is_terminal:
            break
    assert seen.state is AppState.KILLED
    # a mark of another instance (another node) cannot tell
    other = feed_of(cluster.fresh())
    if other is not None and other is not feed:
        assert other.changes(mark).changed is None


def test_a_driver_log_reads_in_ranges_and_outlives_its_driver(cluster: Cluster) -> None:
    """Any byte range of a driver's log streams; the tail; nothing past the end; a fresh
    instance reads the same bytes; the log stays readable after the kill (a backend that reads
    no logs has nothing to keep here)."""
    logs = logs_of(cluster.backend)
    if logs is None:
        assert not isinstance(
            cluster.backend, StandaloneRestBackend | LocalSparkSubmitBackend | FakeBackend
        )
        return
    assert logs.log_streams and len(set(logs.log_streams)) == len(logs.log_streams)
    sub = cluster.backend.submit(cluster.request("orders", 11))
    sid, stream = sub.submission_id, logs.log_streams[0]
    cluster.wait_status(sid, cluster.running, "the app to run")
    whole = wait_until(
        lambda: c if (c := logs.driver_log(sid, stream, 0, 1 << 20)).data else None,
        timeout=DEADLINE_S,
        interval=0.05,
        what=f"the driver's {stream} to say something",
    )
    assert whole.stream == stream and whole.start == 0 and whole.size >= whole.end
    head = logs.driver_log(sid, stream, 0, 5)
    assert (head.start, head.data) == (0, whole.data[:5])
    rest = logs.driver_log(sid, stream, head.end, 1 << 20)
    assert rest.start == 5 and (head.data + rest.data).startswith(whole.data)
    tail = logs.driver_log(sid, stream, None, 7)  # the last 7 bytes of the log as it is now
    assert tail.end == tail.size and len(tail.data) == min(7, tail.size)
    later = logs.driver_log(sid, stream, 0, 1 << 20)  # a log only grows
    assert later.data[tail.start : tail.end] == tail.data
    past = logs.driver_log(sid, stream, later.size + 100, 10)
    assert past.data == b"" and past.start >= later.size
    for other in logs.log_streams[1:]:
        assert logs.driver_log(sid, other, 0, 10).stream == other
    fresh = logs_of(cluster.fresh())
    assert fresh is not None and fresh.driver_log(sid, stream, 0, 5).data == head.data
    with pytest.raises(InvalidInput):
        logs.driver_log(sid, "no-such-stream", 0, 10)
    with pytest.raises(NotFound):
        logs.driver_log(cluster.unknown_id, stream, 0, 10)
    cluster.backend.kill(sid)
    cluster.wait_status(sid, lambda s: s.state.is_terminal, "the kill")
    assert logs.driver_log(sid, stream, 0, 5).data == head.data
