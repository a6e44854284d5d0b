"""Authorization checks that run in the route's own thread, not in one of their own.

``authorize`` (``api/security/rules.py``) reads the store to decide some requests (the team of
the job a path names). A plain ``def`` route then reads the store again in the thread pool: two
hand-overs to a thread and back, two connections. A route listed in ``rules.DEFERRED`` instead
takes the check with it: ``authorize`` leaves it in the request (:func:`defer`) and the route runs
it first in its one thread (:func:`run_in_route_thread`), so the check still comes before
anything the route does and its answer (404, 403, 422) is the request's answer. What the check
read to decide (the job, with everything its ``GET`` shows) is handed to the route: the
decision and the answer come from one statement.

Two guards keep this exactly as strict as checking at once:

- an error answer made before the route ran (an invalid parameter, an unknown query parameter)
  runs the pending check first and answers its error when it has one (:func:`settle`, called by
  every exception handler of ``api/problems.py``): the same precedence as before;
- the security edge refuses to send a successful answer while a check is still pending
  (:func:`unsettled`): a route listed in ``DEFERRED`` that forgot to run it is a 500, never a
  leak.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request

from api.threads import in_thread

T = TypeVar("T")

#: where the pending check lives in the ASGI scope's state
KEY = "drover_deferred_authorization"


class Pending:
    """A check to run once, before the route's work; what it read to decide."""

    def __init__(self, check: Callable[[], Any]) -> None:
        self._check = check
        self.done = False
        self._found: Any = None

    def run(self) -> Any:
        if not self.done:
            self.done = True
            self._found = self._check()
        return self._found


def defer(request: Request, check: Callable[[], Any]) -> None:
    """Leave ``check`` to the route: it raises the request's error answer, or returns what it
    read to decide (the route's :func:`run_in_route_thread` gets it)."""
    request.scope.setdefault("state", {})[KEY] = Pending(check)


def _pending(scope: Any) -> Pending | None:
    state = scope.get("state") or {}
    pending = state.get(KEY)
    return pending if isinstance(pending, Pending) else None


def _checked_then(store: Any, pending: Pending, func: Callable[..., T], *args: Any) -> T:
    with store.reading():  # the check's read and the route's: one connection
        return func(pending.run(), *args)


async def run_in_route_thread(request: Request, func: Callable[..., T], *args: Any) -> T:
    """``func(found, *args)`` in the thread pool, after the request's pending check (in that
    thread, on the same store connection as the route's reads: ``Store.reading``); ``found``
    is what the check read."""
    pending = _pending(request.scope)
    if pending is None:  # the route is not in rules.DEFERRED: nothing checked its job
        raise RuntimeError(f"{request.method} {request.url.path}: no deferred check to run")
    store = request.app.state.context.store
    return await in_thread(request, _checked_then, store, pending, func, *args)


async def settle(request: Request) -> Exception | None:
    """Run the request's pending check, if any (an error answer is about to be made before the
    route ran); its error, if it has one."""
    pending = _pending(request.scope)
    if pending is None or pending.done:
        return None
    try:
        await in_thread(request, pending.run)
    except Exception as exc:  # noqa: BLE001 - handed to the exception handlers
        return exc
    return None


def unsettled(scope: Any) -> bool:
    """Whether the request still has a check that never ran."""
    pending = _pending(scope)
    return pending is not None and not pending.done
