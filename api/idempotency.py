"""``Idempotency-Key``: a retried write returns the first answer and does nothing again.

A route opts in with one line, ``dependencies=[Idempotent]`` in its decorator (or
``router.add_api_route(..., dependencies=[Idempotent])``)::

    @router.post("/{name}/upgrade", dependencies=[Idempotent], ...)
    def upgrade_job(...): ...

Nothing else changes in the handler. What a client gets (``scheduler.decisions.idempotency`` has the
states and the decision):

- no header: the request runs as always;
- a new key: the request runs; its answer (status, body, ``Location``/``ETag``/``Link``) is kept
  with the key for ``DROVER_IDEMPOTENCY_TTL`` seconds (a day by default);
- the same key again with the same request (method, route, path, query, ``If-Match``, JSON body
  compared after parsing): the kept answer, with ``Idempotent-Replayed: true``, and nothing is
  done again; while the first request is still running the retry waits for it (up to
  :data:`WAIT_S`, then 409 ``idempotency-key-in-use`` with ``Retry-After``);
- the same key with another request: 422 ``idempotency-key-reused``;
- keys belong to the caller (its subject): two callers never collide.

A request that fails having changed nothing (any 4xx, a 5xx before its commit) leaves no key: a
retry runs afresh. Exactly once holds across nodes and crashes because "the change committed" is
written *in the change's own transaction* (every commit of a store session while the request runs
marks the key ``applied``: ``scheduler.store.db.COMMIT_HOOK``), so a retry after a crash between
the commit and the recording of the answer gets a 409 instead of a second change; and a request
that outlives its key's lease (``scheduler.decisions.idempotency.LEASE_S``) cannot commit once a
retry has taken the key over.

Keys are read by handlers running in the request's own context (the threadpool carries it). A
handler that hands its store writes to another thread must mark the key there itself: creations
do, since a batch of them commits in one request's thread (``api/creations.py``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import random
import time
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.security.rules import principal_of
from api.threads import WorkerThreads, in_thread
from scheduler.core.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from scheduler.decisions.idempotency import KEY_PATTERN, Decision
from scheduler.store import idempotency as keys_store
from scheduler.store.db import COMMIT_HOOK, Store

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
#: the header as the ASGI scope spells it
_HEADER = HEADER.lower().encode("latin-1")
REPLAYED_HEADER = "Idempotent-Replayed"
#: how long a retry waits for the first request with its key to finish
WAIT_S = 10.0
#: the answer's headers kept with it (the others are the edge's and are sent afresh)
KEPT_HEADERS = ("content-type", "location", "etag", "link", "retry-after")
#: where the request's reservation lives in the ASGI scope's state
_STATE = "drover_idempotency"
#: a reservation purges some expired keys once in this many
_PURGE_ONE_IN = 64


class _Replay(Exception):
    def __init__(self, answer: keys_store.Answer) -> None:
        self.answer = answer


def fingerprint(request: Request, body: bytes) -> str:
    """What makes two requests "the same request": method, route, path and query parameters,
    ``If-Match``, and the body (parsed JSON, keys sorted; raw bytes when not JSON)."""
    route = request.scope.get("route")
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"))
    except ValueError:
        canonical = body.decode("latin-1")
    document = {
        "method": request.method,
        "route": getattr(route, "path", request.url.path),
        "path": dict(sorted(request.path_params.items())),
        "query": sorted(request.query_params.multi_items()),
        "if_match": request.headers.get("if-match"),
        "body": canonical,
    }
    text = json.dumps(document, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _without_hook(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a store call of this module with no commit hook (its own commits mark nothing)."""
    token = COMMIT_HOOK.set(None)
    try:
        return func(*args, **kwargs)
    finally:
        COMMIT_HOOK.reset(token)


def _reserve(store: Store, ttl_s: float, **fields: Any) -> keys_store.Outcome:
    for _ in range(3):
        try:
            with store.transaction() as session:
                outcome = keys_store.reserve(session, ttl_s=ttl_s, **fields)
            break
        except keys_store.KeyRace:
            continue  # another request inserted the key first: ask again
    else:  # pragma: no cover - three races in a row
        raise IdempotencyKeyInUse("the Idempotency-Key is being reserved by another request")
    if random.randrange(_PURGE_ONE_IN) == 0:
        try:
            with store.transaction() as session:
                keys_store.purge_expired(session, datetime.now(UTC))
        except Exception:  # noqa: BLE001 - a courtesy; the next reservation tries again
            log.warning("could not purge expired idempotency keys", exc_info=True)
    return outcome


async def idempotency_key(
    request: Request,
    key: Annotated[
        str | None,
        Header(
            alias=HEADER,
            pattern=KEY_PATTERN,
            description="makes the request safe to retry: the same key with the same request "
            "returns the first answer (with `Idempotent-Replayed: true`) and does nothing again; "
            "the same key with another request is a 422. 1 to 255 visible ASCII characters, "
            "e.g. a UUID; kept for a day.",
            examples=["3f2b8c1e-6d4a-4f7e-9b1a-2c5d8e9f0a1b"],
        ),
    ] = None,
) -> None:
    """The dependency behind :data:`Idempotent` (see the module's docstring)."""
    if key is None:
        return
    store: Store = request.app.state.context.store
    ttl_s: float = request.app.state.context.settings.idempotency_ttl
    print_ = fingerprint(request, await request.body())
    route = request.scope.get("route")
    operation = f"{request.method} {getattr(route, 'path', request.url.path)}"
    subject = principal_of(request).subject
    deadline = time.monotonic() + WAIT_S
    while True:
        reserve = functools.partial(
            _reserve,
            store,
            ttl_s,
            subject=subject,
            key=key,
            fingerprint=print_,
            operation=operation,
            now=datetime.now(UTC),
        )
        outcome = await in_thread(request, _without_hook, reserve)
        if outcome.reservation is not None:
            request.scope.setdefault("state", {})[_STATE] = outcome.reservation
            # the handler's commits run in a copy of this context
            COMMIT_HOOK.set(functools.partial(_mark, reservation=outcome.reservation))
            return
        if outcome.decision is Decision.REPLAY:
            assert outcome.answer is not None
            raise _Replay(outcome.answer)
        if outcome.decision is Decision.REUSED:
            raise IdempotencyKeyReused(
                f"Idempotency-Key {key!r} was first sent with another request "
                f"({outcome.operation}, or other parameters or body): use a new key",
                field=HEADER,
            )
        if outcome.decision is Decision.LOST_ANSWER:
            raise IdempotencyKeyInUse(
                f"the request first sent with Idempotency-Key {key!r} ({outcome.operation}) "
                "was applied but its answer was lost: it is not done again; read the "
                "resource to see its effect"
            )
        if time.monotonic() >= deadline:  # Decision.WAIT
            raise IdempotencyKeyInUse(
                f"the request first sent with Idempotency-Key {key!r} is still being "
                "processed: retry later",
                retry_after=1,
            )
        await asyncio.sleep(0.05)


def _mark(session: Any, *, reservation: keys_store.Reservation) -> None:
    keys_store.mark_applied(session, reservation)


#: ``dependencies=[Idempotent]``: the route honours ``Idempotency-Key``
Idempotent = Depends(idempotency_key)


def _finish(store: Store, reservation: keys_store.Reservation, answer: keys_store.Answer) -> None:
    """Keep the answer, or forget the key when the request failed having changed nothing."""
    with store.transaction() as session:
        if answer.status >= 400 and not keys_store.applied(session, reservation):
            keys_store.release(session, reservation)
        elif not keys_store.record_answer(session, reservation, answer):
            log.warning("idempotency key %r was taken over before its answer", reservation.key)


class Recorder:
    """ASGI middleware: keeps the answer of a request that reserved a key, before sending it (so
    a retry arriving right after the answer finds it)."""

    def __init__(self, app: ASGIApp, store: Store, threads: WorkerThreads) -> None:
        self.app, self.store, self.threads = app, store, threads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in ("GET", "HEAD", "OPTIONS")
            or not any(name == _HEADER for name, _ in scope["headers"])
        ):  # nothing can reserve a key: the answer goes out as it is
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        start: Message | None = None
        chunks: list[bytes] = []
        finished = False

        async def capture(message: Message) -> None:
            nonlocal start, finished
            reservation = state.get(_STATE)
            if reservation is None or finished:
                await send(message)
                return
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in start["headers"]
            }
            answer = keys_store.Answer(
                start["status"],
                {k: v for k, v in headers.items() if k in KEPT_HEADERS},
                body.decode("utf-8", "replace"),
            )
            await self.threads.run(_without_hook, _finish, self.store, reservation, answer)
            finished = True
            await send(start)
            await send({"type": "http.response.body", "body": body})

        try:
            await self.app(scope, receive, capture)
        finally:
            reservation = state.get(_STATE)
            if reservation is not None and not finished:  # no answer (an error escaped)
                try:
                    await self.threads.run(
                        _without_hook, _release_unless_applied, self.store, reservation
                    )
                except Exception:  # noqa: BLE001 - the lease frees the key anyway
                    log.warning("could not release idempotency key", exc_info=True)


def _release_unless_applied(store: Store, reservation: keys_store.Reservation) -> None:
    with store.transaction() as session:
        keys_store.release(session, reservation)  # only a pending (never applied) key goes


async def _replay(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _Replay)
    answer = exc.answer
    headers = {k: v for k, v in answer.headers.items() if k != "content-type"}
    headers[REPLAYED_HEADER] = "true"
    return Response(
        content=answer.body.encode("utf-8"),
        status_code=answer.status,
        headers=headers,
        media_type=answer.headers.get("content-type"),
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(_Replay, _replay)
    app.add_middleware(Recorder, store=app.state.context.store, threads=app.state.threads)
