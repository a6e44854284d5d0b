"""Did Drover keep its promises in a recorded history? (pure)

Eight checks, each a function of a ``History`` (``chaos/history.py``) returning violations:

``double_runs``       never two live applications of one job, across all clusters. An
                      application is live at least from the first to the last poll that saw it
                      alive (an application never comes back once it has ended), so two
                      applications of one job whose such intervals overlap were both live at
                      some instant: a violation for certain, never a guess. (Polls can miss an
                      overlap shorter than their interval; the recorder polls every 0.2 s.)
                      Each source is checked on its own: the masters' listings, and on real
                      clusters the driver processes on the machine (``process``; a driver and
                      its listed application are one, so the sources are never mixed).
``double_commits``    no micro-batch of a job committed by two runs (``BatchCommit``, from the
                      sample pipeline's commit log). A batch *written* by a run that then died
                      before Spark committed it is done again by the next run: counted
                      (``replayed``), not flagged.
``failovers_unended`` every failover the store holds (the operator's and automatic ones) ended
                      -- SUCCEEDED, CANCELLED, or FAILED with a reason -- within its bound after
                      it was created (``failover_unended``; a FAILED one without a reason:
                      ``failover_unexplained``). On real Spark the bound is the sum of the step
                      timeouts the nodes were given plus a margin
                      (``chaos.realspark.failover_bound``).
``failed_polls``      every poll of the recorder answered, but for those a fault explains (the
                      store while MariaDB was down, a cluster while its master was killed): a
                      history with holes cannot show that no promise was broken in them.
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

from chaos.history import Action, AppSeen, Claim, Fault, History, PollMissed, WriteAcked

RUNNING = "RUNNING"
#: the op of a write whose outcome the operator never learned (its job is left out of lost_writes)
IN_DOUBT = "in_doubt"
#: how long after an action a sample of the claim it acted under may come (the recorder samples
#: the store every 0.25 s)
CLAIM_SLACK_S = 2.0
#: how a failover may end
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")
#: poll source (its prefix before ":") -> the fault kinds that make it fail, and so excuse a miss
#: (a cluster's only when the fault's target names that cluster)
EXCUSED_BY = {
    "store": ("db_restart",),
    "cluster": ("master_kill", "az_loss", "cluster_restart"),
}
#: seconds after a fault healed during which a poll it made fail may still be reported
FAULT_SLACK_S = 10.0


@dataclass(frozen=True)
class Violation:
    #: double_run | lost_job | lost_write | unfenced_action | double_commit | failover_unended
    #: | failover_unexplained | failed_poll
    kind: str
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
    #: committed | replayed -> how many (job, batch) pairs (double_commits)
    batches: dict[str, int] = field(default_factory=dict)
    #: poll source -> failed polls (excused or not: failed_polls flags those no fault explains)
    misses: dict[str, int] = field(default_factory=dict)
    #: the longest failover, created to ended (seconds)
    longest_failover_s: float | None = None

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
            f"worst convergence after the faults cleared: {worst}"
            + (
                f"; longest failover: {self.longest_failover_s:.1f} s"
                if self.longest_failover_s is not None
                else ""
            ),
            "batches: "
            + (
                ", ".join(f"{k} {n}" for k, n in sorted(self.batches.items()))
                if self.batches.get("committed")
                else "none committed (no run got as far as committing a batch: the check that "
                "no batch was committed by two runs saw nothing)"
            )
            + "; failed polls: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.misses.items())) or "none"),
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
    """job -> the span each of its applications was seen alive, by start (one source)."""
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
    by_source: dict[str, list[AppSeen]] = defaultdict(list)
    for seen in history.apps:
        by_source[seen.source].append(seen)
    found = []
    for source, apps in sorted(by_source.items()):
        found += _double_runs(apps, "" if source == "master" else f" ({source}es)")
    return found


def _double_runs(apps: list[AppSeen], seen_as: str) -> list[Violation]:
    found = []
    for job, lives in sorted(_lives(apps).items()):
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
                            f"{life.cluster} (alive {life.first:.2f}–{life.last:.2f})" + seen_as,
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


def batch_verdicts(history: History) -> tuple[Counter[str], list[Violation]]:
    """How many (job, batch) pairs were committed, how many written again by a later run after
    an earlier one's write was never committed (``replayed``); and the batches committed by two
    runs."""
    committed: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    written: dict[tuple[str, int], set[str]] = defaultdict(set)
    for record in history.batches:
        key = (record.job, record.batch)
        if record.committed:
            committed[key].setdefault(record.run, record.t)
        written[key].add(record.run)
    tally: Counter[str] = Counter()
    found = []
    for (job, batch), runs in sorted(written.items()):
        done = committed.get((job, batch), {})
        if done:
            tally["committed"] += 1
        if len(runs - set(done)) and len(runs) > 1:
            tally["replayed"] += 1
        if len(done) > 1:
            first = min(done.values())
            found.append(
                Violation(
                    "double_commit",
                    job,
                    first,
                    f"batch {batch} committed by runs "
                    + ", ".join(f"{run} (at {t:.2f})" for run, t in sorted(done.items())),
                )
            )
    return tally, found


def double_commits(history: History) -> list[Violation]:
    return batch_verdicts(history)[1]


def failover_times(history: History) -> dict[int, float | None]:
    """failover id -> seconds from created to ended (None: not ended, or times unknown)."""
    return {
        f.operation: (f.finished - f.created)
        if f.finished is not None and f.created is not None
        else None
        for f in history.final_operations
        if f.exists and f.kind == "failover"
    }


def failovers_unended(history: History, bound_s: float | None) -> list[Violation]:
    found = []
    times = failover_times(history)
    for op in sorted(history.final_operations, key=lambda o: o.operation):
        if not op.exists or op.kind != "failover":
            continue
        name = f"failover {op.operation}"
        took = times.get(op.operation)
        if op.state not in ENDED:
            found.append(
                Violation(
                    "failover_unended",
                    name,
                    op.created,
                    f"still {op.state} at the end of the run: {op.detail}",
                )
            )
        elif bound_s is not None and took is not None and took > bound_s:
            found.append(
                Violation(
                    "failover_unended",
                    name,
                    op.created,
                    f"{op.state} only after {took:.1f} s (bound {bound_s:.0f} s): {op.detail}",
                )
            )
        elif op.state == "FAILED" and not (op.reason.strip() or "(" in op.detail):
            found.append(
                Violation(
                    "failover_unexplained", name, op.created, f"FAILED with no reason: {op.detail}"
                )
            )
    return found


def _excused(miss: PollMissed, faults: list[Fault]) -> bool:
    kind, _, name = miss.source.partition(":")
    for fault in faults:
        if fault.kind not in EXCUSED_BY.get(kind, ()):
            continue
        if name and not fault.target.startswith(name):
            continue
        if fault.t <= miss.t <= (fault.until or fault.t) + FAULT_SLACK_S:
            return True
    return False


def failed_polls(history: History) -> list[Violation]:
    return [
        Violation(
            "failed_poll",
            miss.source,
            miss.t,
            f"a poll of {miss.source} failed with no fault to explain it: {miss.detail}",
        )
        for miss in sorted(history.misses, key=lambda m: m.t)
        if not _excused(miss, history.faults)
    ]


def check(
    history: History, convergence_bound_s: float, failover_bound_s: float | None = None
) -> Report:
    """Every check; ``failover_bound_s``: how long a failover may take (None: only that it
    ended)."""
    times = convergence(history).values()
    worst = max((t for t in times if t is not None), default=None)
    batches, doubled = batch_verdicts(history)
    took = [t for t in failover_times(history).values() if t is not None]
    return Report(
        violations=double_runs(history)
        + lost_jobs(history, convergence_bound_s)
        + lost_writes(history)
        + unfenced_actions(history)
        + doubled
        + failovers_unended(history, failover_bound_s)
        + failed_polls(history),
        faults=dict(Counter(f.kind for f in history.faults)),
        worst_convergence_s=worst,
        apps_seen=len({(a.cluster, a.app_id) for a in history.apps}),
        jobs_seen=len({j.job for j in history.jobs}),
        writes_acked=len(history.writes),
        failovers=_failovers(history),
        actions=dict(Counter(a.kind for a in history.actions)),
        claims=dict(claim_verdicts(history)),
        batches=dict(batches),
        misses=dict(Counter(m.source for m in history.misses)),
        longest_failover_s=max(took, default=None),
    )


def _failovers(history: History) -> dict[str, int]:
    """Final state -> how many failovers ended so: the acknowledged ones, and ``automatic``
    (created by Drover itself) apart."""
    final = {f.operation: f for f in history.final_operations}
    states: Counter[str] = Counter()
    acked = {op.operation for op in history.operations}
    for f in history.final_operations:
        if f.exists and f.kind == "failover" and f.operation not in acked:
            states[f"other {f.state or '?'}"] += 1
    for op in history.operations:
        if op.operation <= 0:
            states["in doubt"] += 1
            continue
        seen = final.get(op.operation)
        states[(seen.state or "?") if seen is not None and seen.exists else "missing"] += 1
    return dict(states)
