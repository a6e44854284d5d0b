"""Unprivileged Unix users for drivers, made by the tests that need them (idempotent).

Drivers of local and spark-submit clusters run as ``DROVER_DRIVER_USER`` (a template with
``{team}``: one user per team). The tests make those users with ``useradd --system
--no-create-home`` the first time and leave them: creating an existing user is a no-op, so
several test processes may ask at once. They need root, like a node that switches users.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: the template the tests configure, and the teams they use
TEMPLATE = "drover-t-{team}"


def ensure_user(name: str) -> pwd.struct_passwd:
    """The user ``name``, created (system user, no home, no login shell) when missing."""
    assert os.geteuid() == 0, "switching drivers to another user needs a node running as root"
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    done = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        return pwd.getpwnam(name)  # made now, or by a concurrent test process
    except KeyError:
        raise AssertionError(f"useradd {name} failed: {done.stderr.strip()}") from None


def team_user(team: str) -> pwd.struct_passwd:
    return ensure_user(TEMPLATE.replace("{team}", team))


@contextmanager
def open_directory(prefix: str = "drover-open-") -> Iterator[Path]:
    """A directory other users may traverse (not list), for what drivers must reach: pytest's
    own temporary directories are private to root."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
