"""A short chaos run is part of the suite: faults of every kind at random against a
private deployment (3 nodes, ZooKeeper, MariaDB, two simulated clusters behind proxies that can
block their ports) while an operator stops, starts, restarts, upgrades and fails jobs over
through the API, and the checker finds no double run, no lost job, no lost write, no
unfenced action, no unended failover and no unexplained failed poll (about 2.5 minutes in all:
45 s to set up, 55 s of faults, the convergence).

``make chaos DURATION=600`` runs the long version; the checker's own tests feed it each kind of
violation (tests/unit/test_chaos_checker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos import history as h
from chaos import run as chaos_run
from chaos.checker import check
from chaos.faults import KINDS

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=2)]


def test_a_short_chaos_run_keeps_every_promise(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    args = chaos_run.parser().parse_args(
        [
            "--duration",
            "55",
            "--seed",
            "20261124",
            "--jobs",
            "18",
            "--bound",
            "90",
            "--history",
            str(path),
            "--workdir",
            str(tmp_path / "run"),
        ]
    )
    report = chaos_run.run(args)
    assert report.ok, report.summary()
    # the seeded schedule goes round every kind before repeating one: 55 s reach most of them
    assert len(report.faults) >= 6 and set(report.faults) <= set(KINDS), report.faults
    assert report.apps_seen >= 18 and report.jobs_seen == 18
    assert report.writes_acked > 18  # the creates and the operator's acknowledged actions
    assert report.actions.get("submit", 0) >= 18  # every submission was checked for its claim
    replayed = check(h.read(path), 90)  # the history on disk tells the same story
    assert replayed.ok and replayed.faults == report.faults
