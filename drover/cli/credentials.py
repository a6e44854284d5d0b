"""The CLI's credential: ``DROVER_TOKEN``, or the token ``drover login`` stored for the user.

The file is ``$XDG_CONFIG_HOME/drover/credentials.json`` (default ``~/.config/...``), created
with mode 0600 in a 0700 directory, and refused when others can read it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from scheduler.core.errors import InvalidInput


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "drover" / "credentials.json"


def save(token: str, api: str, path: Path | None = None) -> Path:
    path = path or config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"api": api, "token": token}, out)
        out.write("\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def load(path: Path | None = None) -> dict[str, str]:
    path = path or config_path()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return {}
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidInput(f"{path} is readable by others: chmod 600 it (or drover login again)")
    data = json.loads(path.read_text(encoding="utf-8"))
    return {k: str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def remove(path: Path | None = None) -> bool:
    path = path or config_path()
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


def token() -> str | None:
    """``DROVER_TOKEN`` wins over the stored login."""
    return os.environ.get("DROVER_TOKEN") or load().get("token") or None
