"""Drivers of local and spark-submit clusters run as their team's unprivileged Unix user
(``DROVER_DRIVER_USER``, a template with ``{team}``), not as the node's user.

A fake ``spark-submit`` (it runs the pipeline with ``$PYSPARK_PYTHON``, no JVM: ~1 s) starts a
hostile pipeline of team beta that tries to read the node's environment, its store file, its
data directory and another team's run log and checkpoint, and to write there: every attempt is
denied by Unix permissions, while its own checkpoint directory (handed over by the node) is its
own. The same with real Spark is ``tests/e2e/test_driver_isolation_e2e.py``.
"""

from __future__ import annotations

import json
import os
import stat
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.procs import pids_with_env_prefix, signal_all
from scheduler.backends.local import LocalSparkSubmitBackend
from scheduler.core.backend import AppState, SubmitRequest
from scheduler.core.errors import SubmissionRejected
from tests.conftest import wait_until
from tests.support.driver_users import TEMPLATE, open_directory, team_user
from tests.support.nodes import FAKE_SPARK_SUBMIT

pytestmark = pytest.mark.integration

#: a Python every user may run (the node's own may live under a private home)
SYSTEM_PYTHON = "/usr/bin/python3.11"

BENIGN = """\
import os, pathlib, sys
ckpt = pathlib.Path(os.environ["DROVER_CHECKPOINT_LOCATION"].removeprefix("file://"))
(ckpt / "offsets").mkdir(exist_ok=True)
(ckpt / "offsets" / "0").write_text("batch 0")
print("wrote", ckpt, "as", os.getuid(), flush=True)
"""

HOSTILE = """\
import json, os, sys
node_pid, data, store, a_log, a_ckpt = sys.argv[1:6]
own = os.environ["DROVER_CHECKPOINT_LOCATION"].removeprefix("file://")

def attempt(action):
    try:
        action()
        return "allowed"
    except PermissionError:
        return "denied"
    except OSError as exc:
        return f"error: {exc}"

def write(path):
    with open(path, "w") as fh:
        fh.write("x")

report = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
report["node_environ"] = attempt(lambda: open(f"/proc/{node_pid}/environ", "rb").read())
report["store_file"] = attempt(lambda: open(store, "rb").read())
report["data_dir"] = attempt(lambda: os.listdir(data))
report["runs_dir"] = attempt(lambda: os.listdir(os.path.join(data, "runs")))
report["other_log"] = attempt(lambda: open(a_log, "rb").read())
report["other_checkpoint_list"] = attempt(lambda: os.listdir(a_ckpt))
report["other_checkpoint_read"] = attempt(
    lambda: open(os.path.join(a_ckpt, "offsets", "0"), "rb").read()
)
report["other_checkpoint_write"] = attempt(lambda: write(os.path.join(a_ckpt, "intruder")))
report["beside_other_checkpoint"] = attempt(
    lambda: os.mkdir(os.path.join(os.path.dirname(a_ckpt), "intruder"))
)
report["checkpoint_root"] = attempt(
    lambda: os.mkdir(os.path.join(os.path.dirname(os.path.dirname(a_ckpt)), "squat"))
)
report["own_checkpoint"] = attempt(lambda: write(os.path.join(own, "mine")))
report["secrets_in_env"] = sorted(
    k for k in os.environ if k in ("DROVER_DEPLOYMENT_SECRET", "DROVER_DATABASE_URL")
)
report["home"] = os.environ.get("HOME")
print("REPORT " + json.dumps(report), flush=True)
"""


@pytest.fixture
def base() -> Iterator[Path]:
    with open_directory() as path:
        yield path


@pytest.fixture
def backend(base: Path) -> Iterator[LocalSparkSubmitBackend]:
    home = base / "spark"
    (home / "bin").mkdir(parents=True)
    home.chmod(0o755)
    (home / "bin").chmod(0o755)
    script = home / "bin" / "spark-submit"
    script.write_text(FAKE_SPARK_SUBMIT)
    script.chmod(0o755)
    data = base / "data"
    data.mkdir(mode=0o711)
    backend = LocalSparkSubmitBackend(
        home, data / "runs", python=SYSTEM_PYTHON, driver_user=TEMPLATE, kill_grace_s=0.5
    )
    yield backend
    backend.close()
    signal_all(pids_with_env_prefix(f"DROVER_RUN_DIR={backend.runs_dir}/".encode()))


def pipeline(base: Path, name: str, body: str) -> str:
    folder = base / "pipelines"
    folder.mkdir(mode=0o755, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    path.chmod(0o644)
    return str(path)


def submit(
    backend: LocalSparkSubmitBackend, job: str, team: str, entrypoint: str, **extra: object
) -> str:
    """Run 1 of ``job`` of ``team``: its submission id."""
    request = SubmitRequest(
        job_name=job,
        team=team,
        run_id=1,
        fencing_token=f"tok-{job}",
        entrypoint=entrypoint,
        **extra,  # type: ignore[arg-type]
    )
    return backend.submit(request).submission_id


def finished(backend: LocalSparkSubmitBackend, submission_id: str) -> None:
    status = wait_until(
        lambda: (s := backend.status(submission_id)).state.is_terminal and s,
        timeout=20,
        interval=0.05,
        what="the hostile driver to end",
    )
    assert status.state is AppState.FINISHED, status


def test_a_driver_runs_as_its_teams_user_and_reaches_nothing_of_the_node(
    base: Path, backend: LocalSparkSubmitBackend
) -> None:
    alpha, beta = team_user("alpha"), team_user("beta")
    data = base / "data"
    store = data / "drover.db"
    store.write_text("token hashes, fencing tokens")
    store.chmod(0o600)
    root = data / "checkpoints" / "local"
    a_ckpt = root / "a-job" / "checkpoint"

    a = submit(
        backend,
        "a-job",
        "alpha",
        pipeline(base, "benign", BENIGN),
        checkpoint_location=f"file://{a_ckpt}",
    )
    finished(backend, a)
    info = a_ckpt.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (alpha.pw_uid, 0o700)
    assert (a_ckpt / "offsets" / "0").stat().st_uid == alpha.pw_uid  # the driver wrote it
    a_log = backend.runs_dir / "a-job" / "1" / "driver.log"
    assert f"as {alpha.pw_uid}" in a_log.read_text()

    b = submit(
        backend,
        "b-job",
        "beta",
        pipeline(base, "hostile", HOSTILE),
        args=[str(os.getpid()), str(data), str(store), str(a_log), str(a_ckpt)],
        checkpoint_location=f"file://{root}/b-job/checkpoint",
    )
    finished(backend, b)
    log = (backend.runs_dir / "b-job" / "1" / "driver.log").read_text()
    report = json.loads(next(line for line in log.splitlines() if line.startswith("REPORT "))[7:])
    assert (report["uid"], report["gid"]) == (beta.pw_uid, beta.pw_gid)
    assert report["groups"] in ([], [beta.pw_gid])  # none of the node's groups
    for what in (
        "node_environ",
        "store_file",
        "data_dir",
        "runs_dir",
        "other_log",
        "other_checkpoint_list",
        "other_checkpoint_read",
        "other_checkpoint_write",
        "beside_other_checkpoint",
        "checkpoint_root",
    ):
        assert report[what] == "denied", (what, report)
    assert report["own_checkpoint"] == "allowed"
    assert report["secrets_in_env"] == []
    assert report["home"] == str(backend.runs_dir / "b-job" / "1" / "driver")
    assert sorted(p.name for p in a_ckpt.iterdir()) == ["offsets"]  # nothing was added

    # the node's files: nothing another user may read
    for path in (backend.runs_dir, backend.runs_dir / "b-job" / "1"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o711, path
    for name in ("driver.log", "submission.json"):
        mode = stat.S_IMODE((backend.runs_dir / "b-job" / "1" / name).stat().st_mode)
        assert mode == 0o600, name


def test_a_team_without_a_user_is_refused(base: Path, backend: LocalSparkSubmitBackend) -> None:
    entry = pipeline(base, "benign", BENIGN)
    for team in ("no-such-team-x", "", "../etc", "a b"):
        with pytest.raises(SubmissionRejected, match="user"):
            submit(backend, "lonely", team, entry)
    assert not (backend.runs_dir / "lonely" / "1").exists()


FORGER = """\
import os, subprocess, sys
for target, name in zip(sys.argv[1::2], sys.argv[2::2]):
    env = {"DROVER_RUN_DIR": target, "DROVER_APP_NAME": name, "PATH": "/usr/bin:/bin"}
    forged = subprocess.Popen(["/bin/sleep", "60"], env=env, start_new_session=True)
    print("FORGED", forged.pid, flush=True)
"""


def test_a_driver_cannot_pass_its_processes_off_as_another_runs(
    base: Path, backend: LocalSparkSubmitBackend
) -> None:
    """Drover finds a run whose submission was never recorded by the ``DROVER_RUN_DIR`` its
    processes carry. A driver of team beta starts processes that claim team alpha's runs (one
    that exists, one never submitted): they are never taken for them, so alpha's job is never
    adopted onto beta's process, nor killed through it."""
    team_user("alpha"), team_user("beta")
    finished(backend, submit(backend, "a-job", "alpha", pipeline(base, "benign", BENIGN)))
    runs = backend.runs_dir
    claims = [
        str(runs / "a-job" / "1"),
        "drover:a-job:1",
        str(runs / "a-job" / "2"),
        "drover:a-job:2",
    ]
    finished(
        backend, submit(backend, "b-job", "beta", pipeline(base, "forger", FORGER), args=claims)
    )
    log = (runs / "b-job" / "1" / "driver.log").read_text()
    forged = [int(line.split()[1]) for line in log.splitlines() if line.startswith("FORGED ")]
    assert len(forged) == 2
    try:
        assert backend.find("drover:a-job:1") is None
        assert backend.find("drover:a-job:2") is None
        listed = {app.app_name for app in backend.list_applications() if app.state.is_alive}
        assert not listed & {"drover:a-job:1", "drover:a-job:2"}
    finally:
        signal_all(forged)
