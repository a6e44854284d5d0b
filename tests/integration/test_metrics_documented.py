"""The metrics ``docs/observability.md`` documents are the ones a real node serves at
``/metrics``, no more, no fewer: a node of the embedded default with ZooKeeper (membership's
figures), one job started on its local cluster (a fake ``spark-submit``) so the reconcile loop,
the cluster monitor and the API have something to count, scraped once every family has shown.

Families that exist only once something happened (a stall, an alert, a replica) are still
declared with their help and type by the node, so they are scraped too."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.nodes import NodeProcess, embedded_node

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
#: what prometheus_client's process collector adds (documented as ``process_*``)
PROCESS = re.compile(r"^process_")


def documented() -> set[str]:
    table = DOC.read_text(encoding="utf-8").split("### The metrics", 1)[1].split("\n## ", 1)[0]
    return {
        name
        for line in table.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`(drover_[a-z0-9_]+)`", line.split("|")[1])
    }


def scraped(text: str) -> set[str]:
    """Every family a scrape declares (``# TYPE`` lines: the exposed names, ``_total`` on
    counters), without prometheus_client's own ``process_*``."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            if kind == "counter" and not name.endswith("_total"):
                name += "_total"
            if not PROCESS.match(name):
                names.add(name)
    return names


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, zk_hosts: str) -> Iterator[NodeProcess]:
    started = embedded_node(
        tmp_path_factory.mktemp("metrics"),
        DROVER_ZK_HOSTS=zk_hosts,
        DROVER_ZK_NAMESPACE=f"/metrics-{uuid.uuid4().hex[:12]}",
        DROVER_METRICS_INTERVAL="1",
        DROVER_METRICS_STORE_TTL="1",
    )
    yield started
    started.stop()


def test_documented_metric_names_are_the_scraped_ones(node: NodeProcess) -> None:
    pipeline = str(Path(node.env["DROVER_DATA_DIR"]) / "artifacts" / "pipeline.py")
    node.post("/v1/jobs", {"name": "scraped", "entrypoint": pipeline, "desired_state": "RUNNING"})
    docs = documented()
    assert len(docs) >= 40, sorted(docs)

    deadline = time.monotonic() + 60  # until every documented family showed, or the deadline
    while True:
        text = httpx.get(f"{node.url}/metrics", timeout=5).text
        if docs <= scraped(text) or time.monotonic() > deadline:
            break
        time.sleep(1)
    served = scraped(text)
    assert sorted(docs - served) == [], "documented, not served"
    assert sorted(served - docs) == [], "served, not documented"
