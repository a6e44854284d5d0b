"""A graceful upgrade and a rollback by itself end to end, on the real
Spark standalone cluster A, with one real Drover node process (MariaDB, no ZooKeeper) driven
through its REST API (the node and clusters of ``test_standalone_e2e.py``'s ``stack_factory``).

A running self-fencing pipeline (``tests/e2e/pipelines/batch_ids.py``: one file per committed
micro-batch, naming the run that wrote it) gets its args changed:

- the old run is asked to stop at a batch boundary (its fence answer), commits that batch, stops
  its query and exits by itself (no kill): its run ends FINISHED, recording the batch it stopped
  at (``stop_batch``);
- the new spec's run resumes from the same checkpoint: the next batch id is ``stop_batch + 1``
  (no gap, no reset) and it is written by the new run;
- a checker polling the master's ``/json/`` every 0.2 s never sees two live applications of the
  job at once.

Then a broken upgrade (an entrypoint that fails at once) with ``rollback_after_seconds`` rolls
back by itself: an event says so, a new revision equals the old spec, and the job runs again on
it, resuming the batch ids once more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import SparkStandalone
from tests.e2e.test_standalone_e2e import Stack, stack_factory  # noqa: F401 - the fixture
from tests.support.pollers import Poller

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BATCH_IDS = ROOT / "tests" / "e2e" / "pipelines" / "batch_ids.py"
ALWAYS_FAILS = ROOT / "tests" / "e2e" / "pipelines" / "always_fails.py"
TIMEOUT_S = 180.0
#: the grace a stop waits for the pipeline: long enough that a kill would mean the pipeline did
#: not stop by itself (its run would end KILLED, which the test refuses)
GRACE_S = 90


class AppChecker(Poller):
    """Polls the master's /json/ every 0.2 s; the most live applications named ``name`` seen at
    once, and each overlap."""

    def __init__(self, cluster: SparkStandalone, name: str) -> None:
        super().__init__()
        self.cluster, self.name = cluster, name
        self.most = 0
        self.overlaps: list[list[str]] = []

    def poll(self) -> None:
        apps = [
            a["id"] for a in self.cluster.master_state()["activeapps"] if a["name"] == self.name
        ]
        self.most = max(self.most, len(apps))
        if len(apps) > 1:
            self.overlaps.append(apps)


def batches(output: Path) -> dict[int, str]:
    """batch id -> the run id that committed it (the pipeline's files)."""
    found = {}
    for path in output.glob("[0-9]" * 6):
        found[int(path.name)] = path.read_text().split()[0]
    return found


def patch(stack: Stack, name: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
    node = stack.node
    response = httpx.patch(
        f"{node.url}/v1/jobs/{name}",
        json=body,
        params=params,
        headers=node.headers(),
        timeout=10,
        trust_env=False,
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_graceful_upgrade_and_rollback_by_itself(
    stack_factory: Callable[..., Stack],  # noqa: F811
) -> None:
    # one failure spends the restart budget: the broken upgrade rolls back at its first failure
    # (rollback_after_seconds is the backstop), so the test starts few drivers
    stack = stack_factory(
        DROVER_UPGRADE_GRACE_SECONDS=str(GRACE_S), DROVER_RESTART_MAX_ATTEMPTS="1"
    )
    output = stack.tmp / "batches"
    app_name = f"{stack.prefix}-app"
    args = ["--output", str(output), "--app-name", app_name, "--trigger-seconds", "2"]
    name = stack.create_job("upgrade", "ga", BATCH_IDS, [*args, "--rows-per-second", "2"])
    started = time.monotonic()
    phases: dict[str, float] = {}
    with AppChecker(stack.clusters["spark-a"], app_name) as checker:
        stack.command(name, "start")
        first = stack.wait_running(name, 1)["current_run"]
        stack.wait_job(
            name,
            lambda j: j["self_fencing"] is True and len(batches(output)) >= 2,
            "two batches committed by a self-fencing run",
            timeout=TIMEOUT_S,
        )

        phases["start"] = time.monotonic() - started
        # the upgrade: new args -> graceful stop at a batch boundary, then the new spec
        upgraded = patch(stack, name, {"args": [*args, "--rows-per-second", "3"]})
        assert upgraded["spec_version"] == 2
        second = stack.wait_running(name, 2)["current_run"]
        runs = stack.runs(name)
        old = runs[0]
        assert old["state"] == "FINISHED", old  # it exited by itself, not KILLED
        assert "stopped gracefully" in old["reason"], old
        stop_batch = old["stop_batch"]
        assert stop_batch is not None and stop_batch >= 1, old
        assert second["checkpoint_location"] == first["checkpoint_location"]
        stack.wait_job(
            name,
            lambda j: max(batches(output)) >= stop_batch + 1,
            "the new run to commit a batch",
            timeout=TIMEOUT_S,
        )
        written = batches(output)
        assert sorted(written) == list(range(max(written) + 1)), "a gap in the batch ids"
        assert written[stop_batch] == str(first["id"])  # the old run committed its last batch
        assert written[stop_batch + 1] == str(second["id"])  # the new one went on from there
        assert all(written[b] == str(first["id"]) for b in range(stop_batch + 1))
        events = [e["message"] for e in stack.events(name)]
        assert any("stopping gracefully" in m for m in events), events

        phases["upgrade"] = time.monotonic() - started - sum(phases.values())
        # a broken upgrade rolls back by itself
        broken = patch(
            stack,
            name,
            {"entrypoint": f"file://{ALWAYS_FAILS}"},
            rollback_after_seconds=120,
            grace_seconds=GRACE_S,
        )
        assert broken["upgrade_from"] == 2 and broken["spec_version"] == 3
        back = stack.wait_job(
            name,
            lambda j: j["spec_version"] == 4 and j["state"] == "RUNNING",
            "rolled back by itself and RUNNING again",
            timeout=TIMEOUT_S,
        )
        assert back["entrypoint"] == f"file://{BATCH_IDS}"
        assert back["args"] == upgraded["args"] and back["upgrade_deadline"] is None
        revision = stack.node.get(f"/v1/jobs/{name}/revisions/4", against=3)
        assert revision["rollback_of"] == 2 and revision["cause"] == "reconciler"
        assert [c["path"] for c in revision["changes"]] == ["entrypoint"]
        events = [e["message"] for e in stack.events(name)]
        assert any("rolled back to revision 2" in m for m in events), events
        before = max(batches(output))
        stack.wait_job(
            name,
            lambda j: max(batches(output)) > before,
            "the rolled-back spec to commit a batch",
            timeout=TIMEOUT_S,
        )
        written = batches(output)
        assert sorted(written) == list(range(max(written) + 1)), "a gap in the batch ids"
        assert written[max(written)] == str(back["current_run"]["id"])
        phases["rollback"] = time.monotonic() - started - sum(phases.values())
    print(
        f"\nupgrade e2e: {time.monotonic() - started:.0f} s "
        f"({', '.join(f'{k} {v:.0f} s' for k, v in phases.items())}), stop batch {stop_batch}, "
        f"{checker.polls} master polls, at most {checker.most} live application(s)"
    )
    assert checker.polls > 0
    assert checker.most == 1 and not checker.overlaps, checker.overlaps
