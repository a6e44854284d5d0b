"""Headless Chromium for the console's browser tests: Debian's ``chromium`` package driven by
Playwright's Python package (``executable_path``), never a browser that Playwright downloads.

``scripts/services.sh up`` (and ``scripts/services.sh browser``) install ``chromium`` when it is
missing; the fixture here does the same once more when it can (root), and otherwise FAILS, as
every missing service does in this suite (under CI=true nothing is ever skipped).

The flags keep the browser from reaching out: this machine's network refuses Chromium's
background connections (updates, sync, QUIC probes), and an empty user data directory per run
keeps runs apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}


def chromium() -> str:
    """The path of Debian's chromium, installed first if missing (root only); fails otherwise."""
    path = shutil.which("chromium") or CHROMIUM
    if not os.path.exists(path) and os.geteuid() == 0:
        subprocess.run(
            [str(ROOT / "scripts" / "services.sh"), "browser"],
            check=False,
            capture_output=True,
            timeout=600,
        )
        path = shutil.which("chromium") or CHROMIUM
    if not os.path.exists(path):
        pytest.fail(
            f"{CHROMIUM} is missing: run scripts/services.sh browser (as root), or "
            "apt-get install -y --no-install-recommends chromium",
            pytrace=False,
        )
    return path


@contextmanager
def browser_context(**options: Any) -> Iterator[Any]:
    """A Playwright browser context of headless Debian Chromium at 1,280x800 with an empty,
    throw-away profile."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the playwright Python package is missing: scripts/setup.sh installs the dev extras",
            pytrace=False,
        )
    executable = chromium()
    with tempfile.TemporaryDirectory(prefix="drover-chromium-") as profile:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=executable,
                headless=True,
                args=FLAGS,
                viewport=VIEWPORT,
                **options,
            )
            try:
                yield context
            finally:
                context.close()
