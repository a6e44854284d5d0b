"""The wall clock every layer reads: timezone-aware UTC ``datetime`` values.

What is stored, compared with stored times or shown carries such a value (the store refuses a
naive one). Pure decisions never read a clock: their callers pass ``now``. Deadlines and leases
measure elapsed time with ``time.monotonic`` instead, which a wall-clock step cannot move.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now, as an aware UTC datetime."""
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """``moment`` as the API writes every time: ISO 8601 in UTC with ``Z``
    (``2026-11-25T03:12:45.120000Z``), as pydantic writes the models' own datetimes."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
