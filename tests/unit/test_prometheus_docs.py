"""The example Prometheus configuration and alert rules in docs/prometheus/ are valid and only
name metrics Drover exports (scheduler/core/metrics.py).

With ``promtool`` on PATH (Debian's ``prometheus`` package; ``scripts/test.sh`` installs it)
the files are checked by Prometheus's own validator and the rules' unit tests run; the names
are checked either way. Under ``CI=true`` a missing promtool fails the test.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from scheduler.core.metrics import CATALOG
from tests.conftest import require_tool

DOCS = Path(__file__).resolve().parents[2] / "docs" / "prometheus"
RULES = DOCS / "drover-rules.yml"
#: what an expression may name besides Drover's metrics
FOREIGN = {"up"}
SUFFIXES = ("_bucket", "_sum", "_count")


def _promtool() -> str:
    return require_tool("promtool", "prometheus")


def _exported() -> set[str]:
    names = set()
    for spec in CATALOG:
        names.add(spec.name)
        if spec.kind == "histogram":
            names.update(spec.name + s for s in SUFFIXES)
    return names


def test_rules_name_only_exported_metrics() -> None:
    doc = yaml.safe_load(RULES.read_text())
    exported = _exported()
    records = {r["record"] for g in doc["groups"] for r in g["rules"] if "record" in r}
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    assert len(alerts) >= 10
    for group in doc["groups"]:
        for rule in group["rules"]:
            names = set(re.findall(r"\b(drover_[a-z0-9_]+|up)\b", rule["expr"]))
            unknown = names - exported - FOREIGN - records
            assert not unknown, f"{rule.get('alert') or rule.get('record')}: {unknown}"
            if "alert" in rule:
                assert rule["labels"]["severity"] in {"critical", "warning", "info"}
                assert rule["annotations"]["summary"]


def test_promtool_accepts_the_config_and_the_rules() -> None:
    promtool = _promtool()
    for args in (
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "drover-rules.yml"],
        ["test", "rules", "drover-rules.test.yml"],
    ):
        done = subprocess.run(
            [promtool, *args], cwd=DOCS, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (lower case, spaces to dashes, no
    punctuation)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_alert_links_its_runbook() -> None:
    """Each alert's ``runbook_url`` names a page of docs/runbooks/ (and a heading of it when it
    has an anchor): what the person paged opens first."""
    root = DOCS.parents[1]
    doc = yaml.safe_load(RULES.read_text())
    problems = []
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            url = rule["annotations"].get("runbook_url", "")
            page, _, anchor = url.partition("#")
            if not page.startswith("docs/runbooks/") or not (root / page).is_file():
                problems.append(f"{rule['alert']}: runbook_url {url!r} is no runbook")
                continue
            headings = {
                _slug(line.lstrip("#"))
                for line in (root / page).read_text(encoding="utf-8").splitlines()
                if line.startswith("#")
            }
            if anchor and anchor not in headings:
                problems.append(f"{rule['alert']}: {page} has no heading #{anchor}")
    assert problems == [], "\n".join(problems)
