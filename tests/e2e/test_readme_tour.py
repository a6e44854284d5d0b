"""The README's API tour runs verbatim against a fresh node, so it stays true.

The test reads the fenced ``sh`` blocks of the README's "API tour" section. The first block
starts the fresh node (the embedded default: one node, SQLite under ``DROVER_DATA_DIR``, no
ZooKeeper, Spark local mode): its lines run in bash, except the line that ends with ``&``,
which the test starts itself (so it knows the node's PID and stops it at the end), then waits
for ``/readyz`` as a reader would. The other blocks run as one bash script, in the checkout,
with ``set -e``: every ``drover`` line must succeed, and every ``curl`` must answer 2xx (the
test puts a ``curl`` in front of the real one that records each answer's status).

The only things the test chooses are the reader's environment: a scratch ``HOME`` (the tour
keeps the admin token in ``~/.drover-admin``), a scratch ``DROVER_DATA_DIR``, a free port
(``DROVER_API_PORT``, ``DROVER_URL``: the tour defaults them to 8000).

The README's CLI block ("Getting a first credential, and the CLI") runs verbatim too, against
a fresh node of its own (migrated and started as the tour's first block does, but with no admin
yet: the block makes the first one itself).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness import http
from harness.nodes import free_port
from harness.procs import kill_groups, pids_with_cmdline, stop_session
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tour_blocks(readme: str) -> list[str]:
    section = readme.split("\n## API tour\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def command_of(line: str) -> str:
    """A line without its comment."""
    return line.split(" #", 1)[0].rstrip()


def test_the_tour_has_a_node_block_and_checks_its_etag() -> None:
    blocks = tour_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 2
    assert sum(command_of(line).endswith("&") for line in blocks[0].splitlines()) == 1
    tour = "\n".join(blocks[1:])
    assert "/path/to" not in tour and 'If-Match: "3"' not in tour
    assert "If-Match: $ETAG" in tour


CURL = """#!{python}
# the real curl, with each answer's status, method and URL appended to $TOUR_CURL_LOG (added to
# the caller's own --write-out, if any: curl keeps only the last one)
import os, sys
mark = "%{{stderr}}CURL %{{http_code}} %{{method}} %{{url_effective}}\\n"
args = sys.argv[1:]
for i, arg in enumerate(args[:-1]):
    if arg in ("-w", "--write-out"):
        args[i + 1] += mark
        break
else:
    args += ["-w", mark]
log = os.open(os.environ["TOUR_CURL_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
os.dup2(log, 2)
os.execv({real!r}, [{real!r}, *args])
"""


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a reader on this machine (scratch HOME and data dir, a free port)."""
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    shim = tmp_path / "bin"
    shim.mkdir()
    real = subprocess.run(["sh", "-c", "command -v curl"], capture_output=True, text=True)
    (shim / "curl").write_text(CURL.format(python=sys.executable, real=real.stdout.strip()))
    (shim / "curl").chmod(0o755)
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("DROVER_") or key.startswith("DROVER_TEST_")
    }
    env |= {
        "HOME": str(home),
        "PATH": f"{shim}:{BIN}:{env.get('PATH', '')}",
        "DROVER_DATA_DIR": str(data),
        "DROVER_API_PORT": str(port),
        "DROVER_URL": f"http://127.0.0.1:{port}",
        "DROVER_RECONCILE_INTERVAL": "1",
        "TOUR_CURL_LOG": str(tmp_path / "curl.log"),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }
    yield env
    kill_groups(p for p in pids_with_cmdline(str(data).encode()) if p != os.getpid())


def test_the_readme_api_tour_runs_verbatim(reader: dict[str, str], tmp_path: Path) -> None:
    node_block, *tour = tour_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    background = [line for line in node_block.splitlines() if command_of(line).endswith("&")]
    assert len(background) == 1, node_block
    setup = node_block.replace(background[0], "")
    run = subprocess.run(
        ["bash", "-e", "-c", setup],
        cwd=ROOT,
        env=reader,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    start = command_of(background[0]).removesuffix("&")
    node = subprocess.Popen(
        ["bash", "-c", f"exec {start}"],
        cwd=ROOT,
        env=reader,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = Path(reader["DROVER_DATA_DIR"]) / "node.log"
    try:

        def ready() -> bool:
            assert node.poll() is None, log.read_text()[-3000:] if log.exists() else ""
            try:
                return http.get(reader["DROVER_URL"] + "/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=120, interval=0.5, what="the tour's node to be ready")
        script = "shopt -s expand_aliases\nset -e -o pipefail\n" + "\n".join(tour)
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT,
            env=reader,
            capture_output=True,
            text=True,
            timeout=240,
        )
        calls = Path(reader["TOUR_CURL_LOG"]).read_text().splitlines()
        answers = [line.split(" ", 3)[1:] for line in calls if line.startswith("CURL ")]
        context = (
            f"exit {result.returncode}\n--- stderr:\n{result.stderr[-4000:]}\n--- curl:\n"
            + "\n".join(calls[-40:])
            + (f"\n--- node log:\n{log.read_text()[-3000:]}" if log.exists() else "")
        )
        assert result.returncode == 0, context
        failed = [a for a in answers if not a[0].startswith("2")]
        assert not failed, context
        assert len(answers) >= 40, context
        print(f"tour: {len(answers)} curl calls, all 2xx")
    finally:
        stop_session(node)


def cli_block(readme: str) -> str:
    section = readme.split("Getting a first credential, and the CLI", 1)[1]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)[0]


def test_the_readme_cli_block_runs_verbatim(reader: dict[str, str], tmp_path: Path) -> None:
    block = cli_block((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "token revoke $" in block and "DROVER_DATA_DIR" in block
    data = Path(reader["DROVER_DATA_DIR"])
    data.mkdir(parents=True)
    migrate = subprocess.run(
        ["drover", "db", "upgrade"], env=reader, capture_output=True, text=True, timeout=120
    )
    assert migrate.returncode == 0, migrate.stderr
    log = data / "node.log"
    with log.open("wb") as sink:
        node = subprocess.Popen(
            ["drover", "node", "run"],
            cwd=ROOT,
            env=reader,
            start_new_session=True,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:

        def ready() -> bool:
            assert node.poll() is None, log.read_text()[-3000:]
            try:
                return http.get(reader["DROVER_URL"] + "/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=120, interval=0.5, what="the CLI block's node to be ready")
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block],
            cwd=ROOT,
            env=reader,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert result.returncode == 0, f"{result.stdout}\n--- stderr:\n{result.stderr}"
        assert "revoked" in result.stdout, result.stdout
        admin = (Path(reader["HOME"]) / ".drover-admin").read_text().strip()
        tokens = http.get(
            reader["DROVER_URL"] + "/v1/tokens",
            headers={"Authorization": f"Bearer {admin}"},
            timeout=10,
        ).json()["data"]
        bot = [t for t in tokens if t["identity"] == "etl-bot"]
        assert len(bot) == 1 and bot[0]["revoked_at"], tokens
    finally:
        stop_session(node)
