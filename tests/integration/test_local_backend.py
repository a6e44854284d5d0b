"""LocalSparkSubmitBackend against a real spark-submit in local mode (pip pyspark).

Each local Spark start costs ~5-12 s on a 2-core machine, so the streaming scenarios share runs:
one test walks a windowed_counts run through submit -> RUNNING -> (adoption by a new backend
instance and a new process) -> batches -> kill, then resumes it from its checkpoint. Every wait
polls a condition against a deadline; the fixture finaliser SIGKILLs every process carrying one
of the test's run directories, even when a test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyspark
import pytest

from harness.procs import pids_with_env_prefix, processes, signal_all
from scheduler.backends.local import LocalSparkSubmitBackend
from scheduler.core.backend import AppState, AppStatus, SubmitRequest
from scheduler.core.errors import SubmissionRejected
from tests.support.drivers import log_tail

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "windowed_counts.py"
SPARK_HOME = Path(pyspark.__file__).parent
POLL_S = 0.2
START_TIMEOUT_S = 90.0  # JVM + SparkContext; slow when other Spark processes share the 2 cores
BATCH_TIMEOUT_S = 120.0
GONE_TIMEOUT_S = 30.0
KILL_GRACE_S = 3.0

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], timeout: float, what: str, detail: Callable[[], str] = str
) -> T:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{detail()}")
        time.sleep(POLL_S)


def session_processes(sid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process of session ``sid``, zombies included."""
    return [(p.pid, p.state) for p in processes() if p.session == sid]


def pids_with_run_dir_under(root: Path) -> list[int]:
    """Live processes whose DROVER_RUN_DIR lies under ``root`` (every process a run started)."""
    return pids_with_env_prefix(f"DROVER_RUN_DIR={root}/".encode())


def sid_of(submission_id: str) -> int:
    return int(submission_id.split("-")[1])


def batch_ids(output: Path) -> list[int]:
    if not output.is_dir():
        return []
    return sorted(int(p.name.split("=", 1)[1]) for p in output.glob("batch_id=*") if p.is_dir())


def partition_files(output: Path, batch_id: int) -> set[str]:
    part = output / f"batch_id={batch_id}"
    return {p.name for p in part.iterdir()} if part.is_dir() else set()


def committed_batches(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("SPARK_LOCAL_HOSTNAME", "127.0.0.1")
    runs = tmp_path / "runs"
    yield runs
    # teardown, also after failures: nothing a test started may outlive it
    signal_all(pids_with_run_dir_under(runs))
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while pids_with_run_dir_under(runs) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    assert not pids_with_run_dir_under(runs), "processes of the test survived SIGKILL"


@pytest.fixture
def make_backend(runs_dir: Path) -> Iterator[Callable[[], LocalSparkSubmitBackend]]:
    made: list[LocalSparkSubmitBackend] = []

    def make() -> LocalSparkSubmitBackend:
        backend = LocalSparkSubmitBackend(
            SPARK_HOME, runs_dir, master="local[2]", kill_grace_s=KILL_GRACE_S
        )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def streaming_request(tmp_path: Path, run_id: int) -> SubmitRequest:
    return SubmitRequest(
        job_name="counts",
        run_id=run_id,
        fencing_token=f"token-{run_id}",
        entrypoint=str(PIPELINE),
        args=["--output", str(tmp_path / "out"), "--trigger-seconds", "2"],
        checkpoint_location=str(tmp_path / "checkpoint"),
    )


def status_in_new_process(runs_dir: Path, submission_id: str, app_name: str) -> dict[str, Any]:
    """status() and find() from a fresh interpreter: what a restarted node would see."""
    script = textwrap.dedent(
        f"""
        import json
        from pathlib import Path
        from scheduler.backends.local import LocalSparkSubmitBackend
        backend = LocalSparkSubmitBackend(Path({str(SPARK_HOME)!r}), Path({str(runs_dir)!r}))
        status = backend.status({submission_id!r})
        found = backend.find({app_name!r})
        print(json.dumps({{"state": status.state.value, "app_id": status.app_id,
                          "found": found.submission_id if found else None}}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# --------------------------------------------------------------------------- scenarios


def test_streaming_run_lifecycle_and_resume(
    tmp_path: Path, runs_dir: Path, make_backend: Callable[[], LocalSparkSubmitBackend]
) -> None:
    """(a) submit -> RUNNING -> batches -> kill -> KILLED, (d) adoption, (b) resume."""
    backend = make_backend()
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = streaming_request(tmp_path, run_id=1)
    run_dir = runs_dir / "counts" / "1"

    t_submit = time.monotonic()
    submission = backend.submit(first)
    sid = sid_of(submission.submission_id)
    assert backend.status(submission.submission_id).state is AppState.STARTING
    record = json.loads((run_dir / "submission.json").read_text())
    assert record["submission_id"] == submission.submission_id
    assert record["app_name"] == "drover:counts:1"

    running = wait_for(
        lambda: (s := backend.status(submission.submission_id)).state is AppState.RUNNING and s,
        START_TIMEOUT_S,
        "RUNNING",
        lambda: log_tail(run_dir),
    )
    t_running = time.monotonic() - t_submit
    assert isinstance(running, AppStatus)
    # spark-submit's --name won, and the conf reached the driver
    log_text = (run_dir / "driver.log").read_text()
    assert "SparkContext: Submitted application: drover:counts:1" in log_text
    assert any((run_dir / "driver" / "local").glob("blockmgr-*")), "spark.local.dir is the run's"

    # (d) a new backend instance, and one in a new process, see the run and adopt it
    again = make_backend()
    assert again.status(submission.submission_id).state is AppState.RUNNING
    found = again.find(first.app_name)
    assert found is not None and found.submission_id == submission.submission_id
    listed = {a.submission_id: a for a in again.list_applications()}
    assert listed[submission.submission_id].state is AppState.RUNNING
    assert listed[submission.submission_id].app_name == first.app_name
    remote = status_in_new_process(runs_dir, submission.submission_id, first.app_name)
    assert remote["state"] == "RUNNING"
    assert remote["found"] == submission.submission_id

    # (a) at least two batches written, then the app id is known
    ids = wait_for(
        lambda: len(b := batch_ids(output)) >= 2 and b,
        BATCH_TIMEOUT_S,
        "two batch_id partitions",
        lambda: log_tail(run_dir),
    )
    t_batches = time.monotonic() - t_submit
    status = backend.status(submission.submission_id)
    assert status.state is AppState.RUNNING
    assert status.app_id is not None and status.app_id.startswith("local-")

    t_kill = time.monotonic()
    backend.kill(submission.submission_id)
    assert time.monotonic() - t_kill < 2.0, "kill() must not wait for the processes to end"
    killed = wait_for(
        lambda: (s := backend.status(submission.submission_id)).state.is_terminal and s,
        GONE_TIMEOUT_S,
        "the killed run to end",
        lambda: f"{session_processes(sid)}\n{log_tail(run_dir)}",
    )
    t_gone = time.monotonic() - t_kill
    assert isinstance(killed, AppStatus)
    assert killed.state is AppState.KILLED, killed
    assert killed.reason == "killed"
    assert pids_with_run_dir_under(run_dir.parent) == []
    wait_for(lambda: not session_processes(sid), GONE_TIMEOUT_S, "zombies to be reaped")
    backend.kill(submission.submission_id)  # idempotent
    assert backend.find(first.app_name) is None
    assert make_backend().status(submission.submission_id).state is AppState.KILLED

    # (b) a new run from the same checkpoint continues the batch ids
    last_run1 = max(batch_ids(output))
    committed = committed_batches(checkpoint)
    before = {b: partition_files(output, b) for b in batch_ids(output) if b <= committed[-1]}
    second = streaming_request(tmp_path, run_id=2)
    resumed = backend.submit(second)
    new_ids = wait_for(
        lambda: [b for b in batch_ids(output) if b > last_run1],
        START_TIMEOUT_S + BATCH_TIMEOUT_S,
        f"a batch above {last_run1} from the resumed run",
        lambda: log_tail(runs_dir / "counts" / "2"),
    )
    wait_for(
        lambda: max(committed_batches(checkpoint)) > committed[-1],
        BATCH_TIMEOUT_S,
        "the resumed run to commit a batch",
    )
    for batch_id, files in before.items():  # committed batches are never written again
        assert partition_files(output, batch_id) == files, batch_id
    assert partition_files(output, 0) == before.get(0, set())
    backend.kill(resumed.submission_id)
    wait_for(
        lambda: backend.status(resumed.submission_id).state is AppState.KILLED,
        GONE_TIMEOUT_S,
        "the resumed run to be killed",
    )
    print(
        f"\ntimings: submit->RUNNING {t_running:.1f} s, submit->2 batches {t_batches:.1f} s "
        f"(ids {ids}), kill->gone {t_gone:.2f} s, resumed batches {new_ids}"
    )


def test_exit_codes(tmp_path: Path, make_backend: Callable[[], LocalSparkSubmitBackend]) -> None:
    """(c) a pipeline that ends by itself is FINISHED; one that raises is FAILED with the code."""
    backend = make_backend()
    ok = tmp_path / "ok_pipeline.py"
    ok.write_text(
        textwrap.dedent(
            """
            import sys
            from pyspark.sql import SparkSession
            from drover_runtime import RunContext

            spark = SparkSession.builder.getOrCreate()
            ctx = RunContext.from_spark(spark)
            expected = ("tiny", "7", "tok-7", "/somewhere/ckpt")
            got = (ctx.job, ctx.run_id, ctx.fencing_token, ctx.checkpoint_location)
            assert got == expected, got
            assert spark.sparkContext.appName == "drover:tiny:7", spark.sparkContext.appName
            spark.stop()
            """
        )
    )
    failing = tmp_path / "failing_pipeline.py"
    failing.write_text('raise RuntimeError("boom from the failing pipeline")\n')

    done = backend.submit(
        SubmitRequest(
            job_name="tiny",
            run_id=7,
            fencing_token="tok-7",
            entrypoint=str(ok),
            checkpoint_location="/somewhere/ckpt",
            conf={"spark.app.name": "must-not-win"},
            py_files=[str(REPO / "pipelines" / "drover_runtime.py")],
        )
    )
    broken = backend.submit(
        SubmitRequest(job_name="broken", run_id=1, fencing_token="t", entrypoint=str(failing))
    )
    runs = make_backend().runs_dir
    finished = wait_for(
        lambda: (s := backend.status(done.submission_id)).state.is_terminal and s,
        START_TIMEOUT_S,
        "the tiny pipeline to end",
        lambda: log_tail(runs / "tiny" / "7"),
    )
    assert isinstance(finished, AppStatus)
    assert finished.state is AppState.FINISHED, (finished, log_tail(runs / "tiny" / "7"))
    assert finished.exit_code == 0
    assert finished.app_id is not None and finished.app_id.startswith("local-")

    failed = wait_for(
        lambda: (s := backend.status(broken.submission_id)).state.is_terminal and s,
        START_TIMEOUT_S,
        "the failing pipeline to end",
    )
    assert isinstance(failed, AppStatus)
    assert failed.state is AppState.FAILED
    assert failed.exit_code == 1
    assert failed.reason is not None and "exit code 1" in failed.reason
    assert "RuntimeError: boom from the failing pipeline" in failed.reason
    assert backend.find("drover:broken:1") is None
    with pytest.raises(SubmissionRejected, match="already submitted"):
        backend.submit(
            SubmitRequest(job_name="broken", run_id=1, fencing_token="t", entrypoint=str(failing))
        )
    with pytest.raises(SubmissionRejected, match="not a file"):
        backend.submit(
            SubmitRequest(job_name="broken", run_id=2, fencing_token="t", entrypoint="/nope.py")
        )
    states = {a.app_name: a.state for a in make_backend().list_applications()}
    assert states == {"drover:tiny:7": AppState.FINISHED, "drover:broken:1": AppState.FAILED}


def test_kill_escalates_to_sigkill(
    tmp_path: Path, runs_dir: Path, make_backend: Callable[[], LocalSparkSubmitBackend]
) -> None:
    """A driver that ignores SIGTERM keeps the run alive until the grace is over, then SIGKILL."""
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(
        textwrap.dedent(
            """
            import signal, sys, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print("stubborn: ignoring SIGTERM", file=sys.stderr, flush=True)
            time.sleep(600)
            """
        )
    )
    first = make_backend()
    sub = first.submit(
        SubmitRequest(job_name="stubborn", run_id=1, fencing_token="t", entrypoint=str(stubborn))
    )
    run_dir = runs_dir / "stubborn" / "1"
    wait_for(
        lambda: "ignoring SIGTERM" in (run_dir / "driver.log").read_text(),
        START_TIMEOUT_S,
        "the stubborn driver to start",
        lambda: log_tail(run_dir),
    )
    first.kill(sub.submission_id)
    first.close()  # forget the SIGKILL timer: a later kill() from another instance escalates
    t_kill = time.monotonic()
    # SIGTERM is ignored by the Python driver: the run stays alive through the grace
    assert first.status(sub.submission_id).state.is_alive
    other = make_backend()
    other.kill(sub.submission_id)  # still within the grace: SIGTERM again
    assert other.status(sub.submission_id).state.is_alive

    def kill_and_check() -> bool:
        other.kill(sub.submission_id)
        return other.status(sub.submission_id).state is AppState.KILLED

    wait_for(kill_and_check, KILL_GRACE_S + GONE_TIMEOUT_S, "escalation to SIGKILL")
    assert time.monotonic() - t_kill >= KILL_GRACE_S - 0.5
    wait_for(lambda: not session_processes(sid_of(sub.submission_id)), GONE_TIMEOUT_S, "reaping")


def test_unknown_submissions(
    runs_dir: Path,
    make_backend: Callable[[], LocalSparkSubmitBackend],
    foreign_session: tuple[int, int],
) -> None:
    """(e) NOT_FOUND for ids this backend never issued; kill() of them is a no-op."""
    backend = make_backend()
    assert backend.status("local-999999999-1").state is AppState.NOT_FOUND
    assert backend.status("driver-20260101-0001").state is AppState.NOT_FOUND
    # a live session that is not a Drover run is not ours either
    sid, starttime = foreign_session
    assert backend.status(f"local-{sid}-{starttime}").state is AppState.NOT_FOUND
    backend.kill(f"local-{sid}-{starttime}")  # must not be signalled (checked by the fixture)
    backend.kill("local-999999999-1")
    assert backend.find("drover:nothing:1") is None
    assert backend.list_applications() == []
    assert backend.probe().ok
    broken = LocalSparkSubmitBackend(runs_dir / "no-spark", runs_dir)
    assert not broken.probe().ok


def test_the_driver_sees_a_declared_environment_not_the_nodes(
    tmp_path: Path,
    make_backend: Callable[[], LocalSparkSubmitBackend],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hostile pipeline looks for the node's secrets from inside a real running driver: it
    finds its job's variables and its own run identity, never DROVER_DATABASE_URL, the
    deployment secret or anything else of the node's environment; and its fencing token is on
    no command line of the run's processes."""
    monkeypatch.setenv("DROVER_DATABASE_URL", "mysql+pymysql://drover:s3cret@db/drover")
    monkeypatch.setenv("DROVER_DEPLOYMENT_SECRET", "node-secret-" + "x" * 30)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    backend = make_backend()
    spy = tmp_path / "spy_pipeline.py"
    seen = tmp_path / "seen.json"
    spy.write_text(
        textwrap.dedent(
            f"""
            import json, os, pathlib
            from pyspark.sql import SparkSession

            spark = SparkSession.builder.getOrCreate()
            mine = os.getpid()
            cmdlines = []
            for proc in pathlib.Path("/proc").iterdir():
                if proc.name.isdigit():
                    try:
                        env = (proc / "environ").read_bytes()
                        if b"DROVER_RUN_DIR=" in env:
                            line = (proc / "cmdline").read_bytes()
                            cmdlines.append(line.decode(errors="replace"))
                    except OSError:
                        pass
            pathlib.Path({str(seen)!r}).write_text(
                json.dumps({{"env": dict(os.environ), "cmdlines": cmdlines}})
            )
            spark.stop()
            """
        )
    )
    done = backend.submit(
        SubmitRequest(
            job_name="spy",
            run_id=1,
            fencing_token="tok-spy-0123456789",
            entrypoint=str(spy),
            env={"JOB_SETTING": "mine"},
        )
    )
    finished = wait_for(
        lambda: (s := backend.status(done.submission_id)).state.is_terminal and s,
        START_TIMEOUT_S,
        "the spy pipeline to end",
        lambda: log_tail(backend.runs_dir / "spy" / "1"),
    )
    assert isinstance(finished, AppStatus)
    assert finished.state is AppState.FINISHED, log_tail(backend.runs_dir / "spy" / "1")
    report = json.loads(seen.read_text())
    env = report["env"]
    assert env["JOB_SETTING"] == "mine"
    assert env["DROVER_FENCING_TOKEN"] == "tok-spy-0123456789" and env["DROVER_JOB"] == "spy"
    for secret in ("DROVER_DATABASE_URL", "DROVER_DEPLOYMENT_SECRET", "AWS_SECRET_ACCESS_KEY"):
        assert secret not in env, secret
    assert not any("s3cret" in v or "node-secret" in v for v in env.values())
    assert report["cmdlines"], "the spy saw no process of its run"
    assert not any("tok-spy-0123456789" in c for c in report["cmdlines"])
    submission = (backend.runs_dir / "spy" / "1" / "submission.json").read_text()
    assert "tok-spy-0123456789" not in submission
