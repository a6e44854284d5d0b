"""Logging setup shared by the node process and its actors."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: int = logging.INFO) -> None:
    logging.basicConfig(level=level, format=FORMAT)
    # alembic reports every schema check at INFO; readiness probes run one each time
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # httpx logs every request at INFO: one line per job and tick against a Spark REST server
    logging.getLogger("httpx").setLevel(logging.WARNING)
