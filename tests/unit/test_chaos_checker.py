"""The chaos checker catches what it must (a double run seen on the masters or among the driver
processes, a lost write, a job not running again in time, an unfenced action, a batch committed
by two runs, a failover that never ended, a poll that failed with no fault to explain it) and
nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chaos import history as h
from chaos.checker import (
    batch_verdicts,
    check,
    convergence,
    double_commits,
    double_runs,
    failed_polls,
    failovers_unended,
    lost_jobs,
    lost_writes,
    unfenced_actions,
)
from chaos.history import (
    Action,
    AppSeen,
    BatchCommit,
    Claim,
    Fault,
    FinalJob,
    FinalOperation,
    History,
    JobSeen,
    OperationAcked,
    PollMissed,
    Quiet,
    WriteAcked,
)

BOUND = 60.0


def polls(
    cluster: str,
    app: str,
    job: str,
    start: float,
    end: float,
    every: float = 0.2,
    source: str = "master",
):
    """An application seen alive by every poll from ``start`` to ``end``, then seen ended."""
    t, seen = start, []
    while t <= end + 1e-9:
        seen.append(AppSeen(round(t, 3), cluster, app, job, True, source))
        t += every
    seen.append(AppSeen(round(t, 3), cluster, app, job, False, source))
    return seen


def batches(job: str, run: str, first: int, last: int, t: float) -> list[BatchCommit]:
    """``run`` wrote batches ``first`` to ``last`` and Spark committed all but the last (the
    run ended during it), one a second from ``t``."""
    records = []
    for batch in range(first, last + 1):
        records.append(BatchCommit(t + batch - first, job, batch, run, False))
        if batch < last:
            records.append(BatchCommit(t + batch - first + 0.9, job, batch, run, True))
    return records


def healthy() -> History:
    """A clean run: orders fails over from A to B (A's app gone before B's starts), a second job
    is created, stopped and started again; a node dies and its jobs are claimed anew."""
    return History.of(
        [
            Fault(10.0, "kill9", "n2", until=12.0),
            Quiet(40.0),
            *polls("A", "app-1", "orders", 0.0, 20.0),
            *polls("B", "app-2", "orders", 20.6, 60.0),
            *polls("A", "app-3", "clicks", 5.0, 70.0),
            # the same drivers, as processes: they outlive their listing by a little
            *polls("A", "pid:11", "orders", 0.0, 20.4, source="process"),
            *polls("B", "pid:12", "orders", 20.8, 60.0, source="process"),
            # orders' run 1 died during batch 9; run 2 did it again from the checkpoint
            *batches("orders", "1", 0, 9, 1.0),
            *batches("orders", "2", 9, 20, 22.0),
            JobSeen(41.0, "orders", "RUNNING", "RUNNING"),
            JobSeen(41.0, "clicks", "RUNNING", "STARTING"),
            JobSeen(45.0, "clicks", "RUNNING", "RUNNING"),
            WriteAcked(1.0, "orders", "create", "RUNNING"),
            WriteAcked(2.0, "clicks", "create", "RUNNING"),
            WriteAcked(3.0, "clicks", "stop", "STOPPED"),
            WriteAcked(4.0, "clicks", "start", "RUNNING"),
            WriteAcked(5.0, "tmp", "create", "RUNNING"),
            WriteAcked(6.0, "tmp", "delete", None),
            WriteAcked(7.0, "orders", "upgrade", "RUNNING", '["--rev", "2"]'),
            WriteAcked(7.5, "orders", "restart", "RUNNING"),  # applied, its answer lost
            OperationAcked(8.0, 4, "failover", "A (orders)"),
            FinalJob("orders", True, "RUNNING", '["--rev", "2"]'),
            FinalJob("clicks", True, "RUNNING", "[]"),
            FinalJob("tmp", False),
            FinalOperation(4, True, "SUCCEEDED", created=8.0, finished=21.0),
            # an automatic failover that found nothing to move
            FinalOperation(6, True, "FAILED", "", 9.0, 9.5, "no job to move", "failover", "auto"),
            PollMissed(11.0, "store", "MariaDB down"),  # during db_restart
            Fault(10.5, "db_restart", "mariadb", until=12.5),
            Claim(1.5, "orders", "n1", 7),
            Claim(1.5, "clicks", "n2", 7),
            Claim(13.0, "clicks", "n1", 8),
            Action(1.6, "orders", "n1", 7, "submit"),
            Action(4.5, "clicks", "n2", 7, "submit"),
            Action(19.0, "orders", "n1", None, "kill"),
            Action(20.5, "orders", "n1", 7, "submit"),
            Action(13.1, "clicks", "n1", None, "kill"),  # its claim sampled 0.1 s before
        ]
    )


def test_a_clean_history_passes_with_its_figures() -> None:
    report = check(healthy(), BOUND, failover_bound_s=30.0)
    assert report.ok, report.summary()
    assert report.faults == {"db_restart": 1, "kill9": 1}
    assert report.worst_convergence_s == pytest.approx(5.0)
    assert (report.apps_seen, report.jobs_seen, report.writes_acked) == (5, 2, 8)
    assert report.failovers == {"SUCCEEDED": 1, "other FAILED": 1}
    assert report.actions == {"kill": 2, "submit": 3}
    assert report.batches == {"committed": 20, "replayed": 1}
    assert report.misses == {"store": 1}
    assert report.longest_failover_s == pytest.approx(13.0)
    assert "violations: 0" in report.summary()
    assert "actions checked: kill 2, submit 3" in report.summary()
    assert "batches: committed 20, replayed 1; failed polls: store 1" in report.summary()


def test_a_double_run_across_clusters_is_flagged() -> None:
    history = healthy()
    # the stale driver on A lived on while B's application started
    history.apps += polls("A", "app-9", "orders", 20.2, 22.0)
    found = double_runs(history)
    assert [(v.kind, v.job) for v in found] == [("double_run", "orders")]
    assert "app-9" in found[0].detail and "app-2" in found[0].detail
    assert not check(history, BOUND).ok


def test_a_double_run_among_the_driver_processes_is_flagged() -> None:
    history = healthy()
    # the masters saw one application at a time, but A's driver process lived on
    history.apps += polls("A", "pid:13", "orders", 20.6, 21.0, source="process")
    found = double_runs(history)
    assert [(v.kind, v.job) for v in found] == [("double_run", "orders")]
    assert "pid:13" in found[0].detail and "(processes)" in found[0].detail


def test_a_driver_and_its_listed_application_are_not_two_runs() -> None:
    history = History.of(
        polls("A", "app-1", "j", 0.0, 10.0) + polls("A", "pid:1", "j", 0.0, 10.5, source="process")
    )
    assert double_runs(history) == []


def test_a_batch_committed_by_two_runs_is_flagged() -> None:
    history = healthy()
    # a stale run on A went on committing after the run on B had resumed from its checkpoint
    history.batches += batches("orders", "1", 10, 13, 22.5)
    found = double_commits(history)
    assert [(v.kind, v.job) for v in found] == [("double_commit", "orders")] * 3
    assert found[0].detail.startswith("batch 10 committed by runs 1 (at 23.40), 2 (at")
    assert check(history, BOUND).batches == {"committed": 20, "replayed": 2}


def test_a_failover_that_never_ended_or_too_late_or_unexplained_is_flagged() -> None:
    history = healthy()
    history.final_operations += [
        FinalOperation(7, True, "RUNNING", "orders move -> FENCING", 30.0, None),
        FinalOperation(8, True, "SUCCEEDED", "clicks move -> DONE", 30.0, 95.0),
        FinalOperation(9, True, "FAILED", "clicks move -> CHECKPOINT", 30.0, 40.0),
        FinalOperation(10, True, "CANCELLED", "", 30.0, 40.0),
        FinalOperation(11, True, "FAILED", "clicks move -> START (no room on B)", 30.0, 40.0),
    ]
    found = failovers_unended(history, 60.0)
    assert [(v.kind, v.job) for v in found] == [
        ("failover_unended", "failover 7"),
        ("failover_unended", "failover 8"),
        ("failover_unexplained", "failover 9"),
    ]
    assert "still RUNNING" in found[0].detail and "only after 65.0 s" in found[1].detail
    assert [v.job for v in failovers_unended(history, None)] == ["failover 7", "failover 9"]


def test_a_failed_poll_no_fault_explains_is_flagged() -> None:
    history = healthy()
    history.faults.append(Fault(30.0, "az_loss", "A (down 20.0 s)", until=50.0))
    history.misses += [
        PollMissed(35.0, "cluster:A", "refused"),  # A was down
        PollMissed(55.0, "cluster:A", "refused"),  # within the slack after it came back
        PollMissed(36.0, "cluster:B", "timed out"),  # B was not
        PollMissed(80.0, "store", "timed out"),  # MariaDB was up
        PollMissed(81.0, "processes", "no /proc"),
    ]
    found = failed_polls(history)
    assert [(v.job, v.t) for v in found] == [
        ("cluster:B", 36.0),
        ("store", 80.0),
        ("processes", 81.0),
    ]
    report = check(history, BOUND)
    assert not report.ok and report.misses == {
        "cluster:A": 2,
        "cluster:B": 1,
        "processes": 1,
        "store": 2,
    }


def test_two_applications_one_after_the_other_are_no_double_run() -> None:
    history = History.of(polls("A", "a1", "j", 0.0, 10.0) + polls("A", "a2", "j", 10.4, 20.0))
    assert double_runs(history) == []


def test_a_lost_job_is_flagged_never_running_again_or_too_late() -> None:
    history = healthy()
    history.final.append(FinalJob("forgotten", True, "RUNNING"))
    history.jobs.append(JobSeen(50.0, "forgotten", "RUNNING", "QUEUED"))
    history.final.append(FinalJob("slow", True, "RUNNING"))
    history.jobs.append(JobSeen(40.0 + BOUND + 5, "slow", "RUNNING", "RUNNING"))
    found = lost_jobs(history, BOUND)
    assert [(v.kind, v.job) for v in found] == [("lost_job", "forgotten"), ("lost_job", "slow")]
    assert "never seen RUNNING" in found[0].detail and "65.0 s" in found[1].detail


def test_running_before_the_faults_cleared_counts_only_if_still_so() -> None:
    history = History.of(
        [
            Quiet(100.0),
            JobSeen(50.0, "lost", "RUNNING", "RUNNING"),
            JobSeen(90.0, "lost", "RUNNING", "UNKNOWN"),
            FinalJob("lost", True, "RUNNING"),
            JobSeen(50.0, "steady", "RUNNING", "RUNNING"),  # unchanged since: no new record
            FinalJob("steady", True, "RUNNING"),
        ]
    )
    assert [v.job for v in lost_jobs(history, BOUND)] == ["lost"]
    assert convergence(history) == {"lost": None, "steady": 0.0}


def test_a_lost_write_is_flagged() -> None:
    history = healthy()
    history.writes.append(WriteAcked(30.0, "orders", "stop", "STOPPED"))  # store says RUNNING
    history.writes.append(WriteAcked(31.0, "new", "create", "RUNNING"))  # never stored
    history.writes.append(WriteAcked(32.0, "clicks", "delete", None))  # still there
    found = lost_writes(history)
    assert {(v.job, v.detail) for v in found} == {
        ("clicks", "delete acknowledged, job still exists"),
        ("new", "create acknowledged, job is gone"),
        ("orders", "stop acknowledged (desired STOPPED), store holds desired RUNNING"),
    }


def test_a_lost_upgrade_is_flagged() -> None:
    history = healthy()
    history.final = [
        FinalJob("orders", True, "RUNNING", '["--rev", "1"]') if f.job == "orders" else f
        for f in history.final
    ]
    found = lost_writes(history)
    assert [(v.job, v.detail) for v in found] == [
        ("orders", 'upgrade acknowledged (spec ["--rev", "2"]), store holds spec ["--rev", "1"]')
    ]


def test_a_lost_failover_is_flagged() -> None:
    history = healthy()
    history.operations.append(OperationAcked(30.0, 5, "failover", "B (clicks)"))
    history.operations.append(OperationAcked(31.0, 0, "failover_in_doubt", "A (orders)"))
    found = lost_writes(history)
    assert [(v.job, v.detail) for v in found] == [
        ("failover 5", "failover of B (clicks) acknowledged, not in the store")
    ]
    assert check(history, BOUND).failovers == {
        "SUCCEEDED": 1,
        "missing": 1,
        "in doubt": 1,
        "other FAILED": 1,
    }


def test_a_write_in_doubt_is_no_lost_write() -> None:
    history = healthy()
    history.writes.append(WriteAcked(30.0, "orders", "in_doubt", None))  # stop sent, no answer
    assert lost_writes(history) == []


def test_an_unfenced_action_is_flagged() -> None:
    history = healthy()
    # n2 was frozen past its session: n1 claimed clicks under epoch 8, then n2 thawed and killed
    history.actions.append(Action(14.0, "clicks", "n2", 7, "kill"))
    # and n3 submitted a job n1 had claimed under the same epoch (both think they own it)
    history.actions.append(Action(15.0, "orders", "n3", 7, "submit"))
    found = unfenced_actions(history)
    assert [(v.job, v.t) for v in found] == [("clicks", 14.0), ("orders", 15.0)]
    assert "after n1 claimed the job under epoch 8" in found[0].detail
    assert "n3 did submit under epoch 7 after n1 claimed the job under epoch 7" in found[1].detail
    assert check(history, BOUND).claims == {"held": 5, "stale": 2}


def test_a_claim_too_brief_for_the_samples_is_counted_not_flagged() -> None:
    history = healthy()
    # after a ZooKeeper wipe n2 came back first: it owned the group for an instant under a new
    # generation's epoch and killed; n1 joined and claimed the job before the next sample
    history.actions.append(Action(30.0, "orders", "n2", (1 << 32) | 1, "kill"))
    history.claims.append(Claim(30.2, "orders", "n1", (1 << 32) | 2))
    assert unfenced_actions(history) == []
    assert check(history, BOUND).claims == {"held": 5, "unsampled": 1}
    # but the same kill under an epoch older than a claim seen before it is flagged
    history.actions.append(Action(31.0, "orders", "n2", (1 << 32) | 1, "kill"))
    assert [v.t for v in unfenced_actions(history)] == [31.0]


def test_an_unfenced_kill_is_flagged() -> None:
    history = healthy()
    # n2 lost clicks to n1 (epoch 8, seen at 13.0) and killed its application afterwards
    history.actions.append(Action(16.0, "clicks", "n2", None, "kill"))
    # n3 killed orders' application, never having claimed it
    history.actions.append(Action(17.0, "orders", "n3", None, "kill"))
    found = unfenced_actions(history)
    assert [(v.job, v.t) for v in found] == [("clicks", 16.0), ("orders", 17.0)]
    assert "n2 did kill under its newest claim's epoch 7 after n1 claimed" in found[0].detail
    assert "n3 did kill under its newest claim's epoch (none) after n1 claimed" in found[1].detail
    history.claims = []  # nothing recorded at all
    assert all("without a recorded claim" in v.detail for v in unfenced_actions(history))


def test_a_kill_under_a_claim_sampled_just_after_it_is_fenced() -> None:
    history = healthy()
    # n2 claimed orders under epoch 9 and killed at once; the sample saw the claim 0.2 s later
    history.claims.append(Claim(30.2, "orders", "n2", 9))
    history.actions.append(Action(30.0, "orders", "n2", None, "kill"))
    assert unfenced_actions(history) == []


def test_each_kind_is_counted_in_the_summary() -> None:
    history = healthy()
    history.apps += polls("A", "app-9", "orders", 20.2, 22.0)
    history.final.append(FinalJob("forgotten", True, "RUNNING"))
    history.writes.append(WriteAcked(31.0, "new", "create", "RUNNING"))
    history.actions.append(Action(15.0, "orders", "n3", 7, "submit"))
    history.batches += batches("orders", "1", 10, 11, 22.5)
    history.final_operations.append(FinalOperation(7, True, "RUNNING", "", 30.0, None))
    history.final_operations.append(FinalOperation(8, True, "FAILED", "", 30.0, 31.0))
    history.misses.append(PollMissed(80.0, "store", "timed out"))
    summary = check(history, BOUND).summary()
    assert (
        "violations: 8 (double_commit 1, double_run 1, failed_poll 1, failover_unended 1, "
        "failover_unexplained 1, lost_job 1, lost_write 1, unfenced_action 1)"
    ) in summary


def test_a_history_survives_its_file(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    original = healthy()
    h.write(path, original.records())
    assert h.read(path) == original
    path.write_text('{"type": "Nope"}\n')
    with pytest.raises(ValueError, match=r"history.jsonl:1: unknown record type 'Nope'"):
        h.read(path)


@st.composite
def lifetimes(draw: st.DrawFn) -> list[tuple[float, float]]:
    starts = draw(st.lists(st.integers(0, 200), min_size=1, max_size=6))
    return [(s, s + draw(st.integers(0, 50))) for s in starts]


@given(lifetimes())
def test_double_run_found_exactly_when_two_lives_overlap(lives: list[tuple[float, float]]) -> None:
    history = History.of(
        AppSeen(t, "A" if i % 2 else "B", f"app-{i}", "j", True)
        for i, (first, last) in enumerate(lives)
        for t in (first, last)
    )
    overlapping = any(
        a[0] <= b[1] and b[0] <= a[1] for i, a in enumerate(lives) for b in lives[i + 1 :]
    )
    assert bool(double_runs(history)) == overlapping


def test_a_commit_log_says_which_batches_each_run_committed(tmp_path: Path) -> None:
    from chaos.recorder import commit_records

    log = tmp_path / "j.log"
    # run 1 wrote 0-2 and died during 2; run 2 did 2 again and went on to 3
    log.write_text("0 1 10.0\n1 1 12.0\n2 1 14.0\n2 2 30.0\n3 2 32.0\n")
    records = commit_records("j", log)
    committed = sorted((b.batch, b.run, b.t) for b in records if b.committed)
    assert committed == [(0, "1", 12.0), (1, "1", 14.0), (2, "2", 32.0)]
    assert len([b for b in records if not b.committed]) == 5
    tally, doubled = batch_verdicts(History(batches=records))
    assert tally == {"committed": 3, "replayed": 1} and doubled == []
    assert commit_records("j", tmp_path / "none.log") == []
