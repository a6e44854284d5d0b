"""docker-compose.yml's one-shot steps work: the ``bootstrap`` and ``catalog`` services'
commands run as written (Compose's ``$$`` unescaped) against a real node without Docker, their
paths and URL given by the variables they default (``DROVER_DEPLOYMENT_SECRET_FILE``,
``ADMIN_TOKEN_FILE``, ``DROVER_URL``). The bootstrap writes the deployment secret and the
first admin's token once (0600) and keeps them on a rerun; the catalog step registers the two
clusters and groups with that token, and changes nothing when run again."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.nodes import NodeProcess

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def step(name: str) -> str:
    """The shell script of a one-shot service, as Compose hands it to ``sh -ec``."""
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][name]
    assert service["entrypoint"] == ["sh", "-ec"], service
    return str(service["command"][0]).replace("$$", "$")


def run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-ec", script], env=env, capture_output=True, text=True, timeout=180
    )


def test_the_compose_file_is_valid() -> None:
    done = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "config", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name in ("node-1", "node-2", "node-3"):
        assert "/readyz" in " ".join(services[name]["healthcheck"]["test"]), name
        assert services[name]["environment"]["DROVER_DEPLOYMENT_SECRET_FILE"]
    assert services["catalog"]["depends_on"]["node-1"]["condition"] == "service_healthy"


def test_bootstrap_then_catalog_against_a_real_node(embedded: NodeProcess, tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_")}
    env |= {
        "PATH": f"{BIN}:{env.get('PATH', '')}",
        "DROVER_DATA_DIR": embedded.env["DROVER_DATA_DIR"],  # the store's host: the node's settings
        "DROVER_DEPLOYMENT_SECRET_FILE": str(secrets / "deployment.secret"),
        "ADMIN_TOKEN_FILE": str(secrets / "admin.token"),
        "DROVER_URL": embedded.url,
    }
    first = run(step("bootstrap"), env)
    assert first.returncode == 0, first.stderr
    written = {p.name: p.read_text() for p in secrets.iterdir()}
    assert set(written) == {"deployment.secret", "admin.token"}
    assert len(written["deployment.secret"].strip()) >= 32
    assert written["admin.token"].startswith("drv_")
    for path in secrets.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    again = run(step("bootstrap"), env)
    assert again.returncode == 0, again.stderr
    assert {p.name: p.read_text() for p in secrets.iterdir()} == written  # kept, not remade

    catalog = run(step("catalog"), env)
    assert catalog.returncode == 0, catalog.stdout + catalog.stderr
    headers = {"Authorization": f"Bearer {written['admin.token'].strip()}"}
    clusters = httpx.get(f"{embedded.url}/v1/clusters", headers=headers, timeout=10).json()["data"]
    groups = httpx.get(f"{embedded.url}/v1/groups", headers=headers, timeout=10).json()["data"]
    by_name = {c["name"]: c for c in clusters}
    assert by_name["spark-a"]["rest_url"] == "http://spark-a-master:6066"
    assert by_name["spark-b"]["az"] == "az-b"
    assert {g["name"]: g["failover_cluster"] for g in groups if g["name"].startswith("az-")} == {
        "az-a": "spark-b",
        "az-b": "spark-a",
    }
    versions = {c["name"]: c["version"] for c in clusters}
    rerun = run(step("catalog"), env)
    assert rerun.returncode == 0, rerun.stderr
    after = httpx.get(f"{embedded.url}/v1/clusters", headers=headers, timeout=10).json()["data"]
    assert {c["name"]: c["version"] for c in after} == versions
