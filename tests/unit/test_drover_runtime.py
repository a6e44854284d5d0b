"""The pipelines' self-fencing (pipelines/drover_runtime.py) against a stub fence endpoint."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pipelines.drover_runtime import (
    FENCED_LINE_PREFIX,
    LAPSED_LINE_PREFIX,
    LEASE_HEADER,
    LEASE_LAPSED_EXIT,
    WARNING_PREFIX,
    FencedOut,
    HttpFence,
    LeaseLapsed,
    RunContext,
    Verdict,
    fence_verdict,
    read_commit_log,
)

JOB, TOKEN = "orders", "tok-1"


@dataclass
class Stub:
    """A fence endpoint whose answer the test sets; records the requests it got."""

    status: int = 200
    body: Any = None
    delay_s: float = 0.0
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    url: str = ""

    def answer(self, token: str | None, status: int = 200, **extra: Any) -> None:
        """Answer ``token`` (a confirmation of ours grants a 60 s lease unless ``extra`` says)."""
        self.status = status
        lease = {"lease_seconds": 60.0} if token == TOKEN else {}
        self.body = {"job": JOB, "current_run_id": 2, "fencing_token": token, **lease, **extra}


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()
    state.answer(TOKEN)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            state.requests.append((self.path, dict(self.headers)))
            if state.delay_s:
                time.sleep(state.delay_s)  # the stub plays a slow node
            data = json.dumps(state.body).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def dead_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_ctx(check: Callable[[RunContext, int], bool], **kw: Any) -> RunContext:
    return RunContext(job=JOB, run_id="1", fencing_token=TOKEN, fence_check=check, **kw)


# --------------------------------------------------------------------------- the pure decision


@pytest.mark.parametrize(
    ("status", "body", "verdict"),
    [
        (200, {"job": JOB, "fencing_token": TOKEN}, Verdict.CURRENT),
        (200, {"job": JOB, "fencing_token": "tok-2", "current_run_id": 2}, Verdict.SUPERSEDED),
        (200, {"job": JOB, "fencing_token": None, "run_state": "KILLED"}, Verdict.SUPERSEDED),
        (404, {"type": "urn:drover:problem:not-found", "job": JOB}, Verdict.SUPERSEDED),
        # a 404 that does not name the job: not a fence endpoint (wrong URL, old node)
        (404, {"type": "urn:drover:problem:not-found", "detail": "Not Found"}, Verdict.NO_ANSWER),
        # no run of the job holds our token (the job, and its runs, were deleted)
        (401, {"type": "urn:drover:problem:unauthenticated", "job": JOB}, Verdict.SUPERSEDED),
        # a 401 that does not name the job: a gateway refusing us, not the fence's answer
        (401, {"type": "urn:drover:problem:unauthenticated"}, Verdict.NO_ANSWER),
        (401, {"type": "urn:drover:problem:other", "job": JOB}, Verdict.NO_ANSWER),
        (503, {"type": "urn:drover:problem:store-unavailable"}, Verdict.NO_ANSWER),
        (200, {"job": "other", "fencing_token": TOKEN}, Verdict.NO_ANSWER),
        (200, {"job": JOB}, Verdict.NO_ANSWER),
        (200, ["not", "an", "object"], Verdict.NO_ANSWER),
    ],
)
def test_fence_verdict(status: int, body: Any, verdict: Verdict) -> None:
    assert fence_verdict(JOB, TOKEN, status, body)[0] is verdict


# --------------------------------------------------------------------------- HttpFence


def test_current_token_goes_on_and_sends_auth(stub: Stub) -> None:
    fence = HttpFence(stub.url, auth="secret")
    ctx = make_ctx(fence)
    ctx.on_batch(0)
    ctx.on_batch(1)
    assert ctx.fenced_out is None
    assert [path for path, _ in stub.requests] == [f"/v1/jobs/{JOB}/fence"] * 2
    assert stub.requests[0][1]["Authorization"] == "Bearer secret"


def test_no_auth_header_without_a_token(stub: Stub) -> None:
    make_ctx(HttpFence(stub.url)).on_batch(0)
    assert "Authorization" not in stub.requests[0][1]


@pytest.mark.parametrize("current", ["tok-2", None])
def test_superseded_or_null_token_fences_out(stub: Stub, current: str | None) -> None:
    ctx = make_ctx(HttpFence(stub.url))
    ctx.on_batch(0)
    stub.answer(current, run_state="KILLED")
    with pytest.raises(FencedOut, match="batch 1"):
        ctx.on_batch(1)
    assert ctx.fenced_out is not None and "no longer current" in ctx.fenced_out
    # once fenced out, always fenced out, without asking again
    asked = len(stub.requests)
    stub.answer(TOKEN)
    assert not ctx.is_current(2)
    assert len(stub.requests) == asked


def test_deleted_job_fences_out(stub: Stub) -> None:
    stub.status, stub.body = 404, {"type": "urn:drover:problem:not-found", "job": JOB}
    with pytest.raises(FencedOut, match="no longer exists"):
        make_ctx(HttpFence(stub.url)).on_batch(0)


def test_unreachable_keeps_going_with_a_warning_while_the_lease_holds(
    stub: Stub, dead_url: str
) -> None:
    out = io.StringIO()
    # the fence's clock stands still: the lease left is the whole 60 s however long checks take
    fence = HttpFence(stub.url, timeout_s=0.5, stream=out, clock=lambda: 100.0)
    ctx = make_ctx(fence)
    ctx.on_batch(0)  # confirmed, with a 60 s lease
    fence.urls = (dead_url,)  # Drover becomes unreachable
    ctx.on_batch(1)
    ctx.on_batch(2)
    assert ctx.fenced_out is None
    warnings = [line for line in out.getvalue().splitlines() if line.startswith(WARNING_PREFIX)]
    assert len(warnings) == 2 and "lease valid for 60" in warnings[0]


def test_a_run_that_never_got_a_lease_commits_nothing(dead_url: str) -> None:
    ctx = make_ctx(HttpFence(dead_url, timeout_s=0.5, stream=io.StringIO()))
    with pytest.raises(LeaseLapsed, match="it never got a fence lease"):
        ctx.on_batch(0)
    assert ctx.lease_lapsed and ctx.exit_code == LEASE_LAPSED_EXIT


def test_a_run_waits_for_its_first_lease_then_gives_up(dead_url: str) -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the run's clock moves only when it waits
        slept.append(seconds)
        now[0] += seconds

    fence = HttpFence(
        dead_url,
        timeout_s=0.2,
        stream=io.StringIO(),
        first_lease_wait_s=30.0,
        clock=lambda: now[0],
        sleep=sleep,
    )
    ctx = make_ctx(fence)
    with pytest.raises(LeaseLapsed, match="it never got a fence lease"):
        ctx.on_batch(0)
    assert sum(slept) >= 30.0 and all(s <= 3.0 for s in slept)  # asked again while it waited
    assert ctx.lease_lapsed and ctx.exit_code == LEASE_LAPSED_EXIT


def test_a_node_back_within_the_first_lease_wait_lets_the_run_go_on(
    stub: Stub, dead_url: str
) -> None:
    asked: list[float] = []

    def sleep(seconds: float) -> None:  # Drover's node is back after the first wait
        asked.append(seconds)
        fence.urls = (stub.url,)

    fence = HttpFence(
        dead_url, timeout_s=0.2, stream=io.StringIO(), first_lease_wait_s=30.0, sleep=sleep
    )
    ctx = make_ctx(fence)
    ctx.on_batch(0)
    assert ctx.fenced_out is None and not ctx.lease_lapsed and fence.leased()
    assert len(asked) == 1


@pytest.mark.serial  # measures time: not beside the e2e tests at nice 19
def test_slow_node_counts_as_unreachable(stub: Stub) -> None:
    out = io.StringIO()
    ctx = make_ctx(HttpFence(stub.url, timeout_s=0.2, stream=out))
    ctx.on_batch(0)
    stub.delay_s = 1.0
    started = time.monotonic()
    ctx.on_batch(1)
    assert time.monotonic() - started < 0.9
    assert WARNING_PREFIX in out.getvalue()


def test_first_answering_url_decides_and_is_asked_first_next_time(
    stub: Stub, dead_url: str
) -> None:
    out = io.StringIO()
    fence = HttpFence(f"{dead_url}, {stub.url}/", timeout_s=0.5, stream=out)
    ctx = make_ctx(fence)
    ctx.on_batch(0)
    assert out.getvalue() == ""  # the second URL answered: no warning
    stub.answer("tok-2")
    with pytest.raises(FencedOut):
        ctx.on_batch(1)
    assert fence.urls[fence._preferred] == stub.url


def test_blind_limit_stops_after_the_bound(stub: Stub, dead_url: str) -> None:
    clock, out = Clock(), io.StringIO()
    fence = HttpFence(stub.url, timeout_s=0.5, max_blind_s=30, clock=clock, stream=out)
    ctx = make_ctx(fence)
    ctx.on_batch(0)  # confirmed at t=1000
    fence.urls = (dead_url,)  # Drover becomes unreachable
    clock.now += 20
    ctx.on_batch(1)  # blind for 20 s: goes on
    assert "blind limit 30 s" in out.getvalue()
    clock.now += 11
    with pytest.raises(FencedOut, match="no Drover fence URL answered for 31 s"):
        ctx.on_batch(2)


def test_blind_time_counts_from_the_last_confirmation(stub: Stub) -> None:
    clock = Clock()
    fence = HttpFence(stub.url, max_blind_s=30, clock=clock, stream=io.StringIO())
    clock.now += 100  # a long time passes while Drover answers
    make_ctx(fence).on_batch(0)
    assert fence.last_confirmed == clock.now


# --------------------------------------------------------------------------- leases


def test_every_check_asks_for_a_lease(stub: Stub) -> None:
    make_ctx(HttpFence(stub.url)).on_batch(0)
    assert stub.requests[0][1][LEASE_HEADER] == "1"


def test_the_lease_lapses_without_renewal_and_the_run_stops(stub: Stub, dead_url: str) -> None:
    clock = Clock()
    fence = HttpFence(stub.url, timeout_s=0.5, clock=clock, stream=io.StringIO())
    ctx = make_ctx(fence)
    ctx.on_batch(0)  # confirmed at t=1000 with a 60 s lease
    fence.urls = (dead_url,)  # Drover becomes unreachable
    clock.now += 59.9
    ctx.on_batch(1)  # still leased: goes on
    clock.now += 0.2
    with pytest.raises(LeaseLapsed, match="fence lease ran out 0.1 s ago") as raised:
        ctx.on_batch(2)
    assert "nothing of batch 2 was committed" in str(raised.value)
    assert isinstance(raised.value, FencedOut)  # stops like a fenced run ...
    assert ctx.lease_lapsed and ctx.exit_code == LEASE_LAPSED_EXIT  # ... with its own exit code
    fence.urls = (stub.url,)  # Drover is back: the run stays stopped (Drover restarts it)
    assert not ctx.is_current(3)


def test_the_lease_counts_from_before_the_request_was_sent(stub: Stub) -> None:
    clock = Clock()
    fence = HttpFence(stub.url, clock=clock, stream=io.StringIO())
    stub.answer(TOKEN, lease_seconds=10.0)
    real_get = fence._get

    def slow_get(*args: Any, **kw: Any) -> Any:
        clock.now += 4  # the answer takes 4 s to come back
        return real_get(*args, **kw)

    fence._get = slow_get  # type: ignore[method-assign]
    make_ctx(fence).on_batch(0)
    assert fence.lease_until == 1010.0  # sent at 1000, not answered at 1004 + 10


def test_a_node_that_grants_no_lease_confirms_but_the_next_one_is_asked_for_a_lease(
    stub: Stub,
) -> None:
    clock = Clock()
    fence = HttpFence(stub.url, clock=clock, stream=io.StringIO())
    ctx = make_ctx(fence)
    ctx.on_batch(0)  # a lease until 1060
    stub.answer(TOKEN, lease_seconds=None)  # an older node: confirms, grants no lease
    clock.now += 30
    ctx.on_batch(1)  # confirmed, still within the lease
    assert fence.lease_until == 1060.0
    clock.now += 31
    with pytest.raises(LeaseLapsed, match="confirmed only by nodes that grant no lease"):
        ctx.on_batch(2)


def test_a_write_that_outlasts_the_lease_is_not_committed(stub: Stub) -> None:
    clock = Clock()
    ctx = make_ctx(HttpFence(stub.url, clock=clock, stream=io.StringIO()))
    written: list[int] = []

    def slow_write(df: Any, batch_id: int) -> None:
        written.append(batch_id)
        clock.now += 61  # the write takes longer than the lease

    write = ctx.fenced(slow_write)
    with pytest.raises(LeaseLapsed, match="the write outlasted it"):
        write(None, 0)  # raising in foreachBatch: Spark commits nothing of batch 0
    assert written == [0] and ctx._state.finished_batch == -1


def test_await_termination_renews_an_idle_lease_and_exits_75_once_it_lapsed(
    stub: Stub, dead_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    fence = HttpFence(stub.url, timeout_s=0.3, clock=clock)
    ctx = make_ctx(fence, idle_check_s=0)  # no idle check: only the lease asks
    ctx.on_batch(0)
    asked = len(stub.requests)

    def idle(call: int) -> None:
        clock.now += 10  # ten seconds per poll of an idle stream
        ctx._state.last_check -= 2  # and more than a second since the last check
        if call == 6:
            fence.urls = (dead_url,)  # Drover becomes unreachable

    spark, query = FakeSpark(), FakeQuery(idle)
    assert ctx.await_termination(query, spark) == LEASE_LAPSED_EXIT  # type: ignore[arg-type]
    assert len(stub.requests) > asked  # renewed in its last quarter while Drover answered
    assert query.stopped and spark.stopped
    lines = capsys.readouterr().err.splitlines()
    assert [line for line in lines if line.startswith(LAPSED_LINE_PREFIX)] == [
        f"{LAPSED_LINE_PREFIX} {ctx.fenced_out}"
    ]
    assert not any(line.startswith(FENCED_LINE_PREFIX) for line in lines)


# --------------------------------------------------------------------------- RunContext


def test_unmanaged_runs_never_check() -> None:
    def boom(ctx: RunContext, batch_id: int) -> bool:
        raise AssertionError("an unmanaged run must not check")

    RunContext(fence_check=boom).on_batch(0)


def test_injected_check_returning_false_fences_out() -> None:
    ctx = make_ctx(lambda c, b: b < 3)
    ctx.on_batch(2)
    with pytest.raises(FencedOut, match="nothing of batch 3 was committed"):
        ctx.on_batch(3)


def test_fenced_wrapper_writes_nothing_when_superseded() -> None:
    written: list[int] = []
    ctx = make_ctx(lambda c, b: b < 1)
    write = ctx.fenced(lambda df, batch_id: written.append(batch_id))
    write(None, 0)  # type: ignore[arg-type]
    with pytest.raises(FencedOut):
        write(None, 1)  # type: ignore[arg-type]
    assert written == [0]


class FakeQuery:
    """Plays a StreamingQuery: terminates with ``error`` after ``polls`` polls."""

    def __init__(self, on_poll: Callable[[int], None], polls: int = 10_000) -> None:
        self.on_poll, self.polls, self.calls = on_poll, polls, 0
        self.isActive, self.stopped = True, False

    def awaitTermination(self, timeout: int | None = None) -> bool:  # noqa: N802 - pyspark's
        self.calls += 1
        self.on_poll(self.calls)
        return not self.isActive

    def stop(self) -> None:
        self.stopped, self.isActive = True, False


class FakeSpark:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_await_termination_turns_fenced_out_into_a_clean_exit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ctx = make_ctx(lambda c, b: b < 1)
    write = ctx.fenced(lambda df, batch_id: None)

    def batch_fails(call: int) -> None:
        write(None, call - 1)  # type: ignore[arg-type]  # raises FencedOut at batch 1

    spark, query = FakeSpark(), FakeQuery(batch_fails)
    assert ctx.await_termination(query, spark) == 0  # type: ignore[arg-type]
    assert spark.stopped
    lines = capsys.readouterr().err.splitlines()
    assert [line for line in lines if line.startswith(FENCED_LINE_PREFIX)] == [
        f"{FENCED_LINE_PREFIX} {ctx.fenced_out}"
    ]


def test_await_termination_propagates_other_failures() -> None:
    def fails(call: int) -> None:
        raise RuntimeError("the pipeline is broken")

    spark = FakeSpark()
    with pytest.raises(RuntimeError, match="broken"):
        make_ctx(lambda c, b: True).await_termination(FakeQuery(fails), spark)  # type: ignore[arg-type]
    assert not spark.stopped


def test_idle_check_stops_a_superseded_idle_stream(capsys: pytest.CaptureFixture[str]) -> None:
    current = {"ok": True}
    ctx = make_ctx(lambda c, b: current["ok"], idle_check_s=0.05)

    def idle(call: int) -> None:
        if call == 3:
            current["ok"] = False  # superseded while no batch runs
        time.sleep(0.06)  # one "poll" of awaitTermination

    spark, query = FakeSpark(), FakeQuery(idle)
    assert ctx.await_termination(query, spark) == 0  # type: ignore[arg-type]
    assert query.stopped and spark.stopped
    assert "stopped while idle" in capsys.readouterr().err


# --------------------------------------------------------------------------- the start check


class _Conf(dict[str, str]):
    """What ``SparkContext.getConf()`` offers the runtime: ``get(key, default)``."""


@dataclass
class _FakeContext:
    conf: _Conf
    applicationId: str = "app-20261123084423-0009"  # noqa: N815 - pyspark's naming

    def getConf(self) -> _Conf:  # noqa: N802 - pyspark's naming
        return self.conf


@dataclass
class _FakeSession:
    sparkContext: _FakeContext  # noqa: N815 - pyspark's naming


def _session(url: str) -> Any:
    conf = _Conf(
        {
            "spark.drover.job": JOB,
            "spark.drover.runId": "1",
            "spark.drover.fencingToken": TOKEN,
            "spark.drover.fenceUrls": url,
        }
    )
    return _FakeSession(_FakeContext(conf))


def test_from_spark_checks_in_at_once(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    """A managed run asks its fence as soon as the context exists (Drover records that the
    run fences itself), then before each batch."""
    ctx = RunContext.from_spark(_session(stub.url))
    assert [path for path, _ in stub.requests] == [f"/v1/jobs/{JOB}/fence"]
    assert ctx.fenced_out is None
    assert "drover-runtime: started app_id=app-20261123084423-0009" in capsys.readouterr().err
    ctx.on_batch(0)
    assert len(stub.requests) == 2


def test_a_run_superseded_at_start_commits_no_batch(stub: Stub) -> None:
    stub.answer("tok-2")
    ctx = RunContext.from_spark(_session(stub.url), announce=False)
    assert ctx.fenced_out is not None and "superseded before its first batch" in ctx.fenced_out
    with pytest.raises(FencedOut):
        ctx.on_batch(0)
    assert len(stub.requests) == 1  # decided once, never asked again


def test_the_commit_log_records_the_run_of_each_batch_handed_to_spark(
    stub: Stub, tmp_path: Any
) -> None:
    log = str(tmp_path / "commits")
    ctx = make_ctx(HttpFence(stub.url))
    write = ctx.fenced(lambda df, batch_id: None, commit_log=log)
    write(None, 0)  # type: ignore[arg-type]
    write(None, 1)  # type: ignore[arg-type]
    stub.answer("tok-2")
    with pytest.raises(FencedOut):
        write(None, 2)  # type: ignore[arg-type]
    assert [(b, r) for b, r, _ in read_commit_log(log)] == [(0, "1"), (1, "1")]
