"""The typed client (``drover/api_client.py``) retries what is safe to send again: idempotent
methods and calls with an ``Idempotency-Key`` on 429/502/503/504 or no answer, waiting what
``Retry-After`` says (else an exponential backoff), never more than its ``retries``; a 429 is
retried whatever the method (the node refused before doing anything)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from drover.api_client import ApiError, DroverClient, Unreachable


def client(
    answers: list[httpx.Response | Exception],
) -> tuple[DroverClient, list[str], list[float]]:
    sent: list[str] = []
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    http = httpx.Client(transport=httpx.MockTransport(handler))
    made = DroverClient("http://node", token="t", http=http, retries=3, sleep=slept.append)
    return made, sent, slept


def ok() -> httpx.Response:
    return httpx.Response(200, json={"name": "orders", "state": "RUNNING"})


def busy(status: int = 503, retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(
        status, json={"type": "x", "title": "y", "status": status}, headers=headers
    )


def test_a_read_waits_what_retry_after_says_then_succeeds() -> None:
    api, sent, slept = client([busy(503, "2"), busy(429, "1"), ok()])
    assert api.get_job("orders")["state"] == "RUNNING"
    assert sent == ["GET"] * 3 and slept == [2.0, 1.0]


def test_without_retry_after_the_waits_grow() -> None:
    refused = httpx.ConnectError("refused")
    api, sent, slept = client([refused, busy(502), busy(504), ok()])
    assert api.get_job("orders")["name"] == "orders"
    assert len(sent) == 4 and slept[0] < slept[1] < slept[2] and slept[0] >= 0.25


def test_it_gives_up_after_its_retries() -> None:
    api, sent, _ = client([busy(503)] * 4)
    with pytest.raises(ApiError) as error:
        api.get_job("orders")
    assert error.value.status == 503 and len(sent) == 4
    api, sent, _ = client([httpx.ConnectError("refused")] * 4)
    with pytest.raises(Unreachable):
        api.get_job("orders")
    assert len(sent) == 4


@pytest.mark.parametrize(
    ("call", "retried"),
    [
        (lambda api: api.start_job("orders"), False),  # a POST: maybe done once already
        (lambda api: api.start_job("orders", idempotency_key="k1"), True),
        (lambda api: api.delete_job("orders"), True),
    ],
)
def test_only_what_is_safe_to_repeat_is_sent_again(
    call: Callable[[DroverClient], object], retried: bool
) -> None:
    api, sent, _ = client([busy(503), httpx.Response(204 if retried else 200, json=None)])
    if retried:
        call(api)
        assert len(sent) == 2
    else:
        with pytest.raises(ApiError):
            call(api)
        assert len(sent) == 1


def test_a_429_is_retried_whatever_the_method() -> None:
    api, sent, slept = client([busy(429, "3"), ok()])
    api.start_job("orders")
    assert sent == ["POST", "POST"] and slept == [3.0]


def test_retry_after_is_capped() -> None:
    api, _, slept = client([busy(503, "3600"), ok()])
    api.get_job("orders")
    assert slept == [30.0]
