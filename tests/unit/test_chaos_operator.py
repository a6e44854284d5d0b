"""The chaos operator reports exactly the writes the API acknowledged: retries with
one Idempotency-Key while the outcome is unknown, counts "applied, answer lost" as acknowledged,
a refusal as nothing, and a write never answered as in doubt."""

from __future__ import annotations

import random
from typing import Any, cast

import httpx
import pytest

from chaos.faults import Operator, Stack, spec_of


class Acks:
    def __init__(self) -> None:
        self.writes: list[tuple[str, str, str | None, str | None]] = []
        self.operations: list[tuple[int, str, str]] = []

    def acked(self, job: str, op: str, desired: str | None, spec: str | None = None) -> None:
        self.writes.append((job, op, desired, spec))

    def operation_acked(self, operation: int, kind: str, detail: str) -> None:
        self.operations.append((operation, kind, detail))


class Scripted(Operator):
    """An operator whose API answers come from a script (None: no answer)."""

    def __init__(self, answers: list[httpx.Response | None], acks: Acks) -> None:
        fake = {
            "jobs": ["j1"],
            "clusters": {"A": None},
            "spark": {},
            "cluster_names": lambda self: ["A"],
            "upgraded_args": lambda self, job, revision: ["--chaos-rev", str(revision)],
        }
        stack = cast(Stack, type("S", (), fake)())
        super().__init__(stack, random.Random(1), acks, retry_for=0.5, retry_pause=0.01)
        self.answers = answers
        self.sent: list[tuple[str, str, Any, str | None]] = []

    def _send(self, method: str, path: str, body: Any, key: str | None) -> httpx.Response | None:
        self.sent.append((method, path, body, key))
        return self.answers.pop(0) if self.answers else None


def job(desired: str, args: list[str] | None = None) -> httpx.Response:
    return httpx.Response(202, json={"name": "j1", "desired_state": desired, "args": args or []})


def problem(status: int, kind: str, **headers: str) -> httpx.Response:
    body = {"type": f"urn:drover:problem:{kind}", "title": kind, "status": status}
    return httpx.Response(status, json=body, headers=headers)


def test_a_write_retried_until_answered_is_acked_once_under_one_key() -> None:
    acks = Acks()
    op = Scripted([None, httpx.Response(503), job("STOPPED")], acks)
    op.act("j1", "stop")
    assert acks.writes == [("j1", "stop", "STOPPED", spec_of([]))]
    keys = {key for _, _, _, key in op.sent}
    assert len(op.sent) == 3 and len(keys) == 1 and None not in keys
    assert op.done == {"stop": 1} and not op.doubtful


def test_applied_with_its_answer_lost_is_acked_still_processing_is_retried() -> None:
    acks = Acks()
    op = Scripted(
        [
            problem(409, "idempotency-key-in-use", **{"Retry-After": "1"}),
            problem(409, "idempotency-key-in-use"),
        ],
        acks,
    )
    op.act("j1", "start")
    assert acks.writes == [("j1", "start", "RUNNING", None)]
    assert len(op.sent) == 2


def test_a_refusal_is_no_write_and_silence_is_doubt() -> None:
    acks = Acks()
    op = Scripted([problem(409, "illegal-transition")], acks)
    op.act("j1", "stop")
    assert acks.writes == [] and op.refused == {"stop": 1}
    op.act("j1", "restart")  # nothing answers any more
    assert acks.writes == [("j1", "in_doubt", None, None)]
    assert op.doubtful == {"j1"}


def test_an_upgrade_patches_the_arguments_then_restarts() -> None:
    acks = Acks()
    new_args = ["--chaos-rev", "1"]
    op = Scripted([job("RUNNING", new_args), job("RUNNING", new_args)], acks)
    op.act("j1", "upgrade")
    assert [(m, p) for m, p, _, _ in op.sent] == [
        ("PATCH", "/v1/jobs/j1"),
        ("POST", "/v1/jobs/j1/restart"),
    ]
    assert op.sent[0][2] == {"args": new_args}
    assert acks.writes == [
        ("j1", "upgrade", "RUNNING", spec_of(new_args)),
        ("j1", "restart", "RUNNING", spec_of(new_args)),
    ]


def test_a_failover_is_reported_with_its_id_or_in_doubt() -> None:
    acks = Acks()
    op = Scripted([httpx.Response(201, json={"id": 7, "state": "PENDING"})], acks)
    op.fail_over("A", ["j2", "j1"])
    assert op.sent[0][:3] == (
        "POST",
        "/v1/failovers",
        {"source": "A", "selector": {"jobs": ["j1", "j2"]}, "reason": "chaos: operator failover"},
    )
    op.fail_over("A", ["j1"])  # never answered
    assert acks.operations == [(7, "failover", "A (j1, j2)"), (0, "failover_in_doubt", "A (j1)")]


def test_a_seed_reproduces_each_stream_of_choices_on_its_own() -> None:
    from chaos.faults import seeded
    from chaos.run import schedule

    first = [seeded(7, f"operator/{n}").random() for n in range(5)]
    assert first == [seeded(7, f"operator/{n}").random() for n in range(5)]
    assert seeded(7, "faults/schedule").random() != seeded(7, "operator/0").random()
    assert seeded(8, "operator/0").random() != first[0]
    # the schedule of a lane depends on its seed and name only, never on the operator's draws
    kinds = ["a", "b", "c"]
    assert schedule(seeded(7, "cluster/schedule"), 9, kinds) == schedule(
        seeded(7, "cluster/schedule"), 9, kinds
    )
    assert sorted(schedule(seeded(7, "cluster/schedule"), 9, kinds)) == sorted(kinds * 3)


def _listing(jobs: list[dict[str, Any]], health: dict[str, str]) -> list[httpx.Response | None]:
    clusters = [{"name": n, "health": h} for n, h in health.items()]
    return [httpx.Response(200, json={"data": clusters}), httpx.Response(200, json={"data": jobs})]


def test_a_failover_move_picks_jobs_drover_may_move() -> None:
    """Jobs on a cluster whose other one is healthy; from a cluster that is not healthy only
    the running jobs known to fence themselves."""
    acks = Acks()
    op = Scripted([], acks)
    op.stack.cluster_names = lambda: ["A", "B"]  # type: ignore[method-assign]
    jobs = [
        {"name": "j1", "cluster": "A", "state": "RUNNING", "self_fencing": True},
        {"name": "j2", "cluster": "A", "state": "RUNNING", "self_fencing": None},
        {"name": "j3", "cluster": "A", "state": "STARTING", "self_fencing": True},
        {"name": "j4", "cluster": "B", "state": "RUNNING", "self_fencing": True},
    ]
    names = ["j1", "j2", "j3", "j4"]
    op.answers = _listing(jobs, {"A": "NORMAL", "B": "NORMAL"})
    assert op._movable(names, ["A", "B"]) == {"A": ["j1", "j2", "j3"], "B": ["j4"]}
    op.answers = _listing(jobs, {"A": "VOTE_ABNORMAL", "B": "NORMAL"})
    assert op._movable(names, ["A", "B"]) == {"A": ["j1"]}  # B's target A is down
    op.answers = _listing(jobs, {"A": "NORMAL", "B": "THRESHOLD_ABNORMAL"})
    assert op._movable(names, ["A", "B"]) == {"B": ["j4"]}
    op.answers = [None]
    assert op._movable(names, ["A", "B"]) == {}  # no answer: nothing known movable


def test_whole_cluster_faults_come_in_rounds_on_the_clusters_in_turn() -> None:
    """Both faults of a round hit one cluster, the rounds take the clusters in turn, and the
    first round's cluster comes from the seed."""
    fake = {
        "last_lost": "",
        "lost_count": 0,
        "cluster_names": lambda self: ["a", "b"],
        "next_lost": Stack.next_lost,
    }
    firsts = set()
    for seed in range(8):
        stack = cast(Stack, type("S", (), dict(fake))())
        hit = [stack.next_lost(random.Random(f"{seed}/{n}")) for n in range(40)]
        assert all(hit[i] == hit[i + 1] for i in range(0, 40, 2))  # a round: one cluster
        assert all(hit[i] != hit[i + 2] for i in range(0, 38, 2))  # the next: the other one
        firsts.add(hit[0])
    assert firsts == {"a", "b"}


@pytest.mark.serial  # measures time: not beside the e2e tests at nice 19
def test_a_paced_lane_meets_its_quota_of_each_kind_past_its_end() -> None:
    """With a pace the n-th fault starts no earlier than n paces after the first; with a quota
    the lane goes on past its end until every kind came that often."""
    import time

    from chaos.run import Lane

    starts: list[tuple[str, float]] = []

    def fault(kind: str) -> Any:
        def inject(stack: Stack, rng: random.Random) -> str:
            starts.append((kind, time.monotonic()))
            return kind

        return inject

    class Recorded:
        def add(self, records: list[Any]) -> None:
            pass

    now = time.monotonic()
    lane = Lane(
        "cluster",
        cast(Stack, None),
        {"x": fault("x"), "y": fault("y")},
        7,
        cast(Any, Recorded()),
        now + 0.05,  # ends before the pace would let the quota come in time
        now,
        (0.0, 0.01),
        pace=0.1,
        quota=3,
        overrun=5.0,
    )
    lane.start()
    lane.join(timeout=10)
    assert not lane.is_alive() and lane.error is None
    assert lane.injected == {"x": 3, "y": 3}
    origin = starts[0][1]
    assert all(t - origin >= n * 0.1 - 0.005 for n, (_, t) in enumerate(starts))
    assert lane.first is not None and lane.last is not None and lane.last > lane.first
    # without a quota it stops at its end
    short = Lane("c", cast(Stack, None), {"x": fault("x")}, 7, cast(Any, Recorded()),
                 time.monotonic() + 0.05, now, (0.0, 0.01), pace=0.1)  # fmt: skip
    short.start()
    short.join(timeout=10)
    assert sum(short.injected.values()) == 1


def test_a_process_knows_its_parent() -> None:
    """What tells a fork of a driver's JVM (before its exec) from a second driver."""
    import os

    from harness.procs import parent_pid

    assert parent_pid(os.getpid()) == os.getppid()
    assert parent_pid(2**22 + 7) is None  # no such process
