"""Submission quotas of businesses: what a quota is and what makes one valid (pure).

A business's quota (``/v1/quotas/{business}``, ``drover quotas set``) has

- ``rate``: submissions per second the business may make across the whole deployment (a
  token bucket refilled continuously; ``None``: no rate limit), from ``MIN_RATE`` to
  ``MAX_RATE``;
- ``burst``: the most submissions it may make at once after a quiet period (the bucket's
  size), 1 to ``MAX_BURST``; it should be at least ``rate`` × the reconcile interval, or the
  bucket overflows between two ticks and the business gets less than its rate;
- ``dedicated_group``: a scheduling group reserved for the business (``None``: none). The
  business's jobs must live in that group, the group takes no other business's jobs, and no
  node of another group ever claims them (``scheduler.store.ledger.claim_jobs``);
- ``yarn_queue``: the YARN queue the business's applications are submitted to
  (``spark.yarn.queue``: the capacity scheduler's share of the business) on YARN clusters
  (``None``: the job's own ``spark.yarn.queue``, else the cluster's default queue).

Per-cluster caps (in flight, running) are attributes of the cluster (``/v1/clusters/{name}``:
``max_concurrent_submissions``, ``max_running_apps``). The decisions are in
``scheduler.decisions.gate``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from scheduler.core.errors import InvalidInput
from scheduler.core.names import validate_name
from scheduler.decisions.gate import Bucket

_QUEUE = re.compile(r"^(?=.{1,255}$)[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
MIN_RATE = 0.001
MAX_RATE = 100_000.0
MAX_BURST = 1_000_000


@dataclass(frozen=True)
class QuotaSpec:
    """The writable fields of a business's quota."""

    rate: float | None = None
    burst: int = 1
    dedicated_group: str | None = None
    yarn_queue: str | None = None


@dataclass(frozen=True)
class QuotaRecord:
    business: str
    rate: float | None
    burst: int
    dedicated_group: str | None
    #: the shared bucket as last written (``tokens`` counted at ``refilled_at``)
    tokens: float
    refilled_at: datetime
    version: int
    updated_by: str
    created_at: datetime
    updated_at: datetime
    yarn_queue: str | None = None

    @property
    def spec(self) -> QuotaSpec:
        return QuotaSpec(self.rate, self.burst, self.dedicated_group, self.yarn_queue)

    def bucket(self) -> Bucket | None:
        """The business's bucket (None: no rate limit)."""
        if self.rate is None:
            return None
        return Bucket(self.rate, self.burst, self.tokens, self.refilled_at.timestamp())


def validate_business(business: str) -> str:
    """A business named in a quota: a name (letters, digits, ``-_.``)."""
    return validate_name(business, "business")


def validate_quota(spec: QuotaSpec) -> QuotaSpec:
    rate = spec.rate
    if rate is not None:
        if (
            isinstance(rate, bool)
            or not isinstance(rate, int | float)
            or not math.isfinite(rate)
            or not MIN_RATE <= rate <= MAX_RATE
        ):
            raise InvalidInput(
                f"rate must be a number of submissions per second from {MIN_RATE:g} to "
                f"{MAX_RATE:g} (or null: no rate limit)"
            )
        rate = float(rate)
    burst = spec.burst
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= MAX_BURST:
        raise InvalidInput(f"burst must be a whole number from 1 to {MAX_BURST}")
    group = spec.dedicated_group
    if group is not None:
        validate_name(group, "dedicated_group")
    queue = spec.yarn_queue
    if queue is not None:
        validate_yarn_queue(queue)
    if rate is None and group is None and queue is None:
        raise InvalidInput("a quota sets a rate, a dedicated_group, a yarn_queue, or several")
    return QuotaSpec(rate, burst, group, queue)


def validate_yarn_queue(queue: str) -> str:
    """A YARN queue: its leaf name or its full path (``orders``, ``root.bu.orders``), each part
    letters, digits, ``-`` and ``_`` (what the capacity scheduler accepts)."""
    if not isinstance(queue, str) or not _QUEUE.match(queue):
        raise InvalidInput(
            f"yarn_queue {queue!r} is not a YARN queue: dot-separated names of letters, digits, "
            "'-' and '_' (at most 255 characters)"
        )
    return queue
