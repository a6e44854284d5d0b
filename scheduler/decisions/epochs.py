"""Membership epochs that survive a ZooKeeper whose data was wiped. Pure: no I/O.

A group's epoch fences every claim (``claim_jobs`` takes a job only ``WHERE owner_epoch <=
:epoch``), so it must never go down. ZooKeeper's child version (``cversion``) of the group's
members znode grows with every join and leave, but a server restarted with an empty data
directory recreates that znode and its ``cversion`` starts again near zero: jobs stored under the
old, higher epochs would never be claimed again.

So the epoch has two parts::

    epoch = (generation << 32) | cversion

- ``cversion``: the members znode's child version (32 bits in ZooKeeper), as before;
- ``generation``: a number the metadata store keeps per group and per **incarnation** of the
  members znode — one creation of it, told apart by its ``czxid`` (the transaction that created
  it) and ``ctime`` (the server's clock at creation). A wipe or a deletion recreates the znode:
  new czxid and ctime, a new incarnation, a new and higher generation. A ZooKeeper restarted with
  its data intact keeps the znode, so nothing changes.

The store records each incarnation once, with the generation it was given, and never changes a
record (``scheduler.store.generations``): every node, at any time, reads the same generation for
the same incarnation. A new incarnation gets a generation above every recorded one
(:func:`generation_for`); two nodes racing to record the same incarnation agree because the record
is unique per incarnation and per generation (the loser re-reads). A node publishes a view only
after it read the incarnation again *after* its generation was recorded, so a recorded incarnation
was current at a moment after every smaller generation had been recorded: a node whose view is
of an older members znode never holds a higher epoch than one whose view is current.

Epochs reach JSON clients (``/v1/groups``, runs' ``owner_epoch``): generations stay below 2**21
so every epoch is an exact integer in JavaScript (below 2**53).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from scheduler.core.errors import InvalidInput

#: bits of the epoch that hold the members znode's child version
CVERSION_BITS = 32
CVERSION_MASK = (1 << CVERSION_BITS) - 1
#: generations stay below this, so every epoch is below 2**53 (exact in JSON/JavaScript numbers)
GENERATION_LIMIT = 1 << (53 - CVERSION_BITS)


@dataclass(frozen=True)
class Incarnation:
    """One creation of a group's members znode: what changes when it is recreated."""

    #: the zxid of the transaction that created the znode
    czxid: int
    #: the server's clock (epoch milliseconds) when it was created
    ctime: int

    def __str__(self) -> str:
        created = datetime.fromtimestamp(self.ctime / 1000, UTC).isoformat(timespec="milliseconds")
        return f"czxid {self.czxid:#x} created {created}"


def compose_epoch(generation: int, cversion: int) -> int:
    """The epoch of a view: ``(generation << 32) | cversion``; InvalidInput when out of range."""
    if not 0 <= generation < GENERATION_LIMIT:
        raise InvalidInput(f"membership generation {generation} is outside [0, {GENERATION_LIMIT})")
    if not 0 <= cversion <= CVERSION_MASK:
        raise InvalidInput(f"child version {cversion} does not fit in {CVERSION_BITS} bits")
    return (generation << CVERSION_BITS) | cversion


def split_epoch(epoch: int) -> tuple[int, int]:
    """``(generation, cversion)`` of an epoch (the inverse of :func:`compose_epoch`)."""
    if epoch < 0:
        raise InvalidInput(f"an epoch is never negative, not {epoch}")
    return epoch >> CVERSION_BITS, epoch & CVERSION_MASK


@dataclass(frozen=True)
class GenerationChoice:
    """What a node does about a view's incarnation: use a recorded generation or record one."""

    generation: int
    #: True: the incarnation is not recorded yet; record it under ``generation`` (conditionally)
    record: bool


def generation_for(
    incarnation: Incarnation,
    recorded: Mapping[Incarnation, int],
    *,
    cversion: int,
    highest_epoch: int | None,
) -> GenerationChoice:
    """The generation of ``incarnation``, given the group's recorded incarnations.

    ``highest_epoch`` is the highest epoch any of the group's jobs is stored under (None: no job
    has an owner yet).

    - A recorded incarnation keeps its generation, whatever its age: nothing is written.
    - A new incarnation of a group with records gets a generation above every recorded one and
      above the generation of every stored epoch, so its epochs exceed every epoch stored before.
    - The first incarnation a group records (a new deployment, or the first start of a version
      with generations) gets the smallest generation whose epoch still reaches the stored epochs:
      0 when ZooKeeper kept its data (epochs stay what they were), more after an earlier wipe.
    """
    known = recorded.get(incarnation)
    if known is not None:
        return GenerationChoice(known, record=False)
    stored_generation, stored_cversion = split_epoch(highest_epoch or 0)
    if recorded:
        generation = max(max(recorded.values()) + 1, stored_generation + 1)
    elif highest_epoch is None:
        generation = 0
    else:
        generation = stored_generation + (1 if stored_cversion > cversion else 0)
    compose_epoch(generation, cversion)  # raises when it would not fit
    return GenerationChoice(generation, record=True)
