"""Fault injection points for tests and drills; inert unless ``DROVER_FAULTS`` names them.

``DROVER_FAULTS=after-submit:/tmp/once`` makes the process that reaches the point
``after-submit`` (the reconciler, right after the cluster accepted a submission and before the
store records it) exit at once with code 97 -- a crash between "submitted" and "recorded". With
``:<path>`` the fault fires once: the first hit creates the file, later hits (the restarted actor,
the restarted node) find it and go on. Points: ``after-submit``; ``replica-mid-batch`` (a
checkpoint copy, right after a state file of a batch the copy does not hold yet, before that
batch's offsets and commit: ``scheduler.loops.replication.sync``).
"""

from __future__ import annotations

import logging
import os

ENV = "DROVER_FAULTS"
EXIT_CODE = 97

log = logging.getLogger("drover.faults")


def hit(point: str) -> None:
    """Crash here if ``DROVER_FAULTS`` names ``point`` (and its once-file does not exist yet)."""
    for item in os.environ.get(ENV, "").split(","):
        name, _, once = item.strip().partition(":")
        if name != point:
            continue
        if once:
            try:
                os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
        log.critical("fault injection: crashing at %s (pid %d)", point, os.getpid())
        logging.shutdown()
        os._exit(EXIT_CODE)
