"""LocalSparkSubmitBackend's process handling against a fake spark-submit (no JVM, ~1 s total).

The fake ``$SPARK_HOME/bin/spark-submit`` records its arguments, skips the options and runs the
entry point with ``$PYSPARK_PYTHON`` as a child (like the real one, whose JVM runs the Python
driver as a child), so the session holds three processes: wrapper, "spark-submit", "driver".
The real thing is covered by tests/integration/test_local_backend.py.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from harness.procs import pids_with_env_prefix, session_pids, signal_all
from scheduler.backends.local import (
    INDEX_DIR,
    LocalSparkSubmitBackend,
    _describe_exit,
    _last_error_line,
    _LogScan,
)
from scheduler.core.backend import AppState, Submission, SubmitRequest
from scheduler.core.errors import ClusterUnreachable, SubmissionRejected
from tests.conftest import wait_until

T = TypeVar("T")

FAKE_SPARK_SUBMIT = """\
#!/bin/sh
printf '%s\\n' "$@" > argv.txt
while [ $# -gt 0 ]; do
  case "$1" in
    --*) shift 2 ;;
    *) break ;;
  esac
done
"$PYSPARK_PYTHON" "$@"
"""

STARTED = "26/11/21 22:40:57 INFO BlockManager: Initialized BlockManager: BlockManagerId(driver, x)"


def wait_for(condition: Callable[[], T | None], what: str, timeout: float = 10.0) -> T:
    """The first truthy answer of ``condition``, asked every 20 ms (these drivers are quick)."""
    return wait_until(condition, timeout=timeout, interval=0.02, what=what)


@pytest.fixture
def spark_home(tmp_path: Path) -> Path:
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text(FAKE_SPARK_SUBMIT)
    script.chmod(0o755)
    return home


@pytest.fixture
def backend(spark_home: Path, tmp_path: Path) -> Iterator[LocalSparkSubmitBackend]:
    runs = tmp_path / "runs"
    backend = LocalSparkSubmitBackend(spark_home, runs, kill_grace_s=0.5)
    yield backend
    backend.close()
    signal_all(pids_with_env_prefix(f"DROVER_RUN_DIR={backend.runs_dir}/".encode()))


def pipeline(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def request(entrypoint: str, run_id: int = 1, **kwargs: object) -> SubmitRequest:
    return SubmitRequest(
        job_name="job",
        run_id=run_id,
        fencing_token=f"tok{run_id}",
        entrypoint=entrypoint,
        checkpoint_location="/ckpt",
        **kwargs,  # type: ignore[arg-type]
    )


def submit_stubborn(backend: LocalSparkSubmitBackend, tmp_path: Path, body: str) -> Submission:
    """Submit a driver that ignores SIGTERM and then runs ``body`` (which prints ``ready`` once
    it is); return once it has said so."""
    ignores_sigterm = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    entry = pipeline(tmp_path, "stubborn", ignores_sigterm + textwrap.dedent(body))
    sub = backend.submit(request(entry))
    log = backend.runs_dir / "job" / "1" / "driver.log"
    wait_for(lambda: "ready" in log.read_text(), "the driver to be ready")
    return sub


def test_lifecycle_running_then_killed(backend: LocalSparkSubmitBackend, tmp_path: Path) -> None:
    entry = pipeline(
        tmp_path,
        "forever",
        f"""
        import os, sys, time
        print({STARTED!r}, file=sys.stderr, flush=True)
        print("drover-runtime: started app_id=local-1795300856922 job=job run_id=1", flush=True)
        print("env", os.environ["DROVER_JOB"], os.environ["DROVER_FENCING_TOKEN"], flush=True)
        print("fence", os.environ["DROVER_FENCE_URLS"], flush=True)
        time.sleep(600)
        """,
    )
    sub = backend.submit(
        request(
            entry,
            conf={"spark.app.name": "nope", "a.b": "c"},
            args=["x"],
            py_files=["/p/drover_runtime.py", "/p/extra.py"],
            fence_urls=["http://127.0.0.1:1", "http://127.0.0.1:2"],
        )
    )
    sid = int(sub.submission_id.split("-")[1])
    status = wait_for(
        lambda: (s := backend.status(sub.submission_id)).app_id and s, "the application id"
    )
    assert status.state is AppState.RUNNING
    assert status.app_id == "local-1795300856922"

    run_dir = backend.runs_dir / "job" / "1"
    argv = (run_dir / "driver" / "argv.txt").read_text().splitlines()
    assert argv[:4] == ["--master", "local[2]", "--name", "drover:job:1"]
    assert argv[4:6] == ["--py-files", "/p/drover_runtime.py,/p/extra.py"]
    assert "spark.drover.fenceUrls=http://127.0.0.1:1,http://127.0.0.1:2" in argv
    assert "a.b=c" in argv
    assert not any("tok1" in a for a in argv)  # the token is never on a command line
    assert "spark.drover.checkpointLocation=/ckpt" in argv
    assert "spark.driver.bindAddress=127.0.0.1" in argv
    assert not any(a.startswith("spark.app.name=") for a in argv)
    assert argv[-2:] == [entry, "x"]
    assert "env job tok1" in (run_dir / "driver.log").read_text()
    assert "fence http://127.0.0.1:1,http://127.0.0.1:2" in (run_dir / "driver.log").read_text()
    assert (backend.runs_dir / INDEX_DIR / sub.submission_id).is_file()

    other = LocalSparkSubmitBackend(backend.spark_home, backend.runs_dir)
    assert other.status(sub.submission_id).state is AppState.RUNNING
    found = other.find("drover:job:1")
    assert found is not None and found.submission_id == sub.submission_id
    assert [a.state for a in other.list_applications()] == [AppState.RUNNING]

    assert len(session_pids(sid)) == 3  # wrapper, fake spark-submit, driver
    backend.kill(sub.submission_id)
    status = wait_for(
        lambda: (s := backend.status(sub.submission_id)).state.is_terminal and s,
        "the killed driver to end",
    )
    assert status.state is AppState.KILLED and status.reason == "killed"
    assert session_pids(sid) == []
    assert other.find("drover:job:1") is None
    backend.kill(sub.submission_id)  # idempotent
    with pytest.raises(SubmissionRejected):
        backend.submit(request(entry))


def test_finished_and_failed(backend: LocalSparkSubmitBackend, tmp_path: Path) -> None:
    ok = backend.submit(request(pipeline(tmp_path, "ok", "print('fine')\n"), run_id=1))
    bad = backend.submit(
        request(pipeline(tmp_path, "bad", "raise ValueError('bad input')\n"), run_id=2)
    )
    done = wait_for(
        lambda: (s := backend.status(ok.submission_id)).state.is_terminal and s,
        "the good driver to end",
    )
    assert done.state is AppState.FINISHED and done.exit_code == 0
    failed = wait_for(
        lambda: (s := backend.status(bad.submission_id)).state.is_terminal and s,
        "the failing driver to end",
    )
    assert failed.state is AppState.FAILED and failed.exit_code == 1
    assert failed.reason == "exit code 1: ValueError: bad input"


@pytest.mark.serial  # measures time: not beside the e2e tests at nice 19
def test_sigterm_ignored_escalates_and_reaches_other_process_groups(
    backend: LocalSparkSubmitBackend, tmp_path: Path
) -> None:
    sub = submit_stubborn(
        backend,
        tmp_path,
        """
        import subprocess, sys, time
        # like PySpark's worker daemon: a child in its own process group, same session
        child = subprocess.Popen(
            [sys.executable, "-c", "import signal, time; "
             "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
            process_group=0,
        )
        print("ready", child.pid, flush=True)
        time.sleep(600)
        """,
    )
    sid = int(sub.submission_id.split("-")[1])
    assert len(session_pids(sid)) == 4
    started = time.monotonic()
    backend.kill(sub.submission_id)
    assert time.monotonic() - started < 0.5
    assert backend.status(sub.submission_id).state is AppState.STARTING  # SIGTERM ignored
    wait_for(
        lambda: backend.status(sub.submission_id).state is AppState.KILLED,
        "the driver to be killed",
    )
    assert time.monotonic() - started >= 0.5  # only the grace-period SIGKILL ends it
    assert session_pids(sid) == []


def test_repeated_kill_from_a_new_instance_escalates(
    backend: LocalSparkSubmitBackend, tmp_path: Path
) -> None:
    sub = submit_stubborn(
        backend,
        tmp_path,
        """
        import time
        print("ready", flush=True)
        time.sleep(600)
        """,
    )
    backend.kill(sub.submission_id)
    backend.close()  # this node "dies": its SIGKILL timer is gone
    other = LocalSparkSubmitBackend(backend.spark_home, backend.runs_dir, kill_grace_s=0.5)
    try:
        time.sleep(0.6)  # let the grace period pass (no state to poll for)
        assert other.status(sub.submission_id).state.is_alive
        other.kill(sub.submission_id)  # past the grace recorded on disk: SIGKILL
        wait_for(
            lambda: other.status(sub.submission_id).state is AppState.KILLED,
            "the driver to be killed",
            5.0,
        )
    finally:
        other.close()


def test_unknown_and_foreign_ids(
    backend: LocalSparkSubmitBackend, foreign_session: tuple[int, int]
) -> None:
    assert backend.status("nonsense").state is AppState.NOT_FOUND
    assert backend.status("local-4194303-1").state is AppState.NOT_FOUND
    sid, starttime = foreign_session
    foreign = f"local-{sid}-{starttime}"
    assert backend.status(foreign).state is AppState.NOT_FOUND
    backend.kill(foreign)  # must not signal a session this backend did not start (fixture checks)


def test_submit_errors(backend: LocalSparkSubmitBackend, tmp_path: Path) -> None:
    with pytest.raises(SubmissionRejected):
        backend.submit(request(str(tmp_path / "missing.py")))
    with pytest.raises(SubmissionRejected):
        backend.submit(
            SubmitRequest(job_name="../x", run_id=1, fencing_token="t", entrypoint=__file__)
        )
    broken = LocalSparkSubmitBackend(tmp_path / "nowhere", backend.runs_dir)
    with pytest.raises(ClusterUnreachable):
        broken.submit(request(__file__))
    assert not broken.probe().ok and backend.probe().ok


def test_stale_run_dir_is_reused(backend: LocalSparkSubmitBackend, tmp_path: Path) -> None:
    stale = backend.runs_dir / "job" / "1"
    stale.mkdir(parents=True)
    (stale / "log4j2.properties").write_text("left by a submit that died\n")
    sub = backend.submit(request(pipeline(tmp_path, "ok", "print('fine')\n")))
    wait_for(
        lambda: backend.status(sub.submission_id).state is AppState.FINISHED, "the driver to finish"
    )


def test_log_parsing(tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    log.write_bytes(b"noise local-12-34\n" + STARTED.encode() + b"\npartial local-1795300856922")
    scan = _LogScan()
    scan.feed(log)
    assert scan.started and scan.app_id is None  # the last line is not complete yet
    with open(log, "ab") as fh:
        fh.write(b" more\n")
    scan.feed(log)
    assert scan.app_id == "local-1795300856922" and scan.done

    log.write_text(
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "pyspark.errors.exceptions.captured.StreamingQueryException: [STREAM_FAILED] boom\n"
        "26/11/21 22:41:16 INFO SparkContext: Successfully stopped SparkContext\n"
    )
    assert _last_error_line(log) == (
        "pyspark.errors.exceptions.captured.StreamingQueryException: [STREAM_FAILED] boom"
    )
    log.write_text("26/11/21 22:41:16 ERROR Executor: it broke\nbye\n")
    assert _last_error_line(log) == "26/11/21 22:41:16 ERROR Executor: it broke"
    assert _describe_exit(143) == "exit code 143 (SIGTERM)"
    assert _describe_exit(2) == "exit code 2"


def test_conf_args_and_environment_never_choose_the_drivers_executables(
    backend: LocalSparkSubmitBackend, tmp_path: Path
) -> None:
    """The node's Python runs every driver: a conf naming another one (a job stored before the
    policy refused it, say) is overridden, arguments go to the pipeline only, and an environment
    that would choose what runs is refused."""
    entry = pipeline(tmp_path, "ok", "print('fine')\n")
    crafted = ["-exec", "/bin/sh", "-c", "id > /tmp/pwned", ";", "--conf", "spark.x=y"]
    sub = backend.submit(
        request(
            entry,
            conf={
                "spark.pyspark.driver.python": "/usr/bin/find",
                "spark.pyspark.python": "/usr/bin/find",
            },
            args=crafted,
        )
    )
    wait_for(
        lambda: backend.status(sub.submission_id).state is AppState.FINISHED, "the driver to finish"
    )
    argv = (backend.runs_dir / "job" / "1" / "driver" / "argv.txt").read_text().splitlines()
    assert f"spark.pyspark.driver.python={backend.python}" in argv
    assert f"spark.pyspark.python={backend.python}" in argv
    assert not any("/usr/bin/find" in a for a in argv)
    assert argv[-len(crafted) - 1 :] == [entry, *crafted]  # after the pipeline: its arguments
    for name in ("LD_PRELOAD", "PYTHONPATH", "JAVA_TOOL_OPTIONS", "SPARK_SUBMIT_OPTS"):
        with pytest.raises(SubmissionRejected, match=name):
            backend.submit(request(entry, run_id=2, env={name: "/tmp/evil"}))
