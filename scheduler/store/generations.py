"""Membership generations: one record per incarnation of a group's members znode.

The rule (which generation a new incarnation gets, and why the epochs it makes never go down) is
the pure :func:`scheduler.decisions.epochs.generation_for`; this module reads its inputs and records
its answer. A record is written once and never changed. Two nodes recording at the same time cannot
both win: the primary key (group, generation) and the unique key (group, czxid, ctime) make the
second insert fail, and the loser reads again and finds the winner's record
(:func:`resolve_generation`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler.core.errors import AlreadyExists, StoreError
from scheduler.decisions.epochs import GenerationChoice, Incarnation, generation_for
from scheduler.store.db import Store
from scheduler.store.models import Job, MembershipGeneration

log = logging.getLogger("drover.store.generations")

#: attempts of :func:`resolve_generation` (each loses only to a concurrent, successful record)
ATTEMPTS = 8


def recorded_generations(session: Session, group: str) -> dict[Incarnation, int]:
    """Every recorded incarnation of ``group``'s members znode and its generation."""
    rows = session.execute(
        select(
            MembershipGeneration.czxid, MembershipGeneration.ctime, MembershipGeneration.generation
        ).where(MembershipGeneration.group_name == group)
    )
    return {Incarnation(int(czxid), int(ctime)): int(gen) for czxid, ctime, gen in rows}


def highest_job_epoch(session: Session, group: str) -> int | None:
    """The highest epoch any of ``group``'s jobs is owned under (None: no job has an owner)."""
    value = session.scalar(
        select(func.max(Job.owner_epoch)).where(Job.group_name == group, Job.owner.is_not(None))
    )
    return None if value is None else int(value)


def record_generation(
    session: Session, group: str, incarnation: Incarnation, generation: int, node_id: str
) -> None:
    """Record ``incarnation`` under ``generation``; AlreadyExists when either is taken."""
    session.add(
        MembershipGeneration(
            group_name=group,
            generation=generation,
            czxid=incarnation.czxid,
            ctime=incarnation.ctime,
            recorded_by=node_id,
        )
    )
    try:
        session.flush()
    except IntegrityError as exc:
        raise AlreadyExists(
            f"group {group!r}: generation {generation} or incarnation ({incarnation}) "
            "is already recorded"
        ) from exc


def resolve_generation(
    store: Store, group: str, incarnation: Incarnation, *, cversion: int, node_id: str
) -> GenerationChoice:
    """The generation of ``incarnation``, recording it first if no node has yet.

    ``record`` in the answer is True only for the call that recorded it. Each attempt is its
    own transaction; an attempt fails only because another node recorded something meanwhile,
    so the next one reads that record. StoreError when the store fails or keeps changing."""
    for _ in range(ATTEMPTS):
        try:
            with store.transaction() as session:
                choice = generation_for(
                    incarnation,
                    recorded_generations(session, group),
                    cversion=cversion,
                    highest_epoch=highest_job_epoch(session, group),
                )
                if choice.record:
                    record_generation(session, group, incarnation, choice.generation, node_id)
            return choice
        except AlreadyExists:
            continue
    raise StoreError(
        f"group {group!r}: could not record the generation of {incarnation} "
        f"in {ATTEMPTS} attempts (other nodes kept recording)"
    )


@dataclass
class GenerationResolver:
    """``resolve(group, incarnation, cversion) -> generation`` for the coordinator, on a store."""

    store: Store
    node_id: str

    def __call__(self, group: str, incarnation: Incarnation, cversion: int) -> int:
        choice = resolve_generation(
            self.store, group, incarnation, cversion=cversion, node_id=self.node_id
        )
        if choice.record:
            # generation 0: a new group; above: the members znode was recreated (ZooKeeper lost
            # its data, or someone deleted the znode), and epochs continue above the old ones
            log.log(
                logging.WARNING if choice.generation else logging.INFO,
                "group %s: members znode %s recorded under membership generation %d",
                group,
                incarnation,
                choice.generation,
            )
        return choice.generation
