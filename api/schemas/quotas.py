"""Pydantic models of ``/v1/quotas`` (the submission gate's per-business quotas)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, StrictInt

from api.paging import Page
from api.schemas import attributes
from api.schemas.resources import Name, _Strict
from scheduler.decisions import quotas

Rate = Annotated[
    float,
    Field(strict=True, ge=quotas.MIN_RATE, le=quotas.MAX_RATE, allow_inf_nan=False),
]


YarnQueue = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$")]


class QuotaPut(_Strict):
    """A business's submission quota: a rate limit, a dedicated group, or both."""

    rate: Rate | Annotated[StrictInt, Field(ge=1, le=int(quotas.MAX_RATE))] | None = Field(
        default=None,
        description="submissions per second the business may make across all nodes (a token "
        f"bucket refilled continuously; {quotas.MIN_RATE:g} to {quotas.MAX_RATE:g}); null: no "
        "rate limit",
        examples=[5],
    )
    burst: Annotated[StrictInt, Field(ge=1, le=quotas.MAX_BURST)] = Field(
        default=1,
        description="the most submissions at once after a quiet period (the bucket's size); "
        "keep it at least rate x the reconcile interval, or the business gets less than its "
        "rate",
        examples=[20],
    )
    dedicated_group: Name | None = Field(
        default=None,
        description="a group reserved for the business: its jobs live there and are owned only "
        "by that group's nodes; the group takes no other business's jobs. Null: none",
        examples=["payments-critical"],
    )
    yarn_queue: YarnQueue | None = Field(
        default=None,
        description="the YARN queue the business's applications go to on YARN clusters "
        "(spark.yarn.queue). Null: the job's own spark.yarn.queue, else the default queue",
        examples=["payments"],
    )


class QuotaPublic(BaseModel):
    business: str = Field(examples=["ads"])
    rate: float | None = Field(
        description="submissions per second across all nodes; null: no rate limit",
        examples=[5.0],
    )
    burst: int = Field(
        description="the most submissions at once after a quiet period (the bucket's size)",
        examples=[20],
    )
    dedicated_group: str | None = Field(
        description="the group reserved for the business's jobs (null: none)",
        examples=["payments-critical"],
    )
    yarn_queue: str | None = Field(
        default=None,
        description="the YARN queue of the business's applications (null: none set)",
        examples=["payments"],
    )
    tokens: float | None = Field(
        description="Read-only. Submissions the business may make at once now (its bucket, "
        "refilled to this moment); null without a rate limit",
        examples=[12.5],
    )
    version: int = Field(description="`If-Match` checks it (the quota's ETag)", examples=[2])
    updated_by: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, q: quotas.QuotaRecord, now: datetime) -> QuotaPublic:
        bucket = q.bucket()
        tokens = round(bucket.refilled(now.timestamp()).tokens, 3) if bucket else None
        return cls(**attributes(cls, q, tokens=tokens))


class QuotaPage(Page[QuotaPublic]):
    """A page of quotas, by business."""
