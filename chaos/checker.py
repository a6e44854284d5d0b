"""Did Drover keep its promises in a recorded history? (pure)

Four checks, each a function of a ``History`` (``chaos/history.py``) returning violations:

``double_runs``       never two live applications of one job, across all clusters. An
                      application is live at least from the first to the last poll that saw it
                      alive (an application never comes back once it has ended), so two
                      applications of one job whose such intervals overlap were both live at
                      some instant: a violation for certain, never a guess. (Polls can miss an
                      overlap shorter than their interval; the recorder polls every 0.2 s.)
``lost_jobs``         every job the store finally wants RUNNING is seen RUNNING within the
                      convergence bound after the last fault cleared (``Quiet``).
``lost_writes``       the last acknowledged write to each job is what the store finally holds
                      (its desired state, or the job gone after a delete); a job whose last
                      write the operator never saw answered (``in_doubt``) is left out.
``unfenced_actions``  every action a node took on a job carried a claim that was current: the
                      store recorded that node's claim on the job under the action's epoch (the
                      claims are sampled, so it may show only after the action), and no newer
                      claim on the job had been seen by the time of the action.

``check`` runs them all and adds the figures a summary prints: faults by kind and the worst
convergence time.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from chaos.history import AppSeen, History

RUNNING = "RUNNING"
#: the op of a write whose outcome the operator never learned (its job is left out of lost_writes)
IN_DOUBT = "in_doubt"


@dataclass(frozen=True)
class Violation:
    kind: str  # double_run | lost_job | lost_write | unfenced_action
    job: str
    t: float | None
    detail: str


@dataclass(frozen=True)
class Report:
    violations: list[Violation]
    faults: dict[str, int] = field(default_factory=dict)
    worst_convergence_s: float | None = None
    apps_seen: int = 0
    jobs_seen: int = 0
    writes_acked: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"
        worst = "n/a" if self.worst_convergence_s is None else f"{self.worst_convergence_s:.1f} s"
        by_kind = Counter(v.kind for v in self.violations)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items()))
        lines = [
            f"faults injected: {faults}",
            f"applications seen: {self.apps_seen}, jobs: {self.jobs_seen}, "
            f"acknowledged writes: {self.writes_acked}",
            f"worst convergence after the faults cleared: {worst}",
            f"violations: {len(self.violations)}" + (f" ({kinds})" if kinds else ""),
        ]
        lines += [
            f"  {v.kind}: {v.job}" + (f" at {v.t:.2f}" if v.t is not None else "") + f": {v.detail}"
            for v in self.violations[:50]
        ]
        if len(self.violations) > 50:
            lines.append(f"  ... and {len(self.violations) - 50} more")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Life:
    cluster: str
    app_id: str
    first: float
    last: float


def _lives(apps: list[AppSeen]) -> dict[str, list[_Life]]:
    """job -> the span each of its applications was seen alive, by start."""
    spans: dict[tuple[str, str], tuple[str, float, float]] = {}
    for seen in apps:
        if not seen.alive:
            continue
        key = (seen.cluster, seen.app_id)
        job, first, last = spans.get(key, (seen.job, seen.t, seen.t))
        spans[key] = (job, min(first, seen.t), max(last, seen.t))
    lives: dict[str, list[_Life]] = defaultdict(list)
    for (cluster, app_id), (job, first, last) in spans.items():
        lives[job].append(_Life(cluster, app_id, first, last))
    for job_lives in lives.values():
        job_lives.sort(key=lambda life: (life.first, life.last))
    return lives


def double_runs(history: History) -> list[Violation]:
    found = []
    for job, lives in sorted(_lives(history.apps).items()):
        reported: set[tuple[str, str]] = set()
        latest: _Life | None = None  # the life reaching furthest among those started so far
        for life in lives:
            if latest is not None and life.first <= latest.last:
                pair = (latest.app_id, life.app_id)
                if pair not in reported:
                    reported.add(pair)
                    found.append(
                        Violation(
                            "double_run",
                            job,
                            life.first,
                            f"{latest.app_id} on {latest.cluster} (alive "
                            f"{latest.first:.2f}–{latest.last:.2f}) and {life.app_id} on "
                            f"{life.cluster} (alive {life.first:.2f}–{life.last:.2f})",
                        )
                    )
            if latest is None or life.last > latest.last:
                latest = life
    return found


def _quiet_since(history: History) -> float | None:
    if history.quiet:
        return max(q.t for q in history.quiet)
    times = [j.t for j in history.jobs]
    return min(times) if times else None


def convergence(history: History) -> dict[str, float | None]:
    """job -> seconds from the quiet point until it was RUNNING (None: never), for every job the
    store finally wants RUNNING. The recorder writes a job's states when they change, so a job
    whose latest record before the quiet point says RUNNING was RUNNING then (0 s)."""
    since = _quiet_since(history)
    wanted = [f.job for f in history.final if f.exists and f.desired == RUNNING]
    running_at: dict[str, float] = {}
    before: dict[str, str] = {}
    for seen in sorted(history.jobs, key=lambda s: s.t):
        if since is None or seen.t <= since:
            before[seen.job] = seen.observed
        elif seen.observed == RUNNING:
            running_at.setdefault(seen.job, seen.t)
    if since is not None:
        running_at.update({job: since for job, state in before.items() if state == RUNNING})
    return {
        job: (running_at[job] - since) if job in running_at and since is not None else None
        for job in wanted
    }


def lost_jobs(history: History, bound_s: float) -> list[Violation]:
    since = _quiet_since(history)
    found = []
    for job, took in sorted(convergence(history).items()):
        if took is None:
            found.append(
                Violation("lost_job", job, since, "desired RUNNING, never seen RUNNING again")
            )
        elif took > bound_s:
            found.append(
                Violation(
                    "lost_job",
                    job,
                    since,
                    f"RUNNING again only after {took:.1f} s (bound {bound_s:.0f} s)",
                )
            )
    return found


def lost_writes(history: History) -> list[Violation]:
    last = {}
    for write in sorted(history.writes, key=lambda w: w.t):
        last[write.job] = write
    final = {f.job: f for f in history.final}
    found = []
    for job, write in sorted(last.items()):
        now = final.get(job)
        if write.op == IN_DOUBT:
            continue  # the operator could not learn whether its last write happened
        if write.desired is None:
            if now is not None and now.exists:
                found.append(
                    Violation(
                        "lost_write", job, write.t, f"{write.op} acknowledged, job still exists"
                    )
                )
        elif now is None or not now.exists:
            found.append(
                Violation("lost_write", job, write.t, f"{write.op} acknowledged, job is gone")
            )
        elif now.desired != write.desired:
            found.append(
                Violation(
                    "lost_write",
                    job,
                    write.t,
                    f"{write.op} acknowledged (desired {write.desired}), "
                    f"store holds desired {now.desired}",
                )
            )
    return found


def unfenced_actions(history: History) -> list[Violation]:
    claims = defaultdict(list)
    for claim in history.claims:
        claims[claim.job].append(claim)
    found = []
    for action in sorted(history.actions, key=lambda a: a.t):
        before = [c for c in claims[action.job] if c.t <= action.t]
        # the recorder samples claims: one made and used within a sample shows only afterwards
        held = any(c.node == action.node and c.epoch == action.epoch for c in claims[action.job])
        newer = [c for c in before if c.epoch > action.epoch]
        if not held:
            found.append(
                Violation(
                    "unfenced_action",
                    action.job,
                    action.t,
                    f"{action.node} did {action.kind} under epoch {action.epoch} "
                    "without a recorded claim",
                )
            )
        elif newer:
            newest = max(newer, key=lambda c: c.epoch)
            found.append(
                Violation(
                    "unfenced_action",
                    action.job,
                    action.t,
                    f"{action.node} did {action.kind} under epoch {action.epoch} after "
                    f"{newest.node} claimed the job under epoch {newest.epoch} "
                    f"(at {newest.t:.2f})",
                )
            )
    return found


def check(history: History, convergence_bound_s: float) -> Report:
    times = convergence(history).values()
    worst = max((t for t in times if t is not None), default=None)
    return Report(
        violations=double_runs(history)
        + lost_jobs(history, convergence_bound_s)
        + lost_writes(history)
        + unfenced_actions(history),
        faults=dict(Counter(f.kind for f in history.faults)),
        worst_convergence_s=worst,
        apps_seen=len({(a.cluster, a.app_id) for a in history.apps}),
        jobs_seen=len({j.job for j in history.jobs}),
        writes_acked=len(history.writes),
    )
