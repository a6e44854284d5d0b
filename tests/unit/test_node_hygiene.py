"""What a node keeps to itself: drivers of local clusters never run as its user in production,
its secrets leave its environment once read, and its files are its own."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from drover.node import SECRET_VARIABLES, forget_secrets, private_data_dir
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.errors import ClusterError
from scheduler.core.records import ClusterRecord
from tests.support.fakes import cluster as fake_cluster

SECRET = "s" * 40
MYSQL = "mysql+pymysql://drover:pw@127.0.0.1:3306/drover"


def cluster(kind: str, master: str = "") -> ClusterRecord:
    """A cluster of ``kind`` at ``master`` (no REST or UI address)."""
    return replace(fake_cluster(f"c-{kind}"), kind=kind, master_url=master, rest_url="", ui_url="")


@pytest.mark.parametrize(("kind", "master"), [("local", ""), ("spark-submit", "yarn")])
def test_production_never_runs_drivers_as_the_node(
    tmp_path: Path, kind: str, master: str, caplog: pytest.LogCaptureFixture
) -> None:
    production = Settings(
        environment="production",
        database_url=MYSQL,
        deployment_secret=SECRET,
        data_dir=tmp_path,
        spark_home=tmp_path,
    )
    with pytest.raises(ClusterError, match="DROVER_DRIVER_USER"):
        BackendRegistry(production).for_cluster(cluster(kind, master))
    with_user = production.model_copy(update={"driver_user": "drover-{team}"})
    backend = BackendRegistry(with_user).for_cluster(cluster(kind, master))
    assert backend.driver_user == "drover-{team}"  # type: ignore[attr-defined]
    development = BackendRegistry(Settings(data_dir=tmp_path, spark_home=tmp_path))
    with caplog.at_level("WARNING"):
        assert development.for_cluster(cluster(kind, master)).driver_user == ""  # type: ignore[attr-defined]
    assert "DROVER_DRIVER_USER is not set" in caplog.text


def test_secrets_leave_the_environment_once_read(tmp_path: Path) -> None:
    secret_file = tmp_path / "zk"
    secret_file.write_text("drover:zk-password\n")
    environ = {
        "DROVER_DEPLOYMENT_SECRET": SECRET,
        "DROVER_DATABASE_URL": MYSQL,
        "DROVER_ZK_AUTH": "drover:zk-password",
        "DROVER_API_PORT": "8000",
        "PATH": "/usr/bin",
    }
    settings = Settings(
        deployment_secret=SECRET, database_url=MYSQL, zk_auth_file=secret_file, data_dir=tmp_path
    )
    removed = forget_secrets(settings, environ)
    assert sorted(removed) == ["DROVER_DATABASE_URL", "DROVER_DEPLOYMENT_SECRET", "DROVER_ZK_AUTH"]
    assert environ == {"DROVER_API_PORT": "8000", "PATH": "/usr/bin"}
    assert set(removed) <= set(SECRET_VARIABLES)
    # the settings still have them (read before the environment forgot them)
    assert settings.resolved_deployment_secret == SECRET
    assert settings.resolved_database_url == MYSQL
    assert settings.resolved_zk_auth == "drover:zk-password"


@pytest.fixture
def umask() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask")
def test_the_nodes_files_are_its_own(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "drover.db").write_text("")
    (data / "drover.db-wal").write_text("")
    (data / "drover.db").chmod(0o644)
    private_data_dir(Settings(data_dir=data))
    assert mode(data) == 0o700
    assert mode(data / "drover.db") == 0o600 and mode(data / "drover.db-wal") == 0o600
    (data / "new").write_text("made after")
    assert mode(data / "new") == 0o600  # the node's umask is 077 from now on

    # drivers running as other users pass through the data directory, never list it
    private_data_dir(Settings(data_dir=data, driver_user="drover-{team}"))
    assert mode(data) == 0o711
    for made in (data / "runs", data / "checkpoints", data / "checkpoints" / "local"):
        assert mode(made) == 0o711, made
