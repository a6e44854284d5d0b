"""A piece of a run's driver log, as ``GET /v1/jobs/{name}/runs/{attempt}/log`` answers it.

Logs are read by byte offsets: a read from ``offset`` answers ``text`` and the ``next_offset``
to read from next, so a viewer follows a running driver by asking again from ``next_offset``
(every second or so) until ``run_ended`` and ``at_end``. Without an offset the read answers the
log's tail. ``text`` is UTF-8: a character cut by the range is left to the next read (or, at a
tail's start, skipped), so offsets always fall between characters.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from scheduler.core.backend import LogChunk
from scheduler.core.records import RunRecord

#: one of a driver's log streams (``scheduler.core.backend.LOG_STREAMS``)
LogStream = Literal["stdout", "stderr", "combined"]
#: the default and the largest read (bytes)
DEFAULT_LOG_LIMIT = 64 << 10
MAX_LOG_LIMIT = 1 << 20
#: the largest offset a read may ask for (a JSON number every client reads exactly)
MAX_LOG_OFFSET = 2**53 - 1


def decode(data: bytes, start: int) -> tuple[str, int, int]:
    """``data`` (a range of a stream from byte ``start``) as text with the byte range it covers:
    continuation bytes of a character begun before ``start`` are skipped, a character not
    complete at the end is left for the next read; other invalid bytes become U+FFFD."""
    first = 0
    if start > 0:
        while first < min(3, len(data)) and 0x80 <= data[first] < 0xC0:
            first += 1
    last = len(data)
    for back in range(1, min(4, last - first) + 1):
        byte = data[last - back]
        if byte < 0x80:
            break
        if byte >= 0xC0:  # the lead byte of the last character: is it complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            if back < need:
                last -= back
            break
    return data[first:last].decode("utf-8", errors="replace"), start + first, start + last


class RunLogPublic(BaseModel):
    """A piece of one of a run's driver log streams."""

    job: str = Field(description="the job's name", examples=["orders-enrich"])
    run: int = Field(description="the run's id", examples=[42])
    attempt: int = Field(description="the run's attempt number among the job's runs", examples=[3])
    cluster: str = Field(description="the cluster the run is on", examples=["spark-a"])
    stream: LogStream = Field(
        description="the stream read: the driver's `stdout` or `stderr` (a standalone worker, "
        "a YARN container keep them apart), or `combined` (both in one file: a local run)",
        examples=["stderr"],
    )
    streams: list[LogStream] = Field(
        description="the streams this run's driver has (the first is read by default)",
        examples=[["stderr", "stdout"]],
    )
    offset: int = Field(
        description="the byte offset in the stream where `text` begins", examples=[10240]
    )
    next_offset: int = Field(
        description="the byte offset where `text` ends: ask from here for what follows",
        examples=[12288],
    )
    size: int = Field(
        description="the stream's length in bytes when it was read (it grows while the driver "
        "runs)",
        examples=[12288],
    )
    text: str = Field(
        description="the log's text in that range (UTF-8)",
        examples=["26/11/25 03:12:50 INFO SparkContext: Running Spark version 4.3.0\n"],
    )
    at_end: bool = Field(
        description="`next_offset` is the end of the stream as it was read", examples=[True]
    )
    run_ended: bool = Field(
        description="the run has ended: its log grows no more (a follower stops once `at_end` too)",
        examples=[False],
    )

    @classmethod
    def of(cls, run: RunRecord, chunk: LogChunk, streams: tuple[str, ...]) -> RunLogPublic:
        text, first, last = decode(chunk.data, chunk.start)
        return cls(
            job=run.job_name,
            run=run.id,
            attempt=run.attempt,
            cluster=run.cluster,
            stream=chunk.stream,  # type: ignore[arg-type]
            streams=list(streams),  # type: ignore[arg-type]
            offset=first,
            next_offset=last,
            size=chunk.size,
            text=text,
            at_end=last >= chunk.size,
            run_ended=run.ended_at is not None,
        )
