"""The benchmark targets: which figure of ``make bench`` must stay within which bound, and
where the bound comes from. ``bench/suite.py`` judges its results with them and
``bench/api.py`` prints the API's next to its figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: one run's figures by name (units in the names)
Figures = dict[str, Any]


@dataclass(frozen=True)
class Target:
    figure: str
    op: str  # "<=", ">=" or "=="
    bound: float | str  # a number, or the name of another figure plus an offset ("x+2")
    source: str

    def bound_value(self, figures: Figures) -> float | None:
        if isinstance(self.bound, int | float):
            return float(self.bound)
        name, _, plus = self.bound.partition("+")
        base = figures.get(name)
        if not isinstance(base, int | float):
            return None
        return float(base) + float(plus or 0)

    def text(self) -> str:
        if isinstance(self.bound, str):
            name, _, plus = self.bound.partition("+")
            return f"{self.op} {name}" + (f" + {plus}" if plus else "")
        return f"{self.op} {self.bound:g}"

    def met(self, figures: Figures) -> bool | None:
        value, bound = figures.get(self.figure), self.bound_value(figures)
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, int | float) or bound is None:
            return None
        if isinstance(value, float) and math.isnan(value):
            return None
        if self.op == "<=":
            return value <= bound
        if self.op == ">=":
            return value >= bound
        return value == bound


TARGETS = [
    Target("steady_tick_ratio_10k_to_1k", "<=", 2.0, "issue 8"),
    Target("scale_10k_all_running_s", "<=", 40.0, "issue 8"),
    Target("scale_50k_all_running_s", "<=", 120.0, "issue 8"),
    Target("node_rss_mib", "<=", 700.0, "issue 8"),
    Target("submission_statements", "<=", 8.0, "issue 8"),
    Target("submission_statements_rollback", "==", 0.0, "issue 8"),
    Target("rolling_restart_app_restarts", "==", 0.0, "issue 13"),
    Target("takeover_kill9_1k_owned_s", "<=", "session_timeout_s+2", "bench.takeover"),
    Target("takeover_kill9_10k_owned_s", "<=", "session_timeout_s+2", "bench.takeover"),
    Target("takeover_sigstop_1k_app_creates", "==", 0.0, "DESIGN §3"),
    Target("takeover_sigstop_10k_app_creates", "==", 0.0, "DESIGN §3"),
    Target("takeover_kill9_1k_app_creates", "==", 0.0, "DESIGN §3"),
    Target("takeover_kill9_10k_app_creates", "==", 0.0, "DESIGN §3"),
    Target("failover_1k_double_runs", "==", 0.0, "DESIGN §3"),
    Target("failover_1k_s", "<=", 60.0, "issue 27"),
    Target("failover_trips_per_item", "<=", 8.0, "issue 27"),
    Target("failover_real_succeeded", "==", 1.0, "issue 9"),
    Target("az_loss_all_running_on_b_s", "<=", "az_loss_lease_s+60", "DESIGN §3.6, issue 28"),
    Target("az_loss_double_commits", "==", 0.0, "DESIGN §3"),
    Target("yarn_failover_10_succeeded", "==", 1.0, "issue 30"),
    Target("yarn_failover_10_double_runs", "==", 0.0, "DESIGN §3"),
    # bench/api.py: the worst store's figure (lowest ratio, highest p99); it prints these too
    Target("api_get_ratio_to_bare", ">=", 0.5, "issue 11"),
    Target("api_get_p99_ms", "<=", 25.0, "issue 11"),
    Target("api_list_ratio_to_bare", ">=", 0.3, "issue 11"),
    Target("api_list_p99_ms", "<=", 50.0, "issue 11"),
    Target("api_create_ratio_to_bare", ">=", 0.3, "issue 11"),
    # bench/cli_startup.py: a command line on-call types many times an incident
    Target("cli_help_s", "<=", 0.3, "issue 31"),
    Target("cli_jobs_get_s", "<=", 0.3, "issue 31"),
]
TARGET_OF = {t.figure: t for t in TARGETS}
