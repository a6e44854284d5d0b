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
                      (its desired state, or the job gone after a delete, and the spec the last
                      write that showed one left); a job whose last write the operator never
                      saw answered (``in_doubt``) is left out. Every acknowledged operation (a
                      failover) is in the store at the end.
``unfenced_actions``  every action a node took on a job carried a claim that was current: no
                      claim on the job under a newer epoch (by any node), nor another node's
                      under the same epoch, had been recorded by the time of the action. The
                      claims are sampled (every 0.25 s), so the action's own claim may never
                      show (made and superseded within one sample, as when the first node back
                      after a ZooKeeper wipe owns its groups for an instant): such actions are
                      counted (``claims``: ``unsampled``), not flagged; a kill with no epoch
                      and no claim of its node at all is flagged. A kill whose
                      epoch the store did not record (events before migration 0016) is taken
                      to be under the newest epoch the node was seen claiming the job under by
                      ``CLAIM_SLACK_S`` after the kill (a guess: a claim made and lost within
                      one sample is missed, so only exact epochs make the check exact).

``check`` runs them all and adds the figures a summary prints: faults by kind and the worst
convergence time.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from chaos.history import Action, AppSeen, Claim, History, WriteAcked

RUNNING = "RUNNING"
#: the op of a write whose outcome the operator never learned (its job is left out of lost_writes)
IN_DOUBT = "in_doubt"
#: how long after an action a sample of the claim it acted under may come (the recorder samples
#: the store every 0.25 s)
CLAIM_SLACK_S = 2.0


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
    #: final state -> how many acknowledged failovers ended so ("missing": not in the store)
    failovers: dict[str, int] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    #: held | unsampled | stale -> how many actions (see unfenced_actions)
    claims: dict[str, int] = field(default_factory=dict)

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
            f"acknowledged writes: {self.writes_acked}, failovers: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.failovers.items())) or "none")
            + ", actions checked: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.actions.items())) or "none")
            + (
                " (their claims: "
                + ", ".join(f"{k} {n}" for k, n in sorted(self.claims.items()))
                + ")"
                if self.claims
                else ""
            ),
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
    last: dict[str, WriteAcked] = {}
    last_spec: dict[str, WriteAcked] = {}
    for write in sorted(history.writes, key=lambda w: w.t):
        last[write.job] = write
        if write.spec is not None:
            last_spec[write.job] = write
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
        elif job in last_spec and now.spec is not None and now.spec != last_spec[job].spec:
            spec = last_spec[job]
            found.append(
                Violation(
                    "lost_write",
                    job,
                    spec.t,
                    f"{spec.op} acknowledged (spec {spec.spec}), store holds spec {now.spec}",
                )
            )
    stored = {f.operation for f in history.final_operations if f.exists}
    for op in sorted(history.operations, key=lambda o: o.t):
        if op.operation > 0 and op.operation not in stored:
            found.append(
                Violation(
                    "lost_write",
                    f"{op.kind} {op.operation}",
                    op.t,
                    f"{op.kind} of {op.detail} acknowledged, not in the store",
                )
            )
    return found


def _claim_check(action: Action, claims: list[Claim]) -> tuple[str, Violation | None]:
    """``(verdict, violation)`` of one action against the sampled claims on its job: verdict
    ``held`` (its claim was sampled), ``unsampled`` (never sampled, and nothing sampled before the
    action was as new: a claim made and superseded within one sample, as when the first node
    back after a ZooKeeper wipe owns the group for an instant) or ``stale`` (a violation)."""
    before = [c for c in claims if c.t <= action.t]
    epoch = action.epoch
    if epoch is None:  # the store did not record it: the node's newest claim seen by shortly after
        mine = [
            c.epoch for c in claims if c.node == action.node and c.t <= action.t + CLAIM_SLACK_S
        ]
        epoch = max(mine, default=-1)
        under = "its newest claim's epoch " + (str(epoch) if mine else "(none)")
    else:
        under = f"epoch {epoch}"
    held = any(c.node == action.node and c.epoch == epoch for c in claims)
    # stale: a claim under a newer epoch (by anyone), or another node's under the same epoch
    rivals = [c for c in before if c.epoch > epoch or (c.epoch == epoch and c.node != action.node)]
    if rivals:
        rival = max(rivals, key=lambda c: (c.epoch, c.t))
        return "stale", Violation(
            "unfenced_action",
            action.job,
            action.t,
            f"{action.node} did {action.kind} under {under} after "
            f"{rival.node} claimed the job under epoch {rival.epoch} (at {rival.t:.2f})",
        )
    if held:
        return "held", None
    if epoch < 0:
        return "stale", Violation(
            "unfenced_action",
            action.job,
            action.t,
            f"{action.node} did {action.kind} under {under} without a recorded claim",
        )
    return "unsampled", None


def claim_verdicts(history: History) -> Counter[str]:
    """How many actions had their claim sampled (``held``), not sampled but newer than any
    claim seen before them (``unsampled``), or were ``stale``."""
    claims: dict[str, list[Claim]] = defaultdict(list)
    for claim in history.claims:
        claims[claim.job].append(claim)
    return Counter(_claim_check(a, claims[a.job])[0] for a in history.actions)


def unfenced_actions(history: History) -> list[Violation]:
    claims: dict[str, list[Claim]] = defaultdict(list)
    for claim in history.claims:
        claims[claim.job].append(claim)
    found = []
    for action in sorted(history.actions, key=lambda a: a.t):
        _, violation = _claim_check(action, claims[action.job])
        if violation is not None:
            found.append(violation)
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
        failovers=_failovers(history),
        actions=dict(Counter(a.kind for a in history.actions)),
        claims=dict(claim_verdicts(history)),
    )


def _failovers(history: History) -> dict[str, int]:
    final = {f.operation: f for f in history.final_operations}
    states: Counter[str] = Counter()
    for op in history.operations:
        if op.operation <= 0:
            states["in doubt"] += 1
            continue
        seen = final.get(op.operation)
        states[(seen.state or "?") if seen is not None and seen.exists else "missing"] += 1
    return dict(states)
