"""Fault injection points for tests and drills; inert unless ``DROVER_FAULTS`` names them.

``DROVER_FAULTS=after-submit:/tmp/once`` makes the process that reaches the point
``after-submit`` (the reconciler, right after the cluster accepted a submission and before the
store records it) exit at once with code 97 -- a crash between "submitted" and "recorded". With
``:<path>`` the fault fires once: the first hit creates the file, later hits (the restarted actor,
the restarted node) find it and go on. Points: ``after-submit``; ``replica-mid-batch`` (a
checkpoint copy, right after a state file of a batch the copy does not hold yet, before that
batch's offsets and commit: ``scheduler.loops.replication.sync``).

*Holds* keep a piece of work where it is for as long as a test wants, without blocking the
process: with ``DROVER_FAULT_HOLDS=<dir>``, :func:`held` is true while ``<dir>/<point>`` or
``<dir>/<point>@<key>`` exists (a test creates and removes the files), and the code at the point
leaves that work for a later round. Points: ``failover-draining@<job>`` and
``failover-fencing@<job>`` (the operations executor does not advance a failover item stored in
that step) and ``failover-checkpoint@<job>`` (the CHECKPOINT step is stored, its copy is not
made) -- so a test can kill or freeze the executing node while an item is in a step of its
choice.
"""

from __future__ import annotations

import logging
import os

ENV = "DROVER_FAULTS"
HOLDS_ENV = "DROVER_FAULT_HOLDS"
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


def held(point: str, key: str = "") -> bool:
    """Whether ``DROVER_FAULT_HOLDS`` holds a file for ``point`` (or ``point@key``) now."""
    folder = os.environ.get(HOLDS_ENV, "")
    if not folder:
        return False
    names = [point] + ([f"{point}@{key}"] if key else [])
    if any(os.path.exists(os.path.join(folder, name)) for name in names):
        log.warning("fault injection: %s held (pid %d)", names[-1], os.getpid())
        return True
    return False
