"""``drover replication list|show`` and ``drover jobs create --replicate`` against a real node API
(uvicorn on a free port, SQLite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_catalog_cli import api_url, drover  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration

#: a pipeline shipped with Drover (under the default artifact roots)
PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "rate_counter.py"


def test_replication_through_the_cli(api_url: str) -> None:  # noqa: F811
    code, out, err = drover(
        "jobs", "create", "orders", "--api", api_url, "--entrypoint", str(PIPELINE),
        "--no-replicate", "--priority", "high", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["replicate"] is False
    code, out, err = drover("replication", "show", "orders", "--api", api_url)
    assert code == 0, err
    assert "replicated: no" in out and "replica   none" in out
    code, out, err = drover("replication", "show", "orders", "--api", api_url, "--json")
    assert code == 0 and json.loads(out)["state"] is None
    code, out, err = drover("replication", "list", "--api", api_url)
    assert code == 0 and err.strip().endswith("0 replica(s)")  # the footer: stderr
    code, out, err = drover("replication", "show", "nope", "--api", api_url)
    assert code == 3 and "404" in err and len(err.strip().splitlines()) == 1
    code, out, err = drover("replication", "list", "--api", api_url, "--state", "SIDEWAYS")
    assert code == 2 and "422" in err
