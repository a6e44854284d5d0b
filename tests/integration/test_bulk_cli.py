"""``drover bulk start|stop|restart|status|cancel`` against a real node API (uvicorn on a free
port, SQLite; no node executes operations here): the plan table and its JSON, a stored operation,
its status, the listing, an idempotent retry and a cancel."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_catalog_cli import api_url, drover  # noqa: F401 - the fixture
from tests.integration.test_replication_cli import PIPELINE

pytestmark = pytest.mark.integration


def test_bulk_through_the_cli(api_url: str) -> None:  # noqa: F811
    for name, team in (("orders-1", "ads"), ("orders-2", "ads"), ("billing", "pay")):
        code, _, err = drover(
            "jobs", "create", name, "--api", api_url, "--entrypoint", str(PIPELINE),
            "--team", team,
        )  # fmt: skip
        assert code == 0, err

    code, out, err = drover("bulk", "start", "--api", api_url)
    assert code == 2 and "select the jobs" in err and out == ""

    code, out, err = drover("bulk", "start", "--prefix", "orders-", "--dry-run", "--api", api_url)
    assert code == 0, err
    assert "orders-1" in out and "orders-2" in out and "billing" not in out
    assert "start: 2 item(s): 2 start" in out and "plan digest" in out
    code, out, err = drover(
        "bulk", "start", "--prefix", "orders-", "--dry-run", "--json", "--api", api_url
    )
    assert code == 0, err
    plan = json.loads(out)
    assert plan["dry_run"] is True and [i["job"] for i in plan["items"]] == ["orders-1", "orders-2"]

    args = ["bulk", "start", "--team", "ads", "--expect-plan", plan["plan_digest"]]
    key = ["--idempotency-key", "start-ads-1"]
    code, out, err = drover(*args, *key, "--json", "--api", api_url)
    assert code == 0, err
    op = json.loads(out)
    assert op["state"] == "PENDING" and op["team"] == "ads" and op["total"] == 2
    code, out, err = drover(*args, *key, "--json", "--api", api_url)  # the retry
    assert code == 0 and json.loads(out)["id"] == op["id"]

    code, out, err = drover("bulk", "status", str(op["id"]), "--api", api_url)
    assert code == 0, err
    assert f"start {op['id']}  PENDING  team ads" in out and "0/2 ended" in out
    code, out, err = drover("bulk", "status", "--api", api_url)
    assert code == 0 and out.count("start ") == 1 and "PENDING" in out
    code, out, err = drover("bulk", "status", "--json", "--api", api_url)
    assert code == 0 and [o["id"] for o in json.loads(out)["data"]] == [op["id"]]

    code, out, err = drover("bulk", "cancel", str(op["id"]), "--api", api_url)
    assert code == 0, err
    assert "cancel requested (CANCELLED)" in out
    code, out, err = drover("bulk", "status", str(op["id"]), "--wait", "--api", api_url)
    assert code == 8 and "CANCELLED" in out  # --wait saw it end badly
    code, out, err = drover("bulk", "cancel", str(op["id"]), "--api", api_url)
    assert code == 4 and "409" in err  # conflict: it is over
    code, out, err = drover("bulk", "status", "999", "--api", api_url)
    assert code == 3 and "404" in err
