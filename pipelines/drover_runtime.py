"""What every Drover pipeline uses to know which run it is, and to fence itself.

A pipeline does::

    spark = SparkSession.builder.appName("my-pipeline").getOrCreate()  # any name will do
    ctx = RunContext.from_spark(spark)
    query = df.writeStream.foreachBatch(ctx.fenced(write_batch))...start()
    return ctx.await_termination(query)            # 0 also when fenced out

Import it as ``import drover_runtime`` first: the standalone backend ships this file as a py-file
(top-level module ``drover_runtime``); ``pipelines.drover_runtime`` is the fallback when a
pipeline is imported from the repository.

Identity
--------
Drover passes the run's identity as Spark properties and, for backends that cannot set Spark
properties, as environment variables (Spark properties win):

Spark property / environment variable:

- ``spark.drover.job`` / ``DROVER_JOB``: the job's name
- ``spark.drover.runId`` / ``DROVER_RUN_ID``: the run's id
- ``DROVER_FENCING_TOKEN``: this run's fencing token (Drover passes it in the environment only,
  never on a command line; the ``spark.drover.fencingToken`` property is still read when set)
- ``spark.drover.checkpointLocation`` / ``DROVER_CHECKPOINT_LOCATION``: the run's checkpoint
- ``spark.drover.fenceUrls`` / ``DROVER_FENCE_URLS``: Drover API base URLs, comma-separated
  (any node answers)
- ``spark.drover.fenceAuth`` / ``DROVER_FENCE_TOKEN_AUTH``: sent as ``Authorization: Bearer``
  with every fence call when set (a gateway in front of the nodes); the node itself
  authenticates the run by its fencing token (``X-Drover-Fencing-Token``)
- ``spark.drover.fenceMaxBlindSeconds`` / ``DROVER_FENCE_MAX_BLIND_SECONDS``: an extra bound,
  shorter than the lease, on the time without a confirmation (default 0 = the lease alone)
- ``spark.drover.fenceTimeoutSeconds`` / ``DROVER_FENCE_TIMEOUT_SECONDS``: per URL (default 2)
- ``spark.drover.fenceIdleCheckSeconds`` / ``DROVER_FENCE_IDLE_CHECK_SECONDS``: see below
  (default 30, 0 = never)

Self-fencing (a superseded run stops before it commits)
-------------------------------------------------------
When :meth:`RunContext.from_spark` creates the context, and before each micro-batch is written
(:meth:`RunContext.on_batch`, which :meth:`RunContext.fenced` calls for you), the run asks
``GET <url>/v1/jobs/<job>/fence`` (with its token) of the fence URLs in turn until one answers
(the one that answered last is asked first next time). Drover records the first check a run
proves with its token: that is how a job shows it fences itself (its ``self_fencing`` field); a
pipeline that never asks (plain PySpark, no drover_runtime) is shown as not self-fencing. The
answer means:

- its ``fencing_token`` equals ours -> this run is current, the batch goes on;
- another token, ``null`` (the current run is closed, or there is none), or a 404 or 401
  problem naming the job (the job was deleted; no run of it holds our token) -> this run is
  superseded: :class:`FencedOut` is raised inside the
  batch, so nothing of the batch is written and Spark does not commit it; the query fails and
  :meth:`RunContext.await_termination` turns that into a clean exit: SparkSession stopped, one
  ``drover-runtime: fenced out: ...`` line on stderr, exit code 0;
- no URL answers (timeout, refused, 5xx, not a fence answer) -> the batch goes on (with a
  warning) **only while the run holds a fence lease**; see below.

Leases (fail-closed at a bound the operator chose)
--------------------------------------------------
Every answer that confirms our token also grants a *lease* (``lease_seconds`` in the answer;
the run asks for one with ``X-Drover-Fence-Lease: 1``): this run may commit for that long
without hearing from Drover again. The lease is measured on this process's monotonic clock from
*before* the request that got the answer was sent, so it never ends later than the lease Drover
recorded for the run. A batch is written only while the run holds a valid lease; once it lapses
without renewal the run stops committing and exits: :class:`LeaseLapsed` (a kind of
:class:`FencedOut`) is raised in the batch, nothing of it is written, one
``drover-runtime: lease lapsed: ...`` line goes to stderr and the process exits with code
:data:`LEASE_LAPSED_EXIT` (75), which Drover does not count as the job's failure: it starts the
run again when it is back. A batch whose write outlasts the lease is not committed either (the
check after the write raises, so Spark does not commit it; the next run does it again).
``await_termination`` renews the lease of an idle stream before it runs out and stops the query
as soon as it lapsed.

Why: Drover counts a run on a dead or cut-off cluster as gone once its last lease has surely
lapsed (the lease Drover recorded, plus a margin for clocks), and only then starts the job on
another cluster -- so a failover after an AZ loss completes without ever reaching the stranded
driver, and the job never runs twice. The price: **a platform-wide Drover outage longer than
the lease stops every pipeline** (each exits with code 75 at its next batch after the lease
ran out; Drover restarts them from their checkpoints when it is back). The lease is the node
setting ``DROVER_FENCE_LEASE_SECONDS`` (90 s by default); choose it longer than the Drover
outages you want pipelines to ride out, and shorter than the time an AZ's jobs may wait to move.
A node that grants no leases (an older version) still confirms the batch, but only a lease
renews the bound: the run asks the next URL for one. A run that never got a lease (no answer
at all since it started) commits nothing: its first batch waits, asking again, up to
``fenceFirstLeaseWaitSeconds`` (default 60) from the run's start, then it exits with code 75.

Unmanaged runs (no job, run id or token: started by hand) never check. A managed run without
fence URLs cannot check and says so once on stderr. An idle stream (no batches, e.g. no new
files) commits nothing, but holds its cluster resources: ``await_termination`` also runs the check
from the main thread every ``fenceIdleCheckSeconds`` (0 = never) when no batch did for that long,
and stops the query when superseded.

Cost: one check is one small HTTP GET (the job by name and its current run by id on the node).
Measured on this 2-core machine (load 2-5 from other work) against a real node API (uvicorn in a
thread, SQLite store, loopback), 200 sequential checks, four runs: median 1.6-2.2 ms, p99
2.2-9.3 ms (``tests/integration/test_pipelines.py::test_fence_endpoint_and_check_cost``) -- cheap
enough to run before every micro-batch, whose triggers are seconds apart. From supersession in
the store to the driver process gone: ~1 s with a 2 s trigger (same file,
``test_superseded_pipeline_exits_by_itself``).

Progress
--------
Every fence check also carries the run's streaming progress (``X-Drover-Progress``, one
compact JSON object; see :func:`progress_report`): the batch it is for, Spark's last progress
of the query :meth:`RunContext.watch` names (``await_termination`` watches its query) -- the
last completed batch's id, input rows, input and processing rates, duration and timestamp --
and the milliseconds between the starts of the last two batches. Drover keeps the latest per
run, a short history, and marks a RUNNING job stalled when the reports stop moving for its
``stall_after`` (docs/observability.md). A report that cannot be had (the query gone, a JVM
hiccup) is left out of that check; it never stands in the way of the fence. Cost: reading
``lastProgress`` once per batch, and a header of about 200 bytes.

Graceful stop
-------------
A stop, restart or upgrade may ask the run to finish its current micro-batch and exit instead
of being killed: the fence answer for our token then says ``"stop": true``. The batch that check
was for is written and committed as usual; any later batch is refused before it writes anything
(:class:`StopRequested`, so Spark commits nothing of it and the next run does it again: batch ids
go on without a gap); :meth:`RunContext.await_termination` stops the query once the batch is
committed (the trigger is over), tells Drover the last batch it committed (one more fence check
with ``X-Drover-Stopped-At-Batch``, recorded as the run's ``stop_batch``), prints one
``drover-runtime: stopped gracefully ...`` line and returns 0. Drover kills a run that has not
stopped after the grace period; an older runtime that ignores the field is killed then too.

``fence_check=`` stays injectable (tests, other transports): any ``(ctx, batch_id) -> bool``;
it may also raise :class:`FencedOut` itself with a reason. Only :class:`HttpFence` holds leases:
an injected check is trusted as it answers.

Only the standard library and pyspark are used, so the module can ship with any pipeline.
"""

from __future__ import annotations

import enum
import json
import math
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

CONF_PREFIX = "spark.drover."
#: Spark property -> environment variable fallback, per RunContext field
_KEYS = {
    "job": ("spark.drover.job", "DROVER_JOB"),
    "run_id": ("spark.drover.runId", "DROVER_RUN_ID"),
    "fencing_token": ("spark.drover.fencingToken", "DROVER_FENCING_TOKEN"),
    "checkpoint_location": ("spark.drover.checkpointLocation", "DROVER_CHECKPOINT_LOCATION"),
}
FENCE_URLS = ("spark.drover.fenceUrls", "DROVER_FENCE_URLS")
#: the header carrying the run's fencing token to the fence endpoint
FENCING_TOKEN_HEADER = "X-Drover-Fencing-Token"
#: the header carrying the run's streaming progress with its fence check (see progress_report)
PROGRESS_HEADER = "X-Drover-Progress"
#: the header of a gracefully stopped run's last check: the last batch it committed
STOPPED_HEADER = "X-Drover-Stopped-At-Batch"
FENCE_AUTH = ("spark.drover.fenceAuth", "DROVER_FENCE_TOKEN_AUTH")
FENCE_MAX_BLIND = ("spark.drover.fenceMaxBlindSeconds", "DROVER_FENCE_MAX_BLIND_SECONDS")
FENCE_TIMEOUT = ("spark.drover.fenceTimeoutSeconds", "DROVER_FENCE_TIMEOUT_SECONDS")
#: how long a run that never got a lease keeps asking for its first one (committing nothing
#: meanwhile) before it exits: a node restarting right after the submission is not a reason to
#: end the run
FENCE_FIRST_LEASE_WAIT = (
    "spark.drover.fenceFirstLeaseWaitSeconds",
    "DROVER_FENCE_FIRST_LEASE_WAIT_SECONDS",
)
DEFAULT_FIRST_LEASE_WAIT_S = 60.0
FENCE_IDLE_CHECK = ("spark.drover.fenceIdleCheckSeconds", "DROVER_FENCE_IDLE_CHECK_SECONDS")
#: the header by which a run asks for a fence lease with its check (scheduler/decisions/leases.py)
LEASE_HEADER = "X-Drover-Fence-Lease"
#: the exit code of a run whose lease lapsed (EX_TEMPFAIL; Drover's LEASE_LAPSED_EXIT)
LEASE_LAPSED_EXIT = 75

DEFAULT_FENCE_TIMEOUT_S = 2.0
DEFAULT_IDLE_CHECK_S = 30.0
#: the batch id the idle check passes to the fence check
IDLE_CHECK = -1
#: the batch id of the check from_spark makes when the run starts
START_CHECK = -2
#: how often await_termination wakes up to look at the fence state
_AWAIT_POLL_S = 1
#: ... and while a graceful stop waits for its batch to commit
_STOP_POLL_S = 0.2

#: the prefix of the line :meth:`RunContext.announce` prints; cluster backends look for it
STARTED_LINE_PREFIX = "drover-runtime: started"
#: the prefix of the one line a fenced-out run prints before it exits with code 0
FENCED_LINE_PREFIX = "drover-runtime: fenced out:"
#: the prefix of the one line a gracefully stopped run prints before it exits with code 0
STOPPED_LINE_PREFIX = "drover-runtime: stopped gracefully"
#: the prefix of the one line a run whose lease lapsed prints before it exits with code 75
LAPSED_LINE_PREFIX = "drover-runtime: lease lapsed:"
WARNING_PREFIX = "drover-runtime: warning:"

FenceCheck = Callable[["RunContext", int], bool]


def _say(line: str, stream: IO[str] | None = None) -> None:
    print(line, file=stream or sys.stderr, flush=True)


def _what(batch_id: int) -> str:
    if batch_id == START_CHECK:
        return "superseded before its first batch"
    if batch_id < 0:
        return "stopped while idle (no batch in flight)"
    return f"nothing of batch {batch_id} was committed"


def always_current(ctx: RunContext, batch_id: int) -> bool:
    """The fence check of a run that cannot check: every batch may commit."""
    return True


class FencedOut(RuntimeError):
    """This run is no longer the job's current run: it must not commit anything more."""


class LeaseLapsed(FencedOut):
    """This run's fence lease lapsed without renewal (Drover unreachable): it must not commit
    anything more, and exits with :data:`LEASE_LAPSED_EXIT` so that Drover starts it again."""


class StopRequested(RuntimeError):
    """Drover asked this run to stop after an earlier batch: this batch is not written (the
    next run does it again from the checkpoint)."""


# --------------------------------------------------------------------------- the decision


class Verdict(enum.Enum):
    """What one fence answer means for this run."""

    #: our token is the job's current one
    CURRENT = "current"
    #: our token is current, and Drover asks the run to finish this batch and exit
    STOP = "stop"
    #: another run is (or no run is) current, or the job is gone
    SUPERSEDED = "superseded"
    #: not an answer from a Drover fence endpoint (try the next URL)
    NO_ANSWER = "no-answer"


def fence_verdict(job: str, token: str, status: int, body: Any) -> tuple[Verdict, str]:
    """Decide from one HTTP answer (status, decoded JSON body) whether run ``token`` is current."""
    if not isinstance(body, dict):
        return Verdict.NO_ANSWER, f"HTTP {status}, not a JSON object"
    if body.get("job") != job:
        return Verdict.NO_ANSWER, f"HTTP {status}, not a fence answer for job {job!r}"
    if status == 404:
        return Verdict.SUPERSEDED, f"job {job} no longer exists"
    if status == 401 and body.get("type") == "urn:drover:problem:unauthenticated":
        # the fence refused our token: no run of this job holds it (the job, or the run, is gone)
        return Verdict.SUPERSEDED, f"no run of job {job} holds this run's fencing token"
    if status != 200 or "fencing_token" not in body:
        return Verdict.NO_ANSWER, f"HTTP {status}, no fencing_token"
    current = body["fencing_token"]
    if current == token and body.get("stop") is True:
        return Verdict.STOP, "current; asked to stop after this batch"
    if current == token:
        return Verdict.CURRENT, "current"
    if current is None:
        state = body.get("run_state") or "none"
        return Verdict.SUPERSEDED, (
            f"job {job} has no open run (current run {body.get('current_run_id')}, {state})"
        )
    return Verdict.SUPERSEDED, (
        f"run {body.get('current_run_id')} holds the job's fencing token now"
    )


def lease_in(body: Any) -> float | None:
    """The lease (seconds) a confirming answer grants, None when it grants none."""
    value = body.get("lease_seconds") if isinstance(body, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


# --------------------------------------------------------------------------- the HTTP check


def parse_urls(raw: str | Sequence[str]) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else raw
    return tuple(u.strip().rstrip("/") for u in items if u.strip())


class HttpFence:
    """The real fence check: asks Drover's ``/v1/jobs/<job>/fence`` (stdlib HTTP, no proxy).

    Thread-safe (batches and the idle check may call it from different threads). Calling it
    returns True while the run is current and holds a lease (renewed by this answer, or still
    valid when no node answered), and raises :class:`FencedOut` with the reason otherwise
    (:class:`LeaseLapsed` when the lease ran out).
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        timeout_s: float = DEFAULT_FENCE_TIMEOUT_S,
        max_blind_s: float = 0.0,
        auth: str = "",
        clock: Callable[[], float] = time.monotonic,
        stream: IO[str] | None = None,
        first_lease_wait_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.urls = parse_urls(urls)
        self.first_lease_wait_s = first_lease_wait_s
        self._sleep = sleep
        if not self.urls:
            raise ValueError("HttpFence needs at least one Drover URL")
        self.timeout_s = timeout_s
        self.max_blind_s = max_blind_s
        self.auth = auth
        self._clock = clock
        self._stream = stream
        self._lock = threading.Lock()
        self._preferred = 0
        #: when this run was last confirmed current (start of the run counts as confirmed)
        self.last_confirmed = clock()
        self._started = self.last_confirmed
        #: until when (this clock) the run holds a lease; None: it never got one
        self.lease_until: float | None = None
        #: the longest lease an answer granted (renewals are asked for in its last quarter)
        self.lease_granted = 0.0
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _get(
        self,
        base: str,
        job: str,
        token: str,
        progress: Mapping[str, Any] | None = None,
        stopped_at: int | None = None,
    ) -> tuple[int, Any]:
        url = f"{base}/v1/jobs/{urllib.parse.quote(job, safe='')}/fence"
        # the run proves which run it is with its token; the node answers whether it is current
        headers = {"Accept": "application/json", FENCING_TOKEN_HEADER: token, LEASE_HEADER: "1"}
        if progress:
            headers[PROGRESS_HEADER] = json.dumps(progress, separators=(",", ":"))
        if stopped_at is not None:
            headers[STOPPED_HEADER] = str(stopped_at)
        if self.auth:  # e.g. a gateway in front of the nodes
            headers["Authorization"] = f"Bearer {self.auth}"
        request = urllib.request.Request(url, headers=headers)
        try:
            with self._opener.open(request, timeout=self.timeout_s) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read() or b"null")
            except ValueError:
                body = None
            return exc.code, body

    def ask(
        self,
        job: str,
        token: str,
        progress: Mapping[str, Any] | None = None,
        stopped_at: int | None = None,
    ) -> tuple[Verdict, str]:
        """One round over the URLs; the first real answer decides. ``progress`` (see
        :func:`progress_report`) travels with the check, and ``stopped_at`` (the last batch a
        gracefully stopped run committed)."""
        with self._lock:
            order = self.urls[self._preferred :] + self.urls[: self._preferred]
            failures = []
            unleased: tuple[Verdict, str] | None = None
            for base in order:
                sent = self._clock()  # the lease counts from before the request left
                try:
                    status, body = self._get(base, job, token, progress, stopped_at)
                except (OSError, ValueError) as exc:  # refused, timeout, reset, bad JSON
                    failures.append(f"{base}: {type(exc).__name__}: {exc}")
                    continue
                verdict, detail = fence_verdict(job, token, status, body)
                if verdict is Verdict.NO_ANSWER:
                    failures.append(f"{base}: {detail}")
                    continue
                if verdict in (Verdict.CURRENT, Verdict.STOP):
                    self.last_confirmed = self._clock()
                    lease = lease_in(body)
                    if lease is None:  # a node that grants no lease: ask the next one for one
                        failures.append(f"{base}: confirmed without a lease")
                        unleased = unleased or (verdict, f"{detail} (asked {base}, no lease)")
                        continue
                    self._extend(sent, lease)
                self._preferred = self.urls.index(base)
                return verdict, f"{detail} (asked {base})"
            if unleased is not None:
                return unleased
            return Verdict.NO_ANSWER, "; ".join(failures)

    def _extend(self, sent: float, lease_s: float) -> None:
        until = sent + lease_s
        if self.lease_until is None or until > self.lease_until:
            self.lease_until = until
        self.lease_granted = max(self.lease_granted, lease_s)

    def leased(self) -> bool:
        """Whether the run holds a valid lease now."""
        until = self.lease_until
        return until is not None and self._clock() < until

    def _awaits_first_lease(self) -> bool:
        """Whether the run never got a lease and may still wait for its first one."""
        return self.lease_until is None and self._clock() - self._started < self.first_lease_wait_s

    def renewal_due(self) -> bool:
        """Whether the lease is in its last quarter (or the run holds none): time to ask."""
        until = self.lease_until
        if until is None:
            return True
        return until - self._clock() < self.lease_granted / 4

    def _lapsed(self, ctx: RunContext, batch_id: int, detail: str) -> LeaseLapsed:
        if self.lease_until is None:
            held = "it never got a fence lease (no Drover node confirmed it with one)"
        else:
            held = (
                f"its fence lease ran out {self._clock() - self.lease_until:.1f} s ago without "
                f"renewal (last confirmed {self._clock() - self.last_confirmed:.1f} s ago)"
            )
        return LeaseLapsed(
            f"run {ctx.run_id} of job {ctx.job}: {held}: {detail}; {_what(batch_id)}"
        )

    def still_leased(self, ctx: RunContext, batch_id: int) -> None:
        """After a batch's write, before Spark commits it: raise :class:`LeaseLapsed` when the
        lease ran out meanwhile (the batch is then not committed)."""
        if not self.leased():
            raise self._lapsed(ctx, batch_id, "the write outlasted it")

    def __call__(self, ctx: RunContext, batch_id: int) -> bool:
        verdict, detail = self.ask(ctx.job, ctx.fencing_token, ctx.progress(batch_id))
        while verdict is Verdict.NO_ANSWER and self._awaits_first_lease():
            # never leased: nothing is committed while the run waits for its first answer
            self._sleep(min(2.0, max(0.1, self.first_lease_wait_s / 10)))
            verdict, detail = self.ask(ctx.job, ctx.fencing_token, ctx.progress(batch_id))
        if verdict is Verdict.SUPERSEDED:
            raise FencedOut(
                f"run {ctx.run_id} of job {ctx.job} is no longer current: {detail}; "
                f"{_what(batch_id)}"
            )
        if not self.leased():
            what = (
                "no Drover fence URL answered"
                if verdict is Verdict.NO_ANSWER
                else "confirmed only by nodes that grant no lease"
            )
            raise self._lapsed(ctx, batch_id, f"{what}: {detail}")
        if verdict is Verdict.STOP:
            ctx.request_stop(batch_id)
        if verdict is not Verdict.NO_ANSWER:
            return True
        blind = self._clock() - self.last_confirmed
        if self.max_blind_s > 0 and blind > self.max_blind_s:
            raise FencedOut(
                f"run {ctx.run_id} of job {ctx.job}: no Drover fence URL answered for "
                f"{blind:.0f} s (fenceMaxBlindSeconds={self.max_blind_s:g}): {detail}; "
                f"{_what(batch_id)}"
            )
        assert self.lease_until is not None
        limit = f", blind limit {self.max_blind_s:g} s" if self.max_blind_s > 0 else ""
        _say(
            f"{WARNING_PREFIX} fence check (batch {batch_id}) of job {ctx.job} unanswered "
            f"({detail}); blind for {blind:.1f} s{limit}, lease valid for "
            f"{self.lease_until - self._clock():.1f} s more, going on",
            self._stream,
        )
        return True

    def report_stopped(self, ctx: RunContext, batch_id: int) -> None:
        """Tell Drover the last batch this gracefully stopped run committed (best effort)."""
        verdict, detail = self.ask(ctx.job, ctx.fencing_token, None, stopped_at=batch_id)
        if verdict is Verdict.NO_ANSWER:
            _say(f"{WARNING_PREFIX} could not report the stop batch: {detail}", self._stream)


# --------------------------------------------------------------------------- the run context


@dataclass
class _FenceState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    fenced: str | None = None
    #: the run stopped because its fence lease lapsed (exit code LEASE_LAPSED_EXIT)
    lapsed: bool = False
    last_check: float = field(default_factory=time.monotonic)
    #: the session from_spark read (stopped when the run is fenced out)
    spark: SparkSession | None = None
    #: the streaming query whose progress the fence checks carry (RunContext.watch)
    query: Any = None
    #: when the last batch started (monotonic), and the gap between the last two starts
    batch_started: float | None = None
    batch_seen: int = -1
    interval_ms: int | None = None
    #: a graceful stop was asked: the last batch that may commit (-1: none more)
    stop_after: int | None = None
    #: the last batch whose write (``fenced``) returned
    finished_batch: int = -1


def _setting(conf: Mapping[str, str] | Any, keys: tuple[str, str]) -> str:
    prop, env = keys
    value = conf.get(prop, None)
    return value if value else os.environ.get(env, "")


def _seconds(raw: str, default: float, name: str) -> float:
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        _say(f"{WARNING_PREFIX} ignoring {name}={raw!r} (not a number), using {default:g}")
        return default
    return max(0.0, value)


@dataclass(frozen=True)
class RunContext:
    """The identity of one run of a job, as Drover handed it to the pipeline.

    Fields are empty strings when the pipeline runs outside Drover (see :attr:`managed`).
    """

    job: str = ""
    run_id: str = ""
    fencing_token: str = ""
    checkpoint_location: str = ""
    app_id: str = ""
    #: returns True while this run is the job's current run; see the module docstring
    fence_check: FenceCheck = field(default=always_current, compare=False, repr=False)
    #: seconds without a batch after which await_termination checks the fence itself (0 = never)
    idle_check_s: float = DEFAULT_IDLE_CHECK_S
    _state: _FenceState = field(default_factory=_FenceState, compare=False, repr=False)

    @classmethod
    def from_spark(
        cls,
        spark: SparkSession,
        *,
        fence_check: FenceCheck | None = None,
        announce: bool = True,
    ) -> RunContext:
        """Read the run's identity from the session's Spark conf, falling back to DROVER_* env.

        Without ``fence_check`` a managed run with fence URLs gets an :class:`HttpFence`. With
        ``announce`` (the default) prints one ``drover-runtime: started ...`` line carrying the
        Spark application id to stderr, where the cluster backend reads it. A managed run then
        makes its first fence check at once (Drover records that the run fences itself; a run
        already superseded commits no batch and leaves at its first one).
        """
        conf = spark.sparkContext.getConf()
        values = {name: _setting(conf, keys) for name, keys in _KEYS.items()}
        managed = all(values[k] for k in ("job", "run_id", "fencing_token"))
        if fence_check is None and managed:
            fence_check = _http_fence_from(conf, values["job"])
        ctx = cls(
            job=values["job"],
            run_id=values["run_id"],
            fencing_token=values["fencing_token"],
            checkpoint_location=values["checkpoint_location"],
            app_id=spark.sparkContext.applicationId or "",
            fence_check=fence_check or always_current,
            idle_check_s=_seconds(
                _setting(conf, FENCE_IDLE_CHECK), DEFAULT_IDLE_CHECK_S, FENCE_IDLE_CHECK[0]
            ),
        )
        ctx._state.spark = spark
        if announce:
            ctx.announce()
        ctx.is_current(START_CHECK)
        return ctx

    @property
    def managed(self) -> bool:
        """True when Drover started this run (it carries a job, a run id and a fencing token)."""
        return bool(self.job and self.run_id and self.fencing_token)

    @property
    def fenced_out(self) -> str | None:
        """Why this run was fenced out, or None while it is not."""
        return self._state.fenced

    @property
    def lease_lapsed(self) -> bool:
        """Whether this run stopped because its fence lease lapsed (exit code 75)."""
        return self._state.lapsed

    @property
    def exit_code(self) -> int:
        """What the process exits with: :data:`LEASE_LAPSED_EXIT` once the lease lapsed (Drover
        starts the run again), else 0 (current, stopped gracefully or fenced out)."""
        return LEASE_LAPSED_EXIT if self._state.lapsed else 0

    def announce(self) -> None:
        print(
            f"{STARTED_LINE_PREFIX} app_id={self.app_id or '-'} job={self.job or '-'} "
            f"run_id={self.run_id or '-'}",
            file=sys.stderr,
            flush=True,
        )

    def is_current(self, batch_id: int) -> bool:
        """Whether this run may still commit micro-batch ``batch_id`` (False once fenced out)."""
        if self._state.fenced is not None:
            return False
        if not self.managed:
            return True
        self._state.last_check = time.monotonic()
        try:
            current = bool(self.fence_check(self, batch_id))
        except FencedOut as exc:
            self._state.lapsed = isinstance(exc, LeaseLapsed)
            self._state.fenced = str(exc)
            return False
        if not current:
            self._state.fenced = (
                f"run {self.run_id} of job {self.job} is no longer current "
                f"(fencing token {self.fencing_token}); {_what(batch_id)}"
            )
        return current

    def request_stop(self, batch_id: int) -> None:
        """Drover asked this run to stop gracefully at its check for ``batch_id``: that batch
        (a real one) may still commit, no later one will."""
        with self._state.lock:
            if self._state.stop_after is None:
                self._state.stop_after = batch_id if batch_id >= 0 else self._last_batch()

    @property
    def stop_requested(self) -> bool:
        """Drover asked this run to finish its micro-batch and exit."""
        return self._state.stop_after is not None

    def _last_batch(self) -> int:
        """The last batch this run is known to have committed (-1: none)."""
        last = self._state.finished_batch
        try:
            progress = self._state.query.lastProgress if self._state.query is not None else None
            if progress and isinstance(progress.get("batchId"), int):
                last = max(last, progress["batchId"])
        except Exception:  # noqa: BLE001 - the query is gone: what the writes said
            pass
        return last

    def watch(self, query: StreamingQuery) -> None:
        """Report ``query``'s progress with every fence check (:meth:`await_termination` does
        this for the query it waits for)."""
        self._state.query = query

    def progress(self, batch_id: int) -> dict[str, Any] | None:
        """What the fence check for ``batch_id`` reports of the run's progress (None when it
        cannot be had: a progress report must never stand in the way of the fence)."""
        state = self._state
        try:
            if batch_id >= 0 and batch_id > state.batch_seen:
                now = time.monotonic()
                if state.batch_started is not None:
                    state.interval_ms = int((now - state.batch_started) * 1000)
                state.batch_started, state.batch_seen = now, batch_id
            last = state.query.lastProgress if state.query is not None else None
            return progress_report(batch_id, last, state.interval_ms)
        except Exception:  # noqa: BLE001 - a query gone or a JVM hiccup: no report this time
            return None

    def on_batch(self, batch_id: int) -> None:
        """Call before committing a micro-batch; raises :class:`FencedOut` if the run is stale,
        :class:`StopRequested` if a graceful stop was asked at an earlier batch."""
        stop_after = self._state.stop_after
        if stop_after is not None and batch_id > stop_after:
            raise StopRequested(
                f"run {self.run_id} of job {self.job} stops after batch {stop_after}; "
                f"batch {batch_id} is left to the next run"
            )
        if not self.is_current(batch_id):
            reason = self._state.fenced or f"run {self.run_id} is no longer current"
            raise LeaseLapsed(reason) if self._state.lapsed else FencedOut(reason)

    def after_write(self, batch_id: int) -> None:
        """Call after a micro-batch is written, before Spark commits it: raises
        :class:`LeaseLapsed` when the run's lease ran out during the write (Spark then commits
        nothing of it; the next run does it again)."""
        check = getattr(self.fence_check, "still_leased", None)
        if check is None or not self.managed:
            return
        try:
            check(self, batch_id)
        except LeaseLapsed as exc:
            self._state.lapsed = True
            self._state.fenced = str(exc)
            raise

    def fenced(
        self, write_batch: Callable[[DataFrame, int], None], *, commit_log: str | None = None
    ) -> Callable[[DataFrame, int], None]:
        """``write_batch`` for ``foreachBatch``, with the fence check before it.

        ``commit_log``: a file to which one line ``<batch id> <run id> <unix time>`` is appended
        for every batch this run hands to Spark to commit (written, and still current and leased
        after the write): which run committed which batch, for checkers of "no batch committed
        by two runs" (a replayed batch appends its line again, under its new run)."""

        def fenced_batch(batch: DataFrame, batch_id: int) -> None:
            self.on_batch(batch_id)  # a stale run writes and commits nothing
            write_batch(batch, batch_id)
            self.after_write(batch_id)  # and a run whose lease ran out meanwhile commits nothing
            self._state.finished_batch = max(self._state.finished_batch, batch_id)
            if commit_log:
                record_commit(commit_log, batch_id, self.run_id)

        return fenced_batch

    def write_parquet(self, frame: DataFrame, batch_id: int, output: str) -> None:
        """``frame`` as batch ``batch_id`` of this run: Parquet under ``output`` with ``run_id``
        and ``batch_id`` columns, partitioned by batch id; a replayed batch replaces its own
        partition and no other."""
        from pyspark.sql import functions as F

        (
            frame.withColumn("run_id", F.lit(self.run_id))
            .withColumn("batch_id", F.lit(batch_id))
            .write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy("batch_id")
            .parquet(output)
        )

    def await_termination(self, query: StreamingQuery, spark: SparkSession | None = None) -> int:
        """Wait for ``query``; return the exit code (0 also when fenced out, 75 when the
        run's fence lease lapsed: :attr:`exit_code`).

        A fenced-out run leaves cleanly: query and SparkSession stopped, one
        ``drover-runtime: fenced out: ...`` line on stderr (``drover-runtime: lease lapsed:
        ...`` when its lease ran out). Any other failure propagates. Between batches it renews
        the run's lease before it runs out, and stops the query as soon as it lapsed.
        """
        self.watch(query)
        try:
            while not query.awaitTermination(self._poll_s()):  # type: ignore[arg-type]
                if (self._idle_check_due() or self._renewal_due()) and not self.is_current(
                    IDLE_CHECK
                ):
                    query.stop()
                    break
                if self._lease_gone():
                    query.stop()
                    break
                if self._stop_due(query):
                    query.stop()
                    break
        except Exception:
            if self._state.fenced is None and not self.stop_requested:
                raise
        if self._state.fenced is not None:
            self._leave(query, spark or self._state.spark)
        elif self.stop_requested:
            self._stop(query, spark or self._state.spark)
        return self.exit_code

    def _renewal_due(self) -> bool:
        """The lease is in its last quarter and no check was made for a second."""
        due = getattr(self.fence_check, "renewal_due", None)
        if due is None or not self.managed:
            return False
        return bool(due()) and time.monotonic() - self._state.last_check >= _AWAIT_POLL_S

    def _lease_gone(self) -> bool:
        """The run's lease lapsed between checks (no renewal answered): it is over."""
        leased = getattr(self.fence_check, "leased", None)
        if leased is None or not self.managed or self._state.fenced is not None or leased():
            return False
        try:
            self.fence_check.still_leased(self, IDLE_CHECK)  # type: ignore[attr-defined]
        except LeaseLapsed as exc:
            self._state.lapsed = True
            self._state.fenced = str(exc)
        return self._state.fenced is not None

    def _poll_s(self) -> float:
        """How long await_termination waits between two looks (pyspark takes a float too)."""
        return _STOP_POLL_S if self.stop_requested else _AWAIT_POLL_S

    def _stop_due(self, query: StreamingQuery) -> bool:
        """A graceful stop was asked and the batch it lets commit is committed (its trigger
        is over): the query may stop now without losing or splitting a batch."""
        stop_after = self._state.stop_after
        if stop_after is None:
            return False
        if stop_after >= 0 and self._last_batch() < stop_after:
            return False
        try:
            return not query.status.get("isTriggerActive", False)
        except Exception:  # noqa: BLE001 - the query is going anyway
            return True

    def _stop(self, query: StreamingQuery, spark: SparkSession | None) -> None:
        last = self._last_batch()
        try:
            if query.isActive:
                query.stop()
        finally:
            report = getattr(self.fence_check, "report_stopped", None)
            if report is not None and last >= 0:
                try:
                    report(self, last)
                except Exception as exc:  # noqa: BLE001 - a courtesy; Drover sees the exit
                    _say(f"{WARNING_PREFIX} could not report the stop batch: {exc}")
            try:
                _stop_spark(spark)
            finally:
                what = f"after batch {last}" if last >= 0 else "before its first batch"
                _say(f"{STOPPED_LINE_PREFIX} {what}: run {self.run_id} of job {self.job}")

    def _idle_check_due(self) -> bool:
        if not self.managed or self.idle_check_s <= 0:
            return False
        return time.monotonic() - self._state.last_check >= self.idle_check_s

    def _leave(self, query: StreamingQuery, spark: SparkSession | None) -> None:
        try:
            if query.isActive:
                query.stop()
        finally:
            try:
                _stop_spark(spark)
            finally:
                prefix = LAPSED_LINE_PREFIX if self._state.lapsed else FENCED_LINE_PREFIX
                _say(f"{prefix} {self._state.fenced}")


def _stop_spark(spark: SparkSession | None) -> None:
    """Stop ``spark``, or the active session when none is given (if there is one)."""
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is not None:
        spark.stop()


def record_commit(path: str, batch_id: int, run_id: str) -> None:
    """Append ``<batch id> <run id> <unix time>`` to ``path`` (one write of one line, O_APPEND:
    lines of several processes never interleave)."""
    line = f"{batch_id} {run_id or '-'} {time.time():.3f}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_commit_log(path: str) -> list[tuple[int, str, float]]:
    """The lines of a commit log (:meth:`RunContext.fenced`): (batch id, run id, unix time)."""
    try:
        with open(path, encoding="utf-8") as log:
            lines = log.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0].lstrip("-").isdigit():
            out.append((int(parts[0]), parts[1], float(parts[2])))
    return out


def progress_report(
    batch_id: int, last: Mapping[str, Any] | None, interval_ms: int | None
) -> dict[str, Any]:
    """The progress a fence check carries (``X-Drover-Progress``): the batch it is for
    (``IDLE_CHECK``/``START_CHECK`` for the others), what Spark reported of the last completed
    batch (``StreamingQuery.lastProgress``: id, input rows, input and processing rates, the
    trigger's duration, its timestamp) and the milliseconds between the starts of the last two
    batches. Numbers that are not finite are left out."""
    doc: dict[str, Any] = {"v": 1, "batch": batch_id}
    if interval_ms is not None:
        doc["gap"] = interval_ms
    if last:
        durations = last.get("durationMs") or {}
        fields = {
            "id": last.get("batchId"),
            "rows": last.get("numInputRows"),
            "in": last.get("inputRowsPerSecond"),
            "proc": last.get("processedRowsPerSecond"),
            "dur": durations.get("triggerExecution", last.get("batchDuration")),
            "ts": last.get("timestamp"),
        }
        for key, value in fields.items():
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, float) and not math.isfinite(value):
                continue
            if isinstance(value, int | float | str):
                doc[key] = value
    return doc


def _http_fence_from(conf: Any, job: str) -> FenceCheck | None:
    urls = parse_urls(_setting(conf, FENCE_URLS))
    if not urls:
        _say(
            f"{WARNING_PREFIX} job {job} has no fence URLs ({FENCE_URLS[0]} / {FENCE_URLS[1]}): "
            "self-fencing is off for this run"
        )
        return None
    return HttpFence(
        urls,
        timeout_s=_seconds(
            _setting(conf, FENCE_TIMEOUT), DEFAULT_FENCE_TIMEOUT_S, FENCE_TIMEOUT[0]
        ),
        max_blind_s=_seconds(_setting(conf, FENCE_MAX_BLIND), 0.0, FENCE_MAX_BLIND[0]),
        auth=_setting(conf, FENCE_AUTH),
        first_lease_wait_s=_seconds(
            _setting(conf, FENCE_FIRST_LEASE_WAIT),
            DEFAULT_FIRST_LEASE_WAIT_S,
            FENCE_FIRST_LEASE_WAIT[0],
        ),
    )
