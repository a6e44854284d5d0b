"""The chaos operator reports exactly the writes the API acknowledged: retries with
one Idempotency-Key while the outcome is unknown, counts "applied, answer lost" as acknowledged,
a refusal as nothing, and a write never answered as in doubt."""

from __future__ import annotations

import random
from typing import Any, cast

import httpx

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
        stack = cast(Stack, type("S", (), {"jobs": ["j1"], "clusters": {"A": None}})())
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
