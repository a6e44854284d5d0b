"""Authorization: the built-in role bindings, or an external permission center over HTTP.

The permission center gets one ``POST`` per decision::

    {"subject": "user:alice", "action": "job.write", "resource": "job/orders", "team": "ads",
     "roles": {"ads": "operator"}}

and answers ``{"allow": true|false, "reason": "..."}``. Answers are cached per (subject, action,
resource, team) for ``DROVER_AUTHZ_CACHE_SECONDS``. No answer (refused, timeout, 5xx, garbage)
fails closed: PermissionCenterUnavailable, a 503 problem. Node and run credentials are decided
here, never sent to the center (they are not people).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.config import Settings
from scheduler.core.errors import PermissionCenterUnavailable
from scheduler.decisions.identity import READ_ACTIONS, Action, Decision, Principal, Scope, decide


@dataclass
class PermissionCenter:
    url: str
    cache_s: float = 5.0
    timeout_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    _cache: dict[tuple[str, str, str, str | None], tuple[float, Decision]] = field(
        default_factory=dict
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ask(
        self, principal: Principal, action: Action, resource: str, team: str | None
    ) -> Decision:
        key = (principal.subject, action.value, resource, team)
        now = self.clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        decision = self._call(principal, action, resource, team)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now + self.cache_s, decision)
        return decision

    def _call(
        self, principal: Principal, action: Action, resource: str, team: str | None
    ) -> Decision:
        import httpx

        from scheduler.backends import http

        body: dict[str, Any] = {
            "subject": principal.subject,
            "action": action.value,
            "resource": resource,
            "team": team,
            "roles": {t: str(r) for t, r in principal.roles.items()},
        }
        try:
            response = http.one_off("POST", self.url, json=body, timeout=self.timeout_s)
            answer = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            raise PermissionCenterUnavailable(
                f"the permission center did not answer ({type(exc).__name__}); "
                "every request is refused until it does"
            ) from None
        if not isinstance(answer, dict) or not isinstance(answer.get("allow"), bool):
            raise PermissionCenterUnavailable(
                f"the permission center gave no decision (HTTP {response.status_code}); "
                "every request is refused until it does"
            )
        reason = answer.get("reason")
        return Decision(answer["allow"], str(reason) if reason else "the permission center")


class Authorizer:
    """One place that decides; the API's route rules call :meth:`check`."""

    def __init__(self, settings: Settings) -> None:
        #: cluster marks are for platform operators only (DROVER_CLUSTER_MARKS)
        self.platform_marks = settings.cluster_marks == "platform-operators"
        self.center = (
            PermissionCenter(
                settings.authz_url, settings.authz_cache_seconds, settings.authz_timeout
            )
            if settings.authz_url
            else None
        )

    def may_block(self, principal: Principal) -> bool:
        """Whether deciding for ``principal`` may ask the permission center (I/O: call
        :meth:`decide` off the event loop then); the built-in bindings decide at once."""
        return self.center is not None and not principal.node and principal.run_of_job is None

    def decide(
        self,
        principal: Principal,
        action: Action,
        *,
        resource: str = "",
        team: str | None = None,
        job: str | None = None,
    ) -> Decision:
        if self.center is None or principal.node or principal.run_of_job is not None:
            return decide(principal, action, team, job, platform_marks=self.platform_marks)
        if action is Action.CLUSTER_MARK and self.platform_marks:  # the platform's rule first
            kept = decide(principal, action, team, job, platform_marks=True)
            if not kept.allowed:
                return kept
        if not principal.scopes:
            return Decision(False, "no credentials")
        if action not in READ_ACTIONS and Scope.WRITE not in principal.scopes:
            return Decision(False, "the token is read-only")
        return self.center.ask(principal, action, resource, team)
