"""Job creations (``POST /v1/jobs``), a batch per transaction.

A creation alone reads what its checks need in one statement and writes five kinds of row (job,
labels, first revision, creation event, audit) in its own transaction. Under a burst (a service
registering its jobs, an import) most of that cost is per *statement*, not per row. So the
requests' threads hand their creations to a :class:`~scheduler.core.combining.Combiner`: those that
arrive while a batch is in its transaction queue up and go together in the next one, with a
statement per kind of row for all of them. A creation alone still runs at once, a batch of one.

Nothing about a creation changes with its company:

- each is checked in the same order and with the same errors as alone: the submission policy,
  then its group, its name (also against the names accepted before it in the batch), its
  placement, its checkpoint location, its labels. One refused leaves the others alone;
- an accepted one is written whole with the others or not at all, in one transaction;
- its request's ``Idempotency-Key`` is marked applied in the transaction that commits it, and
  only if it is created (a refused one leaves its key free for a retry, as alone);
- if the batch's writes fail (another node created one of the names meanwhile: an
  IntegrityError), the transaction is rolled back and each creation runs again alone, so the
  one whose name was taken gets its 409 and the others are created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from api.schemas.resources import JobPublic, audit_doc
from scheduler.config import Settings
from scheduler.core.combining import Combiner
from scheduler.core.errors import DroverError
from scheduler.core.records import JobSpec
from scheduler.decisions import submission
from scheduler.decisions.identity import Principal, Role
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store.db import COMMIT_HOOK, Store

#: creations a transaction takes at most
MAX_BATCH = 64


@dataclass(frozen=True)
class Creation:
    """One ``POST /v1/jobs``: what to create, who asks, the body as the audit keeps it, and
    what its request runs in the transaction that commits it (``COMMIT_HOOK``: marks its
    ``Idempotency-Key`` applied; taken from the request's context, since the batch may commit
    in another request's thread)."""

    spec: JobSpec
    principal: Principal
    actor: str
    detail: dict[str, Any]
    on_commit: Callable[[Session], None] | None = None

    @classmethod
    def of_request(
        cls, spec: JobSpec, principal: Principal, actor: str, detail: dict[str, Any]
    ) -> Creation:
        """A creation with the calling context's commit hook."""
        return cls(spec, principal, actor, detail, COMMIT_HOOK.get())


Outcome = JobPublic | BaseException


def policy_check(
    clusters: Mapping[str, tuple[str, ...]],
    settings: Settings,
    principal: Principal,
    *,
    team: str,
    entrypoint: str | None,
    conf: Mapping[str, str] | None,
    previous_conf: Mapping[str, str] | None = None,
) -> None:
    """The submission policy (:func:`scheduler.decisions.submission.check`) for ``principal`` under
    this node's settings, on the job's clusters' artifact roots as read (``previous_conf``: the
    conf of the job it changes, when it stays in its team)."""
    submission.check(
        clusters,
        default_roots=tuple(settings.resolved_artifact_roots),
        allow_list=settings.spark_conf_allow_list,
        admin=principal.role_on(team) == Role.ADMIN,
        platform_admin=principal.platform_admin,
        subject=principal.subject,
        entrypoint=entrypoint,
        conf=conf,
        previous_conf=previous_conf,
    )


class Creations:
    """Creates jobs for the API's threads, batched (see the module docstring)."""

    def __init__(self, store: Store, settings: Settings, *, max_batch: int = MAX_BATCH) -> None:
        self._store, self._settings = store, settings
        self._combiner: Combiner[Creation, JobPublic] = Combiner(
            self.run_batch, max_batch=max_batch
        )

    def create(self, creation: Creation) -> JobPublic:
        """The created job (its error raised: refused, a name taken, the store down)."""
        return self._combiner.run(creation)

    def run_batch(self, batch: Sequence[Creation]) -> list[Outcome]:
        """One outcome per creation, in order: what one batch of the combiner runs (a
        transaction; each alone again if its writes fail)."""
        try:
            return self._transaction(batch)
        except Exception as exc:  # noqa: BLE001 - answered to the batch's requests
            if len(batch) == 1:
                return [exc]
        # the batch's writes failed (an IntegrityError: a name taken meanwhile elsewhere)
        return [self._alone(creation) for creation in batch]

    def _alone(self, creation: Creation) -> Outcome:
        try:
            return self._transaction([creation])[0]
        except Exception as exc:  # noqa: BLE001 - answered to its request
            return exc

    def _transaction(self, batch: Sequence[Creation]) -> list[Outcome]:
        # the leading thread's own hook must not run for the batch: each creation's runs for it
        token = COMMIT_HOOK.set(None)
        try:
            return self._write(batch)
        finally:
            COMMIT_HOOK.reset(token)

    def _write(self, batch: Sequence[Creation]) -> list[Outcome]:
        settings, node = self._settings, self._settings.node_id
        outcomes: list[Outcome | None] = [None] * len(batch)
        with self._store.transaction() as session:
            facts = jobs_store.creation_facts(session, [c.spec for c in batch])
            planned: list[jobs_store.Planned] = []
            accepted: list[int] = []
            for at, creation in enumerate(batch):
                spec = creation.spec
                try:
                    policy_check(
                        facts.groups.get(spec.group, {}),
                        settings,
                        creation.principal,
                        team=spec.team,
                        entrypoint=spec.entrypoint,
                        conf=spec.conf,
                    )
                    planned.append(
                        jobs_store.plan_creation(
                            session,
                            facts,
                            spec,
                            cause=f"api:create by {creation.actor}",
                            anywhere=creation.principal.platform_admin,
                        )
                    )
                except DroverError as exc:
                    outcomes[at] = exc
                    continue
                accepted.append(at)
            records = jobs_store.insert_jobs(session, planned, node_id=node)
            audits = []
            for at, record in zip(accepted, records, strict=True):
                public = JobPublic.of(record)  # the answer, and the audit's "after"
                outcomes[at] = public
                audits.append(
                    journal.audit_values(
                        actor=batch[at].actor,
                        action="job.create",
                        target_kind="job",
                        target_name=record.name,
                        detail=batch[at].detail,
                        node_id=node,
                        team=record.team,
                        after=audit_doc(public),
                    )
                )
            journal.add_audits(session, audits)
            for at in accepted:  # only what commits marks its request's key
                hook = batch[at].on_commit
                if hook is not None:
                    hook(session)
        assert all(outcome is not None for outcome in outcomes)
        return outcomes  # type: ignore[return-value]
