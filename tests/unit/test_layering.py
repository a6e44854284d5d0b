"""The import contract (``[tool.importlinter]`` in pyproject.toml, run by ``make lint`` and
scripts/test.sh) holds for the tree, and it fails on each thing it forbids: a copy of the tree
with one import added -- a circle (inside a function), a decision importing a loop, the
scheduler importing the API, the API importing drover -- fails the lint, and says why."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: what the contract reads: its configuration, its own contract type, the packages it covers
COPIED = ("pyproject.toml", "scripts/import_contracts.py") + tuple(
    ("scheduler", "api", "drover", "bench", "chaos", "harness", "tests")
)


def copy_tree(into: Path) -> Path:
    for name in COPIED:
        source, target = ROOT / name, into / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` as ``make lint`` runs it, on ``tree`` (its packages come first on the
    path: the copy is analysed, not the checkout)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_make_lint_and_the_test_script_run_the_import_contract() -> None:
    lint = subprocess.run(
        ["make", "-n", "lint"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert "lint-imports" in lint.stdout
    assert "lint-imports" in (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")


def test_the_tree_keeps_the_contract(tmp_path: Path) -> None:
    result = lint_imports(copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _add_circle(tree: Path) -> None:
    # records imports states at its top; states importing records back, even inside a
    # function, closes a circle (neither module leaves its layer)
    assert "from scheduler.core.states import" in (tree / "scheduler/core/records.py").read_text()
    with (tree / "scheduler/core/states.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _circle() -> object:\n    from scheduler.core import records\n\n")
        f.write("    return records\n")


def _add_module(path: str, body: str):  # type: ignore[no-untyped-def]
    # a new module nothing imports: the import it makes is the only thing that changes
    def add(tree: Path) -> None:
        (tree / path).write_text(body, encoding="utf-8")

    return add


BREAKS = {
    "circle": (
        _add_circle,
        "Import circle of 2 modules:\nscheduler.core.records, scheduler.core.states",
    ),
    "decision-imports-a-loop": (
        _add_module("scheduler/decisions/upward.py", "from scheduler.loops import quiet\n"),
        "scheduler.decisions is not allowed to import scheduler.loops",
    ),
    "scheduler-imports-the-api": (
        _add_module("scheduler/core/leak.py", "import api.problems\n"),
        "scheduler.core.leak -> api.problems",
    ),
    "api-imports-drover": (
        _add_module("api/leak.py", "from drover.cli import output\n"),
        "api.leak -> drover.cli.output",
    ),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_the_lint_fails_on_what_the_contract_forbids(tmp_path: Path, name: str) -> None:
    add, says = BREAKS[name]
    tree = copy_tree(tmp_path)
    add(tree)
    result = lint_imports(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 broken" in result.stdout
    assert says in result.stdout, result.stdout
