"""The jobs a reconciler keeps between ticks, and the quiet ones a steady tick need not look at.

A reconciler keeps the jobs it owns between ticks. A job is *quiet* once a plan over its row (at
some version) and its application's status returned Noop: as long as neither moves, the plan
would return Noop again (plans of jobs with a live run do not depend on the time). A tick then
looks only at

- the *busy* jobs (not quiet: starting, stopping, waiting for a retry, just changed, ...);
- the quiet jobs whose row changed (a read returns them at a new version: they are busy again);
- the quiet jobs whose cluster's change feed (``scheduler/backends/changes.py``) names their
  submission, or every quiet job of a cluster whose backend has no feed or cannot tell;

and at every job on a full read (a safety net every ``full_read_every`` seconds, and after a
claim change) and after a cluster's health moved (a plan depends on it). So the work of a tick
follows what changed, not how many jobs the node owns.

:class:`KeptJobs` is the bookkeeping, every operation O(1) (or O(what it returns)): the jobs by
id, the busy ones, per quiet job the (version, status) its plan saw and an index from (cluster,
submission id) to the job, so that a feed's answer maps to jobs in O(changes), and the last mark
of each cluster's feed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from scheduler.backends.changes import Changes, Mark
from scheduler.core.backend import AppStatus
from scheduler.core.records import JobRecord


class KeptJobs:
    """Kept jobs by id, the busy ones, and the quiet ones indexed by (cluster, submission id).

    Not thread-safe: one reconciler's tick uses it (its submission threads hand their results
    back to the tick's thread).
    """

    def __init__(self) -> None:
        self._jobs: dict[int, JobRecord] = {}
        #: kept jobs that are not quiet
        self._busy: set[int] = set()
        #: quiet job id -> (version, status) its last Noop plan saw
        self._quiet: dict[int, tuple[int, AppStatus]] = {}
        #: quiet job id -> (cluster, submission id) of its live run
        self._where: dict[int, tuple[str, str]] = {}
        #: cluster -> submission id -> quiet job id
        self._by_submission: dict[str, dict[str, int]] = {}
        #: cluster -> the mark of its feed's last answer
        self._marks: dict[str, Mark] = {}

    # -- the kept jobs -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __iter__(self) -> Iterator[int]:
        return iter(self._jobs)

    def get(self, job_id: int) -> JobRecord | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[JobRecord]:
        return list(self._jobs.values())

    def put(self, job: JobRecord) -> None:
        """Keep ``job`` as read or written; busy unless it is quiet at this very version."""
        self._jobs[job.id] = job
        key = self._quiet.get(job.id)
        if key is not None and key[0] != job.version:
            self._unquiet(job.id)
        if job.id not in self._quiet:
            self._busy.add(job.id)

    def drop(self, job_id: int) -> None:
        """Stop keeping the job (at rest, gone, no longer ours)."""
        self._jobs.pop(job_id, None)
        self._busy.discard(job_id)
        self._unquiet(job_id)

    def replace_all(self, jobs: Iterable[JobRecord]) -> None:
        """A full read: keep exactly ``jobs`` (quiet ones stay quiet at the same version)."""
        old_quiet = self._quiet
        self._jobs = {j.id: j for j in jobs}
        self._busy = set()
        for job_id in [i for i in old_quiet if i not in self._jobs]:
            self._unquiet(job_id)
        for job in self._jobs.values():
            self.put(job)

    # -- quiet and busy ----------------------------------------------------------------------

    def busy(self) -> set[int]:
        return set(self._busy)

    def quiet_count(self) -> int:
        return len(self._quiet)

    def is_quiet(self, job: JobRecord, status: AppStatus) -> bool:
        """Whether ``job`` at this version with this status is what its quiet plan saw."""
        return self._quiet.get(job.id) == (job.version, status)

    def set_quiet(self, job: JobRecord, status: AppStatus) -> None:
        """``job``'s plan over ``status`` was Noop; only a live run with a submission id can be
        quiet (else the job stays busy)."""
        run = job.current_run
        if run is None or run.submission_id is None or job.id not in self._jobs:
            return
        where = (run.cluster, run.submission_id)
        if self._where.get(job.id) not in (None, where):
            self._unquiet(job.id)
        self._jobs[job.id] = job
        self._quiet[job.id] = (job.version, status)
        self._where[job.id] = where
        self._by_submission.setdefault(where[0], {})[where[1]] = job.id
        self._busy.discard(job.id)

    def wake(self, job_id: int) -> None:
        """Look at the job again next tick, whatever changed."""
        self._unquiet(job_id)
        if job_id in self._jobs:
            self._busy.add(job_id)

    def wake_all(self) -> None:
        """Every kept job is looked at next tick (e.g. a cluster's health moved)."""
        for job_id in list(self._quiet):
            self._unquiet(job_id)
        self._busy = set(self._jobs)

    def _unquiet(self, job_id: int) -> None:
        if self._quiet.pop(job_id, None) is None:
            return
        where = self._where.pop(job_id, None)
        if where is not None:
            subs = self._by_submission.get(where[0])
            if subs is not None and subs.get(where[1]) == job_id:
                del subs[where[1]]
        if job_id in self._jobs:
            self._busy.add(job_id)

    # -- the clusters' change feeds ----------------------------------------------------------

    def quiet_clusters(self) -> list[str]:
        """The clusters quiet jobs run on."""
        return [c for c, subs in self._by_submission.items() if subs]

    def mark(self, cluster: str) -> Mark | None:
        return self._marks.get(cluster)

    def changed(self, cluster: str, changes: Changes | None) -> list[int]:
        """The quiet jobs of ``cluster`` to look at after its feed answered ``changes`` (all of
        them when there is no answer or it cannot tell); remembers the answer's mark (forgets
        it without an answer: the next answer is then relative to nothing)."""
        subs = self._by_submission.get(cluster, {})
        if changes is None:
            self._marks.pop(cluster, None)
            return list(subs.values())
        self._marks[cluster] = changes.mark
        if changes.changed is None:
            return list(subs.values())
        if len(changes.changed) < len(subs):
            return [subs[s] for s in changes.changed if s in subs]
        return [j for s, j in subs.items() if s in changes.changed]
