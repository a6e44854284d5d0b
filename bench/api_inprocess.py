"""The API's own CPU per request, in process: no HTTP server, no actors, no load generator.

A light companion of ``bench/api.py`` for finding where a request's time goes (profilers) and
for comparing changes while the machine is busy: the node's ASGI app (``api.app.create_app``
over a store with 200 seeded jobs and a platform admin's token) and the bare app of
``bench/api.py`` are called directly with ASGI messages, ``--concurrency`` requests at a time in
one event loop (so the thread-pool hand-offs of the real server are paid here too). Printed:
CPU microseconds per request of each app and the ratio (bare / node: what ``bench/api.py``'s
ratio tends to when the HTTP layer costs both the same).

    .venv/bin/python -m bench.api_inprocess [--store URL] [--requests 2000] [--only get]
    .venv/bin/py-spy record -o profile.svg -- .venv/bin/python -m bench.api_inprocess --only get
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.api import ENDPOINTS, PAGE, SEED_JOBS, bare_app, job_body

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
#: the apps' lifespan tasks, running until the process ends
_LIFESPANS: set[asyncio.Task[None]] = set()


async def call(
    app: ASGIApp, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, bytes]:
    """One request straight into ``app``: (status, body)."""
    target, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": target,
        "raw_path": target.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


async def lifespan(app: ASGIApp) -> None:
    """Run the app's startup (the node's thread limit) and leave it running."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()
    await queue.put({"type": "lifespan.startup"})

    async def send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup"):
            started.set()

    task = asyncio.get_running_loop().create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, queue.get, send)
    )
    _LIFESPANS.add(task)  # kept: a task nobody holds is collected, and its app shut down
    await started.wait()


def requests_of(
    kind: str, prefix: str, names: list[str]
) -> Callable[[int], tuple[str, str, bytes]]:
    def make(n: int) -> tuple[str, str, bytes]:
        if kind == "get":
            return "GET", "/v1/jobs/" + names[n % len(names)], b""
        if kind == "list":
            return "GET", f"/v1/jobs?limit={PAGE}", b""
        return "POST", "/v1/jobs", json.dumps(job_body(f"{prefix}-{n}")).encode()

    return make


async def drive(
    app: ASGIApp,
    make: Callable[[int], tuple[str, str, bytes]],
    headers: dict[str, str],
    *,
    requests: int,
    concurrency: int,
    expected: int,
) -> float:
    """CPU seconds of this process per request over ``requests`` requests."""
    counter = iter(range(requests))

    async def client() -> None:
        for n in counter:
            method, path, body = make(n)
            hdrs = dict(headers)
            if body:
                hdrs["content-type"] = "application/json"
                hdrs["content-length"] = str(len(body))
            status, answer = await call(app, method, path, hdrs, body)
            if status != expected:
                raise RuntimeError(f"{method} {path}: {status} {answer[:300]!r}")

    cpu = time.process_time()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return (time.process_time() - cpu) / requests


async def main_async(args: argparse.Namespace) -> None:
    from api.app import create_app
    from api.deps import NodeContext
    from drover.node import api_store, ready_to_serve
    from scheduler.config import Settings
    from scheduler.store.bootstrap import ensure_defaults
    from tests.support.auth import admin_token

    workdir = Path(tempfile.mkdtemp(prefix="drover-apicpu-"))
    url = args.store or f"sqlite:///{workdir / 'drover.db'}"
    settings = Settings(
        data_dir=workdir / "data",
        node_id="cpu-node",
        artifact_roots="/opt/pipelines/",
        database_url=url,
    )
    store = api_store(settings)  # the node's, as the node makes it
    store.upgrade()
    ensure_defaults(store, settings)
    token = admin_token(store)
    app: ASGIApp = create_app(NodeContext(settings, store))  # type: ignore[assignment]
    await lifespan(app)
    headers = {"host": "127.0.0.1:8000", "authorization": f"Bearer {token}"}
    names = [f"seed-{i:05d}" for i in range(SEED_JOBS)]
    for name in names:
        body = json.dumps(job_body(name)).encode()
        status, answer = await call(
            app,
            "POST",
            "/v1/jobs",
            {**headers, "content-type": "application/json", "content-length": str(len(body))},
            body,
        )
        assert status == 201, answer
    bodies = {
        "job": json.loads((await call(app, "GET", f"/v1/jobs/{names[0]}", headers))[1]),
        "page": json.loads((await call(app, "GET", f"/v1/jobs?limit={PAGE}", headers))[1]),
    }
    bare: ASGIApp = bare_app(bodies, "/v1")  # type: ignore[assignment]
    ready_to_serve()  # the process as the node serves from (both apps live in it)
    kinds = [k for k in ENDPOINTS if not args.only or k in args.only.split(",")]
    print(f"in process, concurrency {args.concurrency}: CPU microseconds per request")
    for kind in kinds:
        expected = 201 if kind == "create" else 200
        figures = {}
        for side, target, hdrs in (("bare", bare, {"host": "x"}), ("node", app, headers)):
            if args.skip_bare and side == "bare":
                figures[side] = float("nan")
                continue
            make = requests_of(kind, f"cpu-{side}-{os.getpid()}-{time.monotonic_ns()}", names)
            await drive(
                target, make, hdrs, requests=200, concurrency=args.concurrency, expected=expected
            )  # warm-up
            make = requests_of(kind, f"cpu-{side}-{os.getpid()}-{time.monotonic_ns()}", names)
            figures[side] = await drive(
                target,
                make,
                hdrs,
                requests=args.requests,
                concurrency=args.concurrency,
                expected=expected,
            )
        ratio = figures["bare"] / figures["node"]
        print(
            f"  {kind:<7} bare {figures['bare'] * 1e6:7.0f}  node {figures['node'] * 1e6:7.0f}"
            f"  ratio {ratio:5.2f}"
        )
    for path in args.path or ():

        async def probe(p: str = path) -> None:
            make = lambda n: ("GET", p, b"")  # noqa: E731
            await drive(
                app, make, headers, requests=200, concurrency=args.concurrency, expected=200
            )
            cpu = await drive(
                app,
                make,
                headers,
                requests=args.requests,
                concurrency=args.concurrency,
                expected=200,
            )
            print(f"  GET {p}: node {cpu * 1e6:7.0f}")

        await probe()
    store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="a database URL (default: a fresh SQLite file)")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--only", help="get,list,create")
    parser.add_argument("--skip-bare", action="store_true")
    parser.add_argument("--path", action="append", help="also time GET of this path (node)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
