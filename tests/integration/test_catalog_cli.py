"""``drover clusters``, ``drover groups``, ``drover teams``, ``drover token`` and ``drover login``
against a real node API (uvicorn on a free port)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.app import create_app
from api.deps import NodeContext
from drover.cli.main import app
from harness.nodes import free_port as _free_port
from tests.support.serving import admin_cli_store, serving

pytestmark = pytest.mark.integration


@pytest.fixture
def api_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with admin_cli_store(tmp_path, monkeypatch, "cli-test") as (settings, store, _):
        with serving(create_app(NodeContext(settings, store))) as url:
            yield url


def drover(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_clusters_and_groups_through_the_cli(api_url: str) -> None:
    code, out, err = drover(
        "clusters", "create", "spark-a", "--api", api_url, "--kind", "standalone",
        "--storage-root", "/data/ck/a/", "--master-url", "spark://127.0.0.1:7077",
        "--rest-url", "http://127.0.0.1:6066", "--ui-url", "http://127.0.0.1:8080",
        "--az", "az1", "--max-running-apps", "5", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert '"storage_root": "file:///data/ck/a"' in out
    code, out, err = drover(
        "clusters", "create", "yarn-b", "--api", api_url, "--kind", "spark-submit",
        "--storage-root", "s3a://ck-b/drover", "--master-url", "yarn",
    )  # fmt: skip
    assert code == 0, err

    code, out, err = drover("clusters", "list", "--api", api_url)
    assert code == 0 and "3 cluster(s)" in err  # the footer: stderr
    assert "spark-a" in out and "file:///data/ck/a" in out and "NORMAL" in out

    code, out, err = drover(
        "clusters", "update", "spark-a", "--api", api_url, "--max-cores", "16", "--if-version", "1",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    assert '"max_cores": 16' in out and '"version": 2' in out
    code, _, err = drover("clusters", "update", "spark-a", "--api", api_url, "--if-version", "1")
    assert code != 0 and "nothing to change" in err
    code, _, err = drover(
        "clusters", "update", "spark-a", "--api", api_url, "--az", "x", "--if-version", "1"
    )
    assert code != 0 and err.startswith("drover: 412") and len(err.strip().splitlines()) == 1

    code, out, err = drover(
        "groups", "create", "ads", "--api", api_url, "--primary", "spark-a", "--failover", "yarn-b"
    )
    assert code == 0, err
    code, out, err = drover("groups", "list", "--api", api_url)
    assert "ads" in out and "yarn-b" in out and "2 group(s)" in err
    code, out, _ = drover("groups", "get", "ads", "--api", api_url, "--json")
    assert code == 0 and '"primary_cluster": "spark-a"' in out
    code, out, _ = drover("clusters", "get", "yarn-b", "--api", api_url, "--json")
    assert code == 0 and '"master_url": "yarn"' in out

    code, _, err = drover("groups", "delete", "ads", "--api", api_url, "--if-version", "7")
    assert code != 0 and err.startswith("drover: 412")
    code, out, err = drover("groups", "delete", "ads", "--api", api_url, "--if-version", "1")
    assert code == 0 and out.strip() == "ads: deleted", err
    code, out, err = drover("groups", "list", "--api", api_url)
    assert "ads" not in out and "1 group(s)" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("clusters", "get", "nope"), "404"),
        (("groups", "get", "nope"), "404"),
        (("clusters", "create", "x", "--kind", "standalone", "--storage-root", "/ck/x"), "422"),
        (("clusters", "create", "x", "--kind", "local", "--storage-root", "rel/x"), "422"),
        (("groups", "create", "g", "--primary", "local", "--failover", "local"), "422"),
        (("groups", "create", "default", "--primary", "local"), "409"),
        (("groups", "delete", "default"), "409"),
        (("groups", "delete", "nope"), "404"),
    ],
)
def test_cli_errors_are_one_line_and_exit_non_zero(
    api_url: str, args: tuple[str, ...], message: str
) -> None:
    code, out, err = drover(*args, "--api", api_url)
    assert code != 0 and out == ""
    assert err.startswith(f"drover: {message}") and len(err.strip().splitlines()) == 1


def test_cli_reports_an_unreachable_api_on_one_line() -> None:
    code, _, err = drover("clusters", "list", "--api", f"http://127.0.0.1:{_free_port()}")
    assert code != 0 and err.startswith("drover: cannot reach")


def test_teams_tokens_and_login_through_the_cli(
    api_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    code, _, err = drover("teams", "create", "ads", "--api", api_url)
    assert code == 0, err
    code, out, err = drover("teams", "bind", "ads", "etl-bot", "operator", "--kind", "service",
                            "--api", api_url, "--json")  # fmt: skip
    assert code == 0 and '"etl-bot": "operator"' in out, err
    code, out, err = drover("token", "create", "--identity", "etl-bot", "--api", api_url)
    assert code == 0, err
    bot = out.strip()
    assert bot.startswith("drv_")
    code, out, _ = drover("token", "list", "--api", api_url)
    assert "etl-bot" in out and bot not in out

    # login stores the bot's token (0600) and later commands use it
    monkeypatch.delenv("DROVER_TOKEN")
    code, out, err = drover("login", "--token", bot, "--api", api_url)
    assert code == 0 and "service:etl-bot" in out, err
    stored = tmp_path / "config" / "drover" / "credentials.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    code, out, _ = drover("whoami", "--api", api_url, "--json")
    assert '"ads": "operator"' in out
    code, _, err = drover("clusters", "create", "x", "--api", api_url, "--kind", "local",
                          "--storage-root", "/tmp/x")  # fmt: skip
    assert code != 0 and "403" in err  # an operator does not manage clusters
    code, out, _ = drover("logout")
    assert code == 0 and not stored.exists()
    code, _, err = drover("whoami", "--api", api_url)
    assert code != 0 and "401" in err
