"""One Drover node: the API plus the node's actors, in one OS process (``drover node run``)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

from scheduler.config import Settings
from scheduler.store.bootstrap import LOCAL_CLUSTER, ensure_defaults
from scheduler.store.db import Store

log = logging.getLogger("drover.node")

#: the environment variables of a node's settings that hold secrets: read once into the
#: settings, then removed from the node's environment so that no process it starts (Ray's
#: workers, a driver, anything they start) inherits them (``forget_secrets``)
SECRET_VARIABLES = (
    "DROVER_DEPLOYMENT_SECRET",
    "DROVER_DATABASE_URL",
    "DROVER_ZK_AUTH",
    "DROVER_TOKEN",
)


def forget_secrets(settings: Settings, environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Read the settings' secrets (environment or ``*_FILE``) and remove their variables from
    ``environ``; the names removed. The settings keep the values: every part of the node gets
    them from the settings object, never from the environment."""
    for _ in (
        settings.resolved_deployment_secret,
        settings.resolved_database_url,
        settings.resolved_zk_auth,
    ):
        pass
    return [name for name in SECRET_VARIABLES if environ.pop(name, None) is not None]


def private_data_dir(settings: Settings) -> None:
    """Make the node's files its own: everything it creates from now on is private (umask 077:
    store, run logs, records, copies); the data directory 0700 and a SQLite store (with its
    journal files) 0600.

    With ``DROVER_DRIVER_USER`` the drivers run as other users and must pass through the data
    directory to their run directories and checkpoints: the data directory, ``runs``,
    ``cluster-runs`` and the local cluster's checkpoint root are then 0711 -- passable, never
    listable -- and every file in them stays 0600."""
    os.umask(0o077)
    data = settings.data_dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    passable = bool(settings.driver_user)
    data.chmod(0o711 if passable else 0o700)
    if passable:
        for directory in (
            settings.runs_dir,
            data / "cluster-runs",
            settings.checkpoints_dir,
            settings.checkpoints_dir / LOCAL_CLUSTER,
        ):
            directory.mkdir(parents=True, exist_ok=True)
            directory.chmod(0o711)
    url = settings.resolved_database_url
    if url.startswith("sqlite:///"):
        database = Path(url.removeprefix("sqlite:///"))
        for path in database.parent.glob(f"{database.name}*"):
            if path.is_file() and not path.is_symlink():
                path.chmod(0o600)


#: seconds a pooled connection of the API's store may sit idle before it is pinged on checkout
API_PING_AFTER_IDLE_S = 1.0


def api_store(settings: Settings) -> Store:
    """The API's store: a connection per API thread (plus the progress sink's writer), kept
    open; a connection is pinged before use only after a second idle (MySQL: not a round trip
    more per request). The API has two sets of threads of ``api_threads`` each (its own for the
    hot routes and the security edge, ``api/threads.py``; anyio's for the other routes): when
    both are full at once, the connections beyond the pool's are opened for one use (the
    engine's overflow, which has room for both)."""
    return Store(
        settings.resolved_database_url,
        pool_size=settings.api_threads + 2,
        ping_after_idle=API_PING_AFTER_IDLE_S,
    )


#: how long a thread may hold the GIL while another waits for it. The API's event loop thread
#: is busy under load; the threads it hands store work to (a batch of creations, a job read)
#: wait for the GIL after each database round trip, by default up to 5 ms each time, and a
#: batch of creations makes seven. Meanwhile the requests queued behind that batch wait too,
#: and the loop runs out of work: under a creation burst on MariaDB the API process used 85-88 %
#: of its CPU at 5 ms and 91 % at 0.5 ms (bench/api.py)
GIL_SWITCH_INTERVAL_S = 0.0005


def settle_heap() -> None:
    """Take what start-up made out of the garbage collector's full passes.

    Ray, SQLAlchemy, pydantic and the app leave a few hundred thousand long-lived objects. A
    full collection walks every tracked object; a busy API triggers one every few seconds, and
    with these in the heap each took 80-130 ms on the 2-core test machine (``gc.callbacks``
    under ``bench/api.py``'s list load), a pause every request in flight waits out: most of the
    list's p99. Frozen, they are skipped (they live as long as the node anyway): the same
    collections took 5-8 ms. What requests make is collected as before."""
    import gc

    gc.collect()
    gc.freeze()


def ready_to_serve() -> None:
    """Leave the process as the node serves from: start-up's heap out of the collector's full
    passes, the GIL handed between threads every ``GIL_SWITCH_INTERVAL_S`` (``run_node`` calls
    it last before serving; ``bench/api_inprocess.py`` too, so its figures are the node's)."""
    settle_heap()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def run_node(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM. Refuses to start on an out-of-date schema (SchemaOutOfDate)."""
    import uvicorn

    from api.app import create_app
    from api.deps import NodeContext
    from scheduler.actors import NodeRuntime
    from scheduler.backends.registry import ClusterProbe

    forgotten = forget_secrets(settings)
    if forgotten:
        log.info("secrets read and removed from the environment: %s", ", ".join(forgotten))
    private_data_dir(settings)
    store = api_store(settings)
    store.check_schema()
    ensure_defaults(store, settings)
    runtime = NodeRuntime(settings)
    log.info("node %s starting its actors", settings.node_id)
    try:
        runtime.start()
    except BaseException:
        runtime.stop()
        store.dispose()
        raise
    probe = ClusterProbe(settings)
    try:
        app = create_app(
            NodeContext(
                settings,
                store,
                nudge=runtime.nudge,
                nudge_local=runtime.nudge_local,
                readiness=runtime.readiness,
                views=runtime.views,
                status=runtime.status,
                actor_metrics=runtime.actor_metrics,
                set_draining=runtime.set_draining,
                reachable=probe.reachable,
            )
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=settings.api_host,
                port=settings.api_port,
                log_level=settings.log_level.lower(),
                log_config=None,  # uvicorn's records go through the node's logging
                access_log=False,
            )
        )
        log.info("node %s serving on %s", settings.node_id, settings.resolved_api_url)
        ready_to_serve()
        try:
            server.run()
        finally:
            app.state.progress.close()  # the last progress reports
    finally:
        log.info("node %s draining", settings.node_id)
        runtime.stop()
        probe.close()
        store.dispose()
