"""The ``drover`` command line as a shell user meets it: completion scripts a shell sources and
uses, ``--version`` and ``-h``, no ``<bool>`` in any help, and against a real node (embedded
default, a fake ``spark-submit``): ``-o json|yaml|name|wide``, ``--field``, tables with ages
and footers on stderr, and ``jobs logs`` printing and following a run's driver log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.nodes import admin_token
from tests.conftest import wait_until
from tests.support.nodes import NodeProcess

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

BIN = Path(sys.executable).parent
DROVER = str(BIN / "drover")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DROVER, *args], capture_output=True, text=True, timeout=60, env=env or os.environ.copy()
    )


def test_bash_sources_the_completion_script_and_completes() -> None:
    script = run("completion", "bash")
    assert script.returncode == 0 and "_DROVER_COMPLETE=complete_bash" in script.stdout
    bash = shutil.which("bash")
    assert bash is not None
    probe = """
set -e
source <(drover completion bash)
complete -p drover
ask() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _drover_completion drover; }
ask drover jo; echo "top: ${COMPREPLY[*]}"
ask drover jobs st; echo "jobs: ${COMPREPLY[*]}"
ask drover jobs logs x --f; echo "opt: ${COMPREPLY[*]}"
"""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    done = subprocess.run([bash, "-c", probe], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert "complete -o default -F _drover_completion drover" in done.stdout
    assert lines["top"].split() == ["jobs"], done.stdout
    assert {"start", "stop"} <= set(lines["jobs"].split()), done.stdout
    assert {"--follow", "--field"} <= set(lines["opt"].split()), done.stdout
    for shell in ("zsh", "fish"):
        assert run("completion", shell).returncode == 0
    refused = run("completion", "tcsh")
    assert refused.returncode == 2 and "bash, zsh, fish" in refused.stderr


def test_version_short_help_and_no_bool_metavars() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("drover ")
    assert run("-h").stdout == run("--help").stdout
    from typer.main import get_command

    from drover.cli.main import app

    def helps(command: object, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from helps(sub, [*path, name])

    seen = 0
    for path in helps(get_command(app), []):
        text = run(*path, "-h").stdout
        assert "<bool>" not in text, f"drover {' '.join(path)} -h:\n{text}"
        seen += 1
    assert seen > 60


@pytest.fixture(scope="module")
def reader(embedded: NodeProcess) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_")}
    return {**env, "DROVER_URL": embedded.url, "DROVER_TOKEN": admin_token(embedded.env)}


def test_outputs_fields_tables_and_footers(embedded: NodeProcess, reader: dict[str, str]) -> None:
    pipeline = str(Path(embedded.env["DROVER_DATA_DIR"]) / "artifacts" / "pipeline.py")
    made = run("jobs", "create", "cli-out", "--entrypoint", pipeline, "--team", "ads", env=reader)
    assert made.returncode == 0, made.stderr

    def owned() -> dict[str, object] | None:
        doc = json.loads(run("jobs", "get", "cli-out", "-o", "json", env=reader).stdout)
        return doc if doc["owner"] else None

    # The node claims the new job on its next tick; compare the two forms once it has.
    as_json = wait_until(owned, timeout=30, interval=0.5, what="the node to own cli-out")
    assert as_json == json.loads(run("jobs", "get", "cli-out", "--json", env=reader).stdout)
    as_yaml = yaml.safe_load(run("jobs", "get", "cli-out", "-o", "yaml", env=reader).stdout)
    assert as_yaml["name"] == "cli-out" and as_yaml["team"] == "ads"
    assert run("jobs", "get", "cli-out", "--field", "state", env=reader).stdout == "STOPPED\n"
    listed = run("jobs", "list", "--field", "name", env=reader)
    assert listed.stdout.split() == ["cli-out"]
    assert run("jobs", "list", "-o", "name", env=reader).stdout.split() == ["cli-out"]
    table = run("jobs", "list", env=reader)
    assert table.returncode == 0 and "cli-out" in table.stdout
    assert "job(s)" not in table.stdout and "1 job(s)" in table.stderr  # the footer
    record = run("jobs", "get", "cli-out", env=reader).stdout
    created = next(line for line in record.splitlines() if line.startswith("created_at"))
    assert created.split()[-1].endswith(("s", "m")), created  # an age, not a timestamp
    assert "{'" not in record and "['" not in record  # no Python reprs
    wide = run("clusters", "list", "-o", "wide", env=reader)
    assert wide.returncode == 0 and "local" in wide.stdout and "UPDATED" in wide.stdout
    jobs_wide = run("jobs", "list", "-o", "wide", env=reader).stdout.splitlines()
    assert jobs_wide[0].split()[-5:] == ["BUSINESS", "RUN", "APP", "LABELS", "UPDATED"]


def test_jobs_logs_prints_and_follows_the_driver_log(
    embedded: NodeProcess, reader: dict[str, str]
) -> None:
    pipeline = str(Path(embedded.env["DROVER_DATA_DIR"]) / "artifacts" / "pipeline.py")
    made = run("jobs", "create", "cli-logs", "--entrypoint", pipeline, "--start", "--wait",
               "--timeout", "90", env=reader)  # fmt: skip
    assert made.returncode == 0, made.stderr

    def printed() -> str | None:
        out = run("jobs", "logs", "cli-logs", env=reader)
        return out.stdout if "fake pipeline running" in out.stdout else None

    text = wait_until(printed, timeout=60, interval=1, what="the driver's line in its log")
    assert "Initialized BlockManager" in text  # spark-submit's and the pipeline's, combined
    doc = json.loads(run("jobs", "logs", "cli-logs", "--json", env=reader).stdout)
    assert doc["stream"] == "combined" and doc["attempt"] == 1 and not doc["run_ended"]
    follower = subprocess.Popen(
        [DROVER, "jobs", "logs", "cli-logs", "-f", "--interval", "0.5"],
        env=reader,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stopped = run("jobs", "stop", "cli-logs", "--wait", "--timeout", "90", env=reader)
        assert stopped.returncode == 0, stopped.stderr
        out, err = follower.communicate(timeout=60)  # it ends by itself once the run has
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert "fake pipeline running" in out and "has ended" in err
