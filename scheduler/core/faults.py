"""Fault injection points for tests and drills; inert unless ``DROVER_FAULTS`` names them.

``DROVER_FAULTS=after-submit:/tmp/once`` makes the process that reaches the point
``after-submit`` (the reconciler, right after the cluster accepted a submission and before the
store records it) exit at once with code 97 -- a crash between "submitted" and "recorded". With
``:<path>`` the fault fires once: the first hit creates the file, later hits (the restarted actor,
the restarted node) find it and go on. Points: ``after-submit``; ``replica-mid-batch`` (a
checkpoint copy, right after a state file of a batch the copy does not hold yet, before that
batch's offsets and commit: ``scheduler.loops.replication.sync``).

*Holds* stop a process at a point for as long as a test wants, without killing it: with
``DROVER_FAULT_HOLDS=<dir>``, :func:`hold` blocks while ``<dir>/<point>`` or
``<dir>/<point>@<key>`` exists (a test creates and removes the files; at most
:data:`HOLD_LIMIT_S`). Points: ``failover-draining@<job>`` and ``failover-fencing@<job>`` (the
operations executor, before it decides a failover item stored in that step) and
``failover-checkpoint@<job>`` (after the CHECKPOINT step is stored, before its copy) -- so a test
can kill or freeze the executing node while an item is in a step of its choice.
"""

from __future__ import annotations

import logging
import os
import time

ENV = "DROVER_FAULTS"
HOLDS_ENV = "DROVER_FAULT_HOLDS"
EXIT_CODE = 97
#: the longest a hold blocks (a test that forgot its file does not hang a node for ever)
HOLD_LIMIT_S = 600.0

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


def hold(point: str, key: str = "") -> float:
    """Block while ``DROVER_FAULT_HOLDS`` holds a file for ``point`` (or ``point@key``); returns
    the seconds held (0.0 at once when no hold is configured)."""
    folder = os.environ.get(HOLDS_ENV, "")
    if not folder:
        return 0.0
    names = [point] + ([f"{point}@{key}"] if key else [])
    paths = [os.path.join(folder, name) for name in names]
    started = time.monotonic()
    logged = False
    while any(os.path.exists(p) for p in paths) and time.monotonic() - started < HOLD_LIMIT_S:
        if not logged:
            log.warning("fault injection: held at %s (pid %d)", names[-1], os.getpid())
            logged = True
        time.sleep(0.1)
    return time.monotonic() - started
