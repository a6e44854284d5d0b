"""The console's static files, read as files: what the Content-Security-Policy and the "nothing
from the internet" rule need of them, every module import resolving, and each module parsing
(``node --check``, when Node.js is on the machine; the browser tests load them all anyway)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from api.console import STATIC_DIR
from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(STATIC_DIR.rglob("*.js"))
#: the only absolute URL a file may hold: the SVG namespace (an identifier, never fetched)
ALLOWED_URLS = {"http://www.w3.org/2000/svg"}


def test_there_is_a_console() -> None:
    assert (STATIC_DIR / "index.html").is_file()
    assert (STATIC_DIR / "js" / "app.js") in SCRIPTS
    assert len(SCRIPTS) >= 10


def test_index_has_no_inline_code_or_style() -> None:
    html = (STATIC_DIR / "index.html").read_text()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'src="' in tag and 'type="module"' in tag, tag
    assert re.search(r"<script\b[^>]*>\s*[^<\s]", html) is None, "inline script"
    assert re.search(r"\sstyle=", html) is None and "<style" not in html
    assert re.search(r"\son[a-z]+=", html) is None, "inline event handler"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.relative_to(STATIC_DIR).as_posix())
def test_scripts_build_the_page_safely(path: Path) -> None:
    source = path.read_text()
    # text goes in as text (dom.js), code is never made from strings (CSP: no eval)
    for banned in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setAttribute("style"',
        "localStorage",
    ):
        assert banned not in source, f"{banned} in {path.name}"
    # relative imports resolve to files of the console
    for target in re.findall(r'from\s+"(\.[^"]+)"', source):
        assert (path.parent / target).resolve().is_file(), f"{path.name} imports {target}"


def test_nothing_is_fetched_from_elsewhere() -> None:
    for path in STATIC_DIR.rglob("*"):
        if path.is_file():
            text = path.read_text()
            urls = set(re.findall(r"https?://[^\s\"')]+", text))
            assert urls <= ALLOWED_URLS, f"{path.name}: {urls - ALLOWED_URLS}"
            assert "@import" not in text


def test_the_files_ship_in_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["api"]
    package = STATIC_DIR.parent.parent  # api/
    shipped = {p for pattern in patterns for p in package.glob(pattern) if p.is_file()}
    every = {p for p in STATIC_DIR.rglob("*") if p.is_file()}
    assert every <= shipped, sorted(str(p) for p in every - shipped)


def test_every_module_parses() -> None:
    node = require_tool("node", "nodejs")
    for path in SCRIPTS:
        checked = subprocess.run(
            [node, "--experimental-default-type=module", "--check", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert checked.returncode == 0, f"{path.name}: {checked.stderr}"
