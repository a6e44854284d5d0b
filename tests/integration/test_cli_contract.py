"""The CLI's contract against a real node API (uvicorn on loopback and
a SQLite store): every command of the typer app — found by walking it, so a new command is
covered — takes ``--json`` and prints exactly one parseable JSON document on stdout; every class
of failure exits with its own code (``drover.cli.output.Exit``), with one line on stderr and
nothing on stdout."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api.app import create_app
from api.deps import NodeContext
from drover.cli.main import app
from drover.cli.output import Exit
from harness.nodes import free_port
from scheduler.store.db import Store
from tests.support.auth import member_token
from tests.support.serving import admin_cli_store, serving

pytestmark = pytest.mark.integration

PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "rate_counter.py"

#: commands that are no API client and print no result: they start a long-running process
#: commands that print no document: the node itself, a shell completion script
NOT_A_CLIENT = {("node", "run"), ("completion",)}


@dataclass
class Node:
    url: str
    store: Store
    admin: str


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    with admin_cli_store(tmp_path, monkeypatch, "cli-contract") as (settings, store, admin):
        monkeypatch.setenv("DROVER_DATABASE_URL", store.url)
        monkeypatch.delenv("DROVER_URL", raising=False)
        with serving(create_app(NodeContext(settings, store))) as url:
            yield Node(url, store, admin)


def drover(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def commands(group: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every leaf command of the app, by its path (``("jobs", "list")``)."""
    found: dict[tuple[str, ...], Any] = {}
    for name, command in group.commands.items():
        path = (*prefix, name)
        if hasattr(command, "commands"):  # a group (typer's own click)
            found |= commands(command, path)
        else:
            found[path] = command
    return found


ALL = commands(typer.main.get_command(app))


def test_every_command_has_json() -> None:
    missing = [
        " ".join(path)
        for path, command in ALL.items()
        if path not in NOT_A_CLIENT and not any("--json" in p.opts for p in command.params)
    ]
    assert not missing, f"commands without --json: {missing}"
    assert len(ALL) >= 40


def scenario(node: Node, job: str, store_head: str) -> dict[tuple[str, ...], list[str]]:
    """Arguments that make each command succeed, in the order they run (later ones rely on
    earlier ones: the job, cluster, group and team they create)."""
    cluster, group, team = f"c-{job}", f"g-{job}", f"t-{job}"
    return {
        ("db", "current"): [],
        ("db", "upgrade"): [],
        ("db", "downgrade"): [store_head],
        ("login",): ["--token", node.admin],
        ("whoami",): [],
        ("nodes", "list"): [],
        ("clusters", "create"): [cluster, "--kind", "local", "--storage-root", "/tmp/ck-" + job],
        ("clusters", "list"): [],
        ("clusters", "get"): [cluster],
        ("clusters", "update"): [cluster, "--az", "az-x", "--if-version", "1"],
        ("clusters", "health"): [cluster],
        ("clusters", "mark-abnormal"): [cluster, "--reason", "maintenance"],
        ("clusters", "clear"): [cluster, "--reason", "done"],
        ("groups", "create"): [group, "--primary", cluster, "--failover", "local"],
        ("groups", "list"): [],
        ("groups", "get"): [group],
        ("groups", "auto-failover"): [group],
        ("teams", "create"): [team],
        ("teams", "list"): [],
        ("teams", "bind"): [team, "bot-" + job, "operator", "--kind", "service"],
        ("token", "create"): ["--identity", "bot-" + job],
        ("token", "list"): ["--limit", "1"],
        ("jobs", "create"): [job, "--entrypoint", str(PIPELINE), "--team", team,
                             "--label", "env=test", "--priority", "high"],
        ("jobs", "list"): ["--team", team],
        ("jobs", "get"): [job],
        ("jobs", "update"): [job, "--arg", "--rows-per-second", "--arg", "5",
                             "--conf", "spark.sql.shuffle.partitions=2", "--label", "tier=gold",
                             "--wait"],
        ("jobs", "start"): [job, "--if-match", "2"],
        ("jobs", "restart"): [job],
        ("jobs", "stop"): [job, "--wait", "--timeout", "10"],
        ("jobs", "revisions"): [job],
        ("jobs", "revision"): [job, "2", "--against", "1"],
        ("jobs", "rollback"): [job, "--to", "1", "--if-match", "2"],
        ("jobs", "runs"): [job],
        ("jobs", "events"): [job],
        # ("jobs", "logs") needs a run, and this API has no actors to make one: it is held to
        # the rule for the others below (exit 3, one line); test_cli_shell.py reads a real log
        ("replication", "list"): [],
        ("replication", "show"): [job],
        ("failover", "plan"): ["local", "--to", cluster, "--all"],
        ("failover", "run"): ["local", "--to", cluster, "--job", job, "--reason", "contract"],
        ("failover", "status"): [],
        ("failover", "cancel"): ["1"],
        ("failover", "auto", "status"): [],
        ("failover", "auto", "pause"): ["--reason", "contract"],
        ("failover", "auto", "resume"): ["--reason", "contract"],
        ("failover", "auto", "clear"): [cluster, "--reason", "contract"],
        ("bulk", "restart"): ["--team", team, "--dry-run"],
        ("bulk", "stop"): ["--label", "env=test", "--dry-run"],
        ("bulk", "start"): ["--job", job, "--reason", "contract", "--idempotency-key", job],
        ("bulk", "status"): [],
        ("bulk", "cancel"): ["2"],
        ("audit",): ["--target", job],
        ("teams", "unbind"): [team, "bot-" + job],
        ("token", "revoke"): ["2"],
        ("jobs", "delete"): [job],
        ("groups", "delete"): [group],
        ("logout",): [],
    }  # fmt: skip


def test_every_command_prints_parseable_json(node: Node) -> None:
    job = f"cj-{uuid.uuid4().hex[:8]}"
    runs = scenario(node, job, node.store.head_revision())
    documents: dict[tuple[str, ...], object] = {}
    for path, args in runs.items():
        code, out, err = drover(*path, *args, "--json", *_api(path, node))
        assert code == 0, f"drover {' '.join(path)}: exit {code}: {err}"
        documents[path] = json.loads(out)  # the whole of stdout is one document
    assert documents[("jobs", "get")]["name"] == job  # type: ignore[index]
    assert documents[("jobs", "list")]["count"] == 1  # type: ignore[index]
    assert documents[("jobs", "list")]["truncated"] is False  # type: ignore[index]
    assert documents[("token", "list")]["truncated"] is True  # type: ignore[index]
    updated = documents[("jobs", "update")]
    assert updated["args"] == ["--rows-per-second", "5"]  # type: ignore[index]
    assert updated["labels"] == {"env": "test", "tier": "gold"}  # type: ignore[index]
    assert documents[("jobs", "stop")]["state"] == "STOPPED"  # type: ignore[index]

    # a command added later (another helper's) is still held to --json: it either succeeds
    # with one document or fails with its class's exit code and nothing on stdout
    others = [p for p in ALL if p not in runs and p not in NOT_A_CLIENT]
    codes = {int(c) for c in Exit}
    for path in others:
        command = ALL[path]
        positional = [job for p in command.params if p.param_type_name == "argument" and p.required]
        code, out, err = drover(*path, *positional, "--json", *_api(path, node))
        assert code in codes, f"drover {' '.join(path)}: exit {code}: {err}"
        if code == 0:
            json.loads(out)
        else:
            assert out == "" and len(err.strip().splitlines()) == 1, (path, out, err)


def _api(path: tuple[str, ...], node: Node) -> list[str]:
    return [] if path[0] in ("db", "logout") else ["--api", node.url]


def test_tables_by_default(node: Node) -> None:
    code, out, err = drover("jobs", "list", "--api", node.url)
    assert code == 0 and out == "" and "(no jobs)" in err and "0 job(s)" in err, err
    code, out, err = drover("nodes", "list", "--api", node.url)
    # no actors behind this API: no membership view yet, but the answering node says who it is
    assert code == 0 and "answered by cli-contract" in err, err  # the footer: stderr
    code, out, err = drover("clusters", "get", "local", "--api", node.url)
    assert code == 0 and any(line.split()[:2] == ["kind", "local"] for line in out.splitlines())


def _one_line(err: str) -> bool:
    return err.startswith("drover: ") and len(err.strip().splitlines()) == 1


def test_exit_codes_per_failure_class(node: Node, tmp_path: Path) -> None:
    url = node.url
    job = f"cx-{uuid.uuid4().hex[:8]}"
    code, _, err = drover("jobs", "create", job, "--entrypoint", str(PIPELINE), "--api", url)
    assert code == Exit.OK, err
    viewer = member_token(node.store, "viewer-" + job, "t-" + job, "viewer")
    free = f"http://127.0.0.1:{free_port()}"
    cases: list[tuple[Exit, list[str]]] = [
        # usage: the command line (typer), or a request the API finds invalid (422)
        (Exit.USAGE, ["jobs", "list", "--no-such-option"]),
        (Exit.USAGE, ["jobs", "list", "--state", "SIDEWAYS", "--api", url]),
        (Exit.USAGE, ["jobs", "update", job, "--api", url]),  # nothing to change
        (Exit.USAGE, ["jobs", "create", "x", "--entrypoint", "/x.py", "--conf", "nokey",
                      "--api", url]),
        # not found
        (Exit.NOT_FOUND, ["jobs", "get", "nope-" + job, "--api", url]),
        (Exit.NOT_FOUND, ["jobs", "start", "nope-" + job, "--wait", "--api", url]),
        (Exit.NOT_FOUND, ["clusters", "health", "nope", "--api", url]),
        # conflict / precondition: a stale If-Match, a clash with the current state
        (Exit.CONFLICT, ["jobs", "update", job, "--priority", "low", "--if-match", "9",
                         "--api", url]),
        (Exit.CONFLICT, ["jobs", "create", job, "--entrypoint", str(PIPELINE), "--api", url]),
        (Exit.CONFLICT, ["groups", "delete", "default", "--api", url]),
        # refused: a bad credential (401), a role that may not (403)
        (Exit.REFUSED, ["--token", "drv_not-a-token", "jobs", "list", "--api", url]),
        (Exit.REFUSED, ["--token", viewer, "clusters", "create", "x", "--kind", "local",
                        "--storage-root", "/tmp/x", "--api", url]),
        # unreachable
        (Exit.UNAVAILABLE, ["jobs", "list", "--api", free]),
        (Exit.UNAVAILABLE, ["--url", free, "nodes", "list"]),
        # --wait reached its deadline: no reconciler runs behind this API, nothing starts
        (Exit.TIMEOUT, ["jobs", "start", job, "--wait", "--timeout", "1.5", "--api", url]),
    ]  # fmt: skip
    for expected, args in cases:
        for as_json in ([], ["--json"]):
            code, out, err = drover(*args, *as_json)
            if expected == Exit.TIMEOUT:
                # the wait prints where it got to (stdout: the job) and why it gave up
                assert code == expected, (args, code, err)
                assert err.strip().splitlines()[-1].startswith("drover: timed out after 1.5 s")
                if as_json:
                    assert json.loads(out)["desired_state"] == "RUNNING"
                drover("jobs", "stop", job, "--api", url)
                continue
            assert code == expected, (args, code, out, err)
            assert out == "" and (_one_line(err) or expected == Exit.USAGE), (args, out, err)


def test_url_and_token_come_from_the_config_file(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = drover("login", "--token", node.admin, "--api", node.url)
    assert code == 0, err
    monkeypatch.delenv("DROVER_TOKEN")
    monkeypatch.setenv("DROVER_API_PORT", "1")  # a node's own settings are never read
    code, out, err = drover("whoami", "--json")
    assert code == 0, err
    assert json.loads(out)["subject"].endswith("admin")
    monkeypatch.setenv("DROVER_URL", f"http://127.0.0.1:{free_port()}")  # env beats the file
    code, _, err = drover("whoami")
    assert code == Exit.UNAVAILABLE and _one_line(err)
    code, _, err = drover("whoami", "--api", node.url)  # the flag beats the environment
    assert code == 0, err
