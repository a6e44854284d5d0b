"""Smoke tests: each real service the suite relies on is there and behaves as the design says."""

from __future__ import annotations

import secrets
import zlib
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from kazoo.client import KazooClient

from tests.conftest import SparkStandalone, http_get_json

pytestmark = pytest.mark.integration

# ASCII, accented and Chinese job names: ownership in SQL relies on CRC32 agreeing with zlib.
JOB_NAMES = ["orders-enrich", "café-订单"]


def test_mysql_answers_and_is_mariadb_or_mysql(mysql_url: str) -> None:
    engine = sa.create_engine(mysql_url, poolclass=sa.NullPool)
    with engine.connect() as conn:
        version = conn.execute(sa.text("SELECT VERSION()")).scalar_one()
        charset = conn.execute(sa.text("SELECT @@character_set_database")).scalar_one()
    assert isinstance(version, str) and version[0].isdigit()
    assert charset == "utf8mb4"


def test_mysql_crc32_of_a_literal_matches_zlib(mysql_url: str) -> None:
    engine = sa.create_engine(mysql_url, poolclass=sa.NullPool)
    with engine.connect() as conn:
        crc = conn.execute(sa.text("SELECT CRC32('orders-enrich')")).scalar_one()
    assert crc == zlib.crc32(b"orders-enrich")


@pytest.mark.parametrize("name", JOB_NAMES)
def test_mysql_crc32_of_a_utf8mb4_column_matches_zlib(mysql_url: str, name: str) -> None:
    engine = sa.create_engine(mysql_url, poolclass=sa.NullPool)
    table = f"crc_{secrets.token_hex(4)}"
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"CREATE TABLE {table} (name VARCHAR(200) NOT NULL) CHARACTER SET utf8mb4")
        )
        conn.execute(sa.text(f"INSERT INTO {table} (name) VALUES (:name)"), {"name": name})
        stored, crc = conn.execute(sa.text(f"SELECT name, CRC32(name) FROM {table}")).one()
        conn.execute(sa.text(f"DROP TABLE {table}"))
    assert stored == name
    assert crc == zlib.crc32(name.encode("utf-8"))


def test_fresh_mysql_url_makes_separate_databases(
    fresh_mysql_url: Callable[[], str], mysql_url: str
) -> None:
    first, second = fresh_mysql_url(), fresh_mysql_url()
    assert len({first, second, mysql_url}) == 3
    for url in (first, second):
        engine = sa.create_engine(url, poolclass=sa.NullPool)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT DATABASE()")).scalar_one() in url


def test_zookeeper_ephemeral_node_lives_with_its_session(zk_hosts: str) -> None:
    base = f"/drover-test/{secrets.token_hex(6)}"
    client = KazooClient(hosts=zk_hosts, timeout=5.0)
    client.start(timeout=10.0)
    try:
        path = client.create(f"{base}/member", b"node-1", ephemeral=True, makepath=True)
        data, stat = client.get(path)
        assert data == b"node-1"
        assert stat.ephemeralOwner == client.client_id[0]
        client.delete(path)
        assert client.exists(path) is None
    finally:
        client.delete(base, recursive=True)
        client.stop()
        client.close()


def test_spark_master_lists_an_alive_worker(spark_standalone: SparkStandalone) -> None:
    state = spark_standalone.master_state()
    assert state["status"] == "ALIVE"
    assert state["url"] == spark_standalone.master_url
    alive = [w for w in state["workers"] if w["state"] == "ALIVE"]
    assert alive, state["workers"]
    assert sum(w["cores"] for w in alive) >= 2


def test_spark_rest_submission_server_answers(spark_standalone: SparkStandalone) -> None:
    ready = http_get_json(f"{spark_standalone.rest_url}/v1/submissions/readyz")
    assert ready["action"] == "ReadyzResponse"
    assert ready["success"] is True
