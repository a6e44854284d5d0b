"""``drover jobs revisions|revision|rollback`` against a real node API (uvicorn on a free port,
SQLite): tables by default, JSON that parses with ``--json``, one line and a non-zero code on
errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_catalog_cli import api_url, drover  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration

PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "rate_counter.py"


def test_revisions_and_rollback_through_the_cli(api_url: str) -> None:  # noqa: F811
    code, out, err = drover(
        "jobs", "create", "orders", "--api", api_url, "--entrypoint", str(PIPELINE),
        "--arg", "--rate=2",
    )  # fmt: skip
    assert code == 0, err
    # a spec change with the upgrade options (the job is stopped: no upgrade, just a revision)
    code, out, err = drover(
        "jobs", "update", "orders", "--arg", "--rate=3", "--grace", "5",
        "--rollback-after", "60", "--api", api_url, "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["args"] == ["--rate=3"] and json.loads(out)["upgrade_from"] is None

    code, out, err = drover("jobs", "revisions", "orders", "--api", api_url)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split()[:2] == ["REVISION", "CREATED"] and err.strip() == "2 revision(s)"
    code, out, err = drover("jobs", "revisions", "orders", "--api", api_url, "--json")
    assert code == 0 and [r["revision"] for r in json.loads(out)["data"]] == [2, 1]
    code, out, err = drover("jobs", "revisions", "orders", "--api", api_url, "--limit", "1")
    assert code == 0 and "1 revision(s) (cut by --limit)" in err

    code, out, err = drover("jobs", "revision", "orders", "2", "--against", "1", "--api", api_url)
    assert code == 0, err
    assert 'changed  args: ["--rate=2"] -> ["--rate=3"]' in out
    code, out, err = drover("jobs", "revision", "orders", "1", "--api", api_url, "--json")
    assert code == 0 and json.loads(out)["spec"]["args"] == ["--rate=2"]

    code, out, err = drover("jobs", "rollback", "orders", "--to", "1", "--if-match", "1",
                            "--api", api_url)  # fmt: skip
    assert code == 4 and "412" in err and len(err.strip().splitlines()) == 1
    code, out, err = drover("jobs", "rollback", "orders", "--to", "1", "--if-match", "2",
                            "--api", api_url, "--json")  # fmt: skip
    assert code == 0, err
    job = json.loads(out)
    assert job["args"] == ["--rate=2"] and job["spec_version"] == 3
    code, out, err = drover("jobs", "rollback", "orders", "--to", "1", "--api", api_url)
    assert code == 4 and "409" in err
    code, out, err = drover("jobs", "revision", "nope", "1", "--api", api_url)
    assert code == 3 and "404" in err
    code, out, err = drover("jobs", "start", "orders", "--api", api_url)
    assert code == 0, err
    code, out, err = drover("jobs", "stop", "orders", "--grace", "0", "--api", api_url, "--json")
    assert code == 0 and json.loads(out)["desired_state"] == "STOPPED", err
    code, out, err = drover("jobs", "restart", "orders", "--grace", "-1", "--api", api_url)
    assert code == 2
