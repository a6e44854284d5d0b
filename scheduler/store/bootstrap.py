"""What exists from a node's first start: the ``local`` cluster and the ``default`` group."""

from __future__ import annotations

from scheduler.config import Settings
from scheduler.core.errors import StoreError
from scheduler.core.states import ClusterKind
from scheduler.decisions import storage
from scheduler.store import catalog as catalog_store
from scheduler.store.db import Store

LOCAL_CLUSTER = "local"
DEFAULT_GROUP = "default"


def ensure_defaults(store: Store, settings: Settings) -> None:
    """Create the local cluster and the default group if missing (idempotent; never overwrites).

    The local cluster's storage root is ``<data dir>/checkpoints/local`` as a ``file://`` URI.
    """
    root = storage.normalise_root(str(settings.checkpoints_dir / LOCAL_CLUSTER))
    for attempt in (1, 2):
        try:
            with store.transaction() as session:
                catalog_store.ensure_cluster(
                    session,
                    LOCAL_CLUSTER,
                    kind=ClusterKind.LOCAL.value,
                    master_url=settings.spark_local_master,
                    az=settings.az,
                    cloud=settings.cloud,
                    storage_root=root,
                )
                catalog_store.ensure_group(session, DEFAULT_GROUP, primary_cluster=LOCAL_CLUSTER)
            return
        except StoreError:
            # several nodes starting at once race to insert the same rows: the loser's second
            # pass finds them
            if attempt == 2:
                raise
