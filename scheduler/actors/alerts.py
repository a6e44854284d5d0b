"""The node's alert loop (hosted by the supervisor in the node process, like the cluster
monitor): every round it

1. raises and resolves the alerts whose conditions it watches (``scheduler.decisions.alerts`` says
   which): the clusters' health (every node; the store keeps one alert per cluster), and the
   failures and given-up states of the jobs this node owns (stalls are raised by the stall
   check itself, in the transaction that records them); automatic failover's alerts are raised
   by the operations executor with its decisions, and resolved here: a held one once its
   cluster is NORMAL again, a created one once its failover ended;
2. sends what is due in the outbox: claims up to a batch of messages for a lease, posts them
   (in worker threads: a slow receiver never blocks the event loop, a reconcile tick, or
   anything else), records each outcome; a failed message is retried with exponential backoff
   and given up after ``MAX_ATTEMPTS``.

Every send goes to a public address only (``scheduler.decisions.destinations``): the channel's
host is resolved and checked right before the request, which then goes to the address checked
(DNS rebinding gains nothing); an internal receiver must be allowed by the operator
(``DROVER_ALERT_ALLOWED_HOSTS``). A failed attempt records the status or the kind of error,
never what the receiver answered (an internal service's reply is nobody's business).

Two nodes never send one message twice at once: a message is sent only under a claim (a
conditional UPDATE, ``claimed_until`` in the future). A node that dies after sending and before
recording it leaves the claim to expire, and another node sends it again: receivers get each
message at least once, and ``delivery_id`` (also the ``X-Drover-Delivery`` header) tells a
repeat.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import httpx

from scheduler.actors.hosted import HostedLoop
from scheduler.backends import http
from scheduler.core.clock import utcnow
from scheduler.core.errors import InvalidInput
from scheduler.core.operations import OperationState
from scheduler.decisions.alerts import (
    MAX_ATTEMPTS,
    AlertKind,
    AlertRecord,
    ChannelKind,
    ChannelRecord,
    Event,
    Signal,
    key_of,
    render,
    retry_delay,
    signature,
)
from scheduler.decisions.destinations import Destinations, GetAddrInfo
from scheduler.decisions.health import ClusterHealth
from scheduler.store import alerts as alert_store
from scheduler.store import auto_failover as auto_store
from scheduler.store import telemetry
from scheduler.store.db import Store

log = logging.getLogger("drover.alerts")

FINAL_OPERATION_STATES = frozenset(s.value for s in OperationState if s.is_final)

#: seconds a claimed message stays this node's to send
CLAIM_LEASE = 60.0
#: messages claimed per round
BATCH = 20
#: seconds one POST may take
SEND_TIMEOUT = 10.0
#: a run's failure is looked for this far back (seconds; the rounds overlap, alerts dedupe)
FAILED_LOOKBACK = 120.0


def _resolve_automatic(session: Any, health: dict[str, str], now: datetime) -> int:
    """Resolve automatic failover's alerts whose condition ended: a held one whose cluster is
    NORMAL again (or gone), a created one whose failover ended."""
    resolved = 0
    kinds = [AlertKind.AUTO_FAILOVER, AlertKind.AUTO_FAILOVER_HELD]
    open_auto = alert_store.open_alerts(session, kinds)
    states = auto_store.operation_states(
        session,
        [
            int(a.details["operation_id"])
            for a in open_auto
            if a.kind == AlertKind.AUTO_FAILOVER and a.details.get("operation_id") is not None
        ],
    )
    for alert in open_auto:
        why = None
        if alert.kind == AlertKind.AUTO_FAILOVER_HELD:
            state = health.get(alert.cluster or "")
            if state is None:
                why = f"cluster {alert.cluster} was removed"
            elif state == ClusterHealth.NORMAL.value:
                why = f"cluster {alert.cluster} is NORMAL again"
        else:
            op = alert.details.get("operation_id")
            state = states.get(int(op)) if op is not None else None
            if op is None or state is None:
                why = "its failover is gone"
            elif state in FINAL_OPERATION_STATES:
                why = f"failover {op} {state}"
        if why is not None and alert_store.resolve_alert(session, alert.key, why, now):
            resolved += 1
    return resolved


class AlertLoop(HostedLoop):
    """Raises, resolves and sends this node's alerts (hosted by the supervisor)."""

    kind = "alert"

    def __init__(
        self,
        store: Store,
        *,
        node_id: str,
        interval: float,
        metrics: Any = None,
        clock: Callable[[], datetime] = utcnow,
        transport: httpx.BaseTransport | None = None,
        destinations: Destinations | None = None,
        resolve: GetAddrInfo = socket.getaddrinfo,
    ) -> None:
        super().__init__(interval, log)
        self._store = store
        self._node_id = node_id
        self._metrics = metrics
        self._clock = clock
        self._destinations = destinations or Destinations()
        self._resolve = resolve
        self._client = httpx.Client(
            timeout=SEND_TIMEOUT,
            verify=http.tls(),
            trust_env=False,
            follow_redirects=False,
            transport=transport,
        )
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="alert-send")

    # -- the hosted loop ---------------------------------------------------------------------

    async def _round(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.round)

    async def _close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    # -- one round (blocking: runs in a worker thread) ---------------------------------------------

    def round(self) -> dict[str, Any]:
        started = time.perf_counter()
        raised, resolved = self.evaluate()
        sent, failed = self.send_due()
        return {
            "at": time.time(),
            "raised": raised,
            "resolved": resolved,
            "sent": sent,
            "failed": failed,
            "seconds": round(time.perf_counter() - started, 4),
        }

    def evaluate(self) -> tuple[int, int]:
        now = self._clock()
        raised = resolved = 0
        with self._store.transaction() as session:
            # clusters: one alert per abnormal cluster (every node looks; the store dedupes)
            health = dict(telemetry.cluster_health(session))
            open_ = {
                a.subject: a for a in alert_store.open_alerts(session, [AlertKind.CLUSTER_ABNORMAL])
            }
            for cluster, state in health.items():
                abnormal = state != ClusterHealth.NORMAL.value
                if abnormal and cluster not in open_:
                    if alert_store.raise_alert(
                        session,
                        Signal(
                            AlertKind.CLUSTER_ABNORMAL,
                            cluster,
                            f"cluster {cluster} is {state}: nothing new starts on it",
                            cluster=cluster,
                            details={"health": state},
                        ),
                        now,
                    ):
                        raised += 1
                elif not abnormal and cluster in open_:
                    if alert_store.resolve_alert(
                        session, open_[cluster].key, f"cluster {cluster} is NORMAL again", now
                    ):
                        resolved += 1
            for gone in set(open_) - set(health):  # a deleted cluster
                if alert_store.resolve_alert(
                    session, open_[gone].key, "the cluster was removed", now
                ):
                    resolved += 1
            resolved += _resolve_automatic(session, health, now)
        with self._store.transaction() as session:
            r, s = self._evaluate_jobs(session, now)
        return raised + r, resolved + s

    def _evaluate_jobs(self, session: Any, now: datetime) -> tuple[int, int]:
        raised = resolved = 0
        given_up = {j.name: j for j in alert_store.given_up_jobs(session, self._node_id)}
        for name, job in given_up.items():
            signal = Signal(
                AlertKind.JOB_GIVEN_UP,
                name,
                f"job {name} gave up: {job.state_reason or 'restart budget spent'}",
                team=job.team,
                cluster=job.cluster_name,
                group=job.group_name,
                details={"run_id": job.current_run_id, "reason": job.state_reason},
            )
            if alert_store.raise_alert(session, signal, now):
                raised += 1
        for job, run in alert_store.failed_runs(
            session, self._node_id, now - timedelta(seconds=FAILED_LOOKBACK)
        ):
            key = key_of(AlertKind.JOB_FAILED, job.name)
            last = alert_store.last_alert(session, key)
            if last is not None and last.details.get("run_id") == run.id:
                continue  # this failure was told already
            if job.state == "RUNNING" or job.desired_state != "RUNNING":
                continue  # already running again, or stopped: nothing to tell any more
            signal = Signal(
                AlertKind.JOB_FAILED,
                job.name,
                f"job {job.name}: run {run.id} (attempt {run.attempt}) failed: "
                f"{run.reason or 'no reason given'}; Drover restarts it within its budget",
                team=job.team,
                cluster=run.cluster_name,
                group=job.group_name,
                details={"run_id": run.id, "attempt": run.attempt, "exit_code": run.exit_code},
            )
            if alert_store.raise_alert(session, signal, now):
                raised += 1
        # resolve the job alerts whose conditions ended (for jobs this node owns)
        open_jobs = alert_store.open_alerts(session, [AlertKind.JOB_FAILED, AlertKind.JOB_GIVEN_UP])
        jobs = alert_store.jobs_by_name(session, [a.subject for a in open_jobs])
        for alert in open_jobs:
            owned = jobs.get(alert.subject)
            if owned is not None and owned.owner != self._node_id:
                continue  # its owner decides
            why = _ended(alert, owned, given_up)
            if why is not None and alert_store.resolve_alert(session, alert.key, why, now):
                resolved += 1
        return raised, resolved

    def send_due(self) -> tuple[int, int]:
        now = self._clock()
        with self._store.transaction() as session:
            token = alert_store.claim_due(
                session, self._node_id, now, lease=CLAIM_LEASE, limit=BATCH
            )
        if token is None:
            return 0, 0
        with self._store.session() as session:
            messages = alert_store.claimed(session, token)
        futures = [self._pool.submit(self._send, token, *m) for m in messages]
        sent = failed = 0
        for future in futures:
            if future.result():
                sent += 1
            else:
                failed += 1
        return sent, failed

    def _send(
        self,
        token: str,
        delivery_id: int,
        event: Event,
        alert: AlertRecord,
        channel: ChannelRecord,
        attempts: int,
        folded: list[AlertRecord],
    ) -> bool:
        body = render(channel, alert, event, delivery_id=delivery_id, folded=folded)
        stamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "drover-alerts/1",
            "X-Drover-Delivery": str(delivery_id),
            "X-Drover-Event": str(event),
            "X-Drover-Timestamp": stamp,
        }
        if channel.secret and channel.kind == ChannelKind.WEBHOOK:
            headers["X-Drover-Signature"] = signature(channel.secret, stamp, body)
        status: int | None = None
        error = ""
        try:
            target = self._destinations.check(channel.url, self._resolve)
            extensions: dict[str, Any] = {}
            if target.address is not None:  # to the address checked, under its own name
                headers["Host"] = target.host_header or target.host
                headers["Connection"] = "close"  # no connection shared with another name
                extensions["sni_hostname"] = target.sni
            response = self._client.post(
                target.url, content=body, headers=headers, extensions=extensions
            )
            status = response.status_code
            if 200 <= status < 300:
                with self._store.transaction() as session:
                    alert_store.delivered(
                        session,
                        delivery_id,
                        token,
                        status=status,
                        body=body.decode(),
                        at=self._clock(),
                    )
                self._count(channel, "delivered")
                log.info("alert %s (%s) %s sent to %s", alert.id, alert.kind, event, channel.name)
                return True
            error = f"HTTP {status}"  # never the answer's body
        except InvalidInput as exc:  # a destination that is not public (any more)
            error = exc.message
        except OSError as exc:  # the name does not resolve
            error = f"cannot resolve the channel's host ({type(exc).__name__})"
        except httpx.HTTPError as exc:  # the kind of failure only: no URL, no answer
            error = type(exc).__name__
        tries = attempts + 1
        retry_at = (
            None if tries >= MAX_ATTEMPTS else self._clock() + timedelta(seconds=retry_delay(tries))
        )
        with self._store.transaction() as session:
            alert_store.attempt_failed(
                session,
                delivery_id,
                token,
                error=error,
                status=status,
                body=body.decode(),
                retry_at=retry_at,
                at=self._clock(),
            )
        self._count(channel, "given_up" if retry_at is None else "retried")
        (log.error if retry_at is None else log.warning)(
            "alert %s %s to channel %s failed (attempt %d): %s%s",
            alert.id,
            event,
            channel.name,
            tries,
            error,
            "; given up" if retry_at is None else f"; retried at {retry_at:%H:%M:%S}",
        )
        return False

    def _count(self, channel: ChannelRecord, result: str) -> None:
        if self._metrics is not None:
            self._metrics.deliveries.labels(str(channel.kind), result).inc()


def _ended(alert: AlertRecord, job: Any, given_up: dict[str, Any]) -> str | None:
    """Why a job alert's condition ended (None: it still holds)."""
    if job is None:
        return f"job {alert.subject} was deleted"
    if job.desired_state != "RUNNING":
        return f"job {alert.subject} was stopped"
    if alert.kind == AlertKind.JOB_GIVEN_UP:
        return None if alert.subject in given_up else f"job {alert.subject} was started again"
    if job.state == "RUNNING":
        return f"job {alert.subject} is RUNNING again"
    if job.state == "FAILED":
        return f"job {alert.subject} gave up (see its job_given_up alert)"
    return None
