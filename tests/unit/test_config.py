"""Node settings: defaults, DROVER_* environment, DROVER_CONFIG TOML file, validation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scheduler.config import Settings, load_settings, parse_groups
from scheduler.core.errors import InvalidInput


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No DROVER_* variable from the caller's shell; run from an empty directory."""
    for name in list(os.environ):
        if name.startswith("DROVER_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_defaults(clean_env: Path) -> None:
    settings = load_settings()
    assert settings.environment == "development"
    assert (settings.api_host, settings.api_port) == ("127.0.0.1", 8000)
    assert settings.resolved_api_url == "http://127.0.0.1:8000"
    assert settings.data_dir == Path("var")
    expected_db = clean_env.resolve() / "var" / "drover.db"
    assert settings.resolved_database_url == f"sqlite:///{expected_db}"
    assert settings.groups == "" and settings.group_roles == {}
    assert settings.zk_hosts == ""
    assert settings.node_id  # hostname-pid


def test_sqlite_url_follows_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    assert (
        settings.resolved_database_url == f"sqlite:///{tmp_path.resolve() / 'data' / 'drover.db'}"
    )
    assert settings.runs_dir == (tmp_path / "data" / "runs").resolve()
    assert settings.checkpoints_dir == (tmp_path / "data" / "checkpoints").resolve()


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {
        "DROVER_NODE_ID": "node-7",
        "DROVER_DATABASE_URL": "mysql+pymysql://u:p@db:3306/drover",
        "DROVER_API_HOST": "127.0.0.2",
        "DROVER_API_PORT": "9100",
        "DROVER_ZK_HOSTS": "zk1:2181,zk2:2181",
        "DROVER_ZK_NAMESPACE": "/drover-test",
        "DROVER_ZK_SESSION_TIMEOUT": "4.5",
        "DROVER_GROUPS": "g1:active,g2:backup",
        "DROVER_AZ": "az-2",
        "DROVER_CLOUD": "gcp",
        "DROVER_DATA_DIR": str(tmp_path / "d"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.node_id == "node-7"
    assert settings.resolved_database_url == "mysql+pymysql://u:p@db:3306/drover"
    assert (settings.api_host, settings.api_port) == ("127.0.0.2", 9100)
    assert settings.resolved_api_url == "http://127.0.0.2:9100"
    assert settings.zk_hosts == "zk1:2181,zk2:2181"
    assert settings.zk_namespace == "/drover-test"
    assert settings.zk_session_timeout == 4.5
    assert settings.group_roles == {"g1": "active", "g2": "backup"}
    assert (settings.az, settings.cloud) == ("az-2", "gcp")
    assert settings.data_dir == tmp_path / "d"


def test_constructor_arguments_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DROVER_API_PORT", "9100")
    assert load_settings(api_port=9200).api_port == 9200


def test_unrelated_drover_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DROVER_TEST_MARIADB_URL", "mysql://x")
    assert load_settings().api_port == 8000


@pytest.mark.parametrize(
    ("spec", "roles"),
    [
        ("", {}),
        ("g1", {"g1": "active"}),
        ("g1:active,g2:backup", {"g1": "active", "g2": "backup"}),
        (" g1 , g2:backup ,, ", {"g1": "active", "g2": "backup"}),
        ("g1,g2,g3:backup", {"g1": "active", "g2": "active", "g3": "backup"}),
    ],
)
def test_parse_groups(spec: str, roles: dict[str, str]) -> None:
    assert parse_groups(spec) == roles


@pytest.mark.parametrize("spec", ["g1:leader", "g1:ACTIVE", ":backup", "g1:active:extra"])
def test_parse_groups_refuses_bad_entries(spec: str) -> None:
    with pytest.raises(ValueError, match="bad group entry"):
        parse_groups(spec)


def test_bad_groups_in_environment_is_invalid_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DROVER_GROUPS", "g1:active,g2:bogus")
    with pytest.raises(InvalidInput) as info:
        load_settings()
    message = info.value.message
    assert "DROVER_GROUPS" in message and "g2:bogus" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DROVER_API_PORT", "not-a-port"),
        ("DROVER_API_PORT", "70000"),
        ("DROVER_ZK_SESSION_TIMEOUT", "0"),
        ("DROVER_ENVIRONMENT", "staging"),
        ("DROVER_NODE_ID", ""),
    ],
)
def test_validation_errors_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidInput) as info:
        load_settings()
    message = info.value.message
    assert message.startswith(f"invalid configuration {variable}:")
    assert "\n" not in message
    assert info.value.__cause__ is not None


def test_production_refuses_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DROVER_ENVIRONMENT", "production")
    monkeypatch.setenv("DROVER_DATABASE_URL", "sqlite:///var/drover.db")
    with pytest.raises(InvalidInput) as info:
        load_settings()
    assert "DROVER_DATABASE_URL" in info.value.message
    assert "\n" not in info.value.message


def test_production_accepts_mysql(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DROVER_ENVIRONMENT", "production")
    monkeypatch.setenv("DROVER_DATABASE_URL", "mysql+pymysql://u:p@db/drover")
    monkeypatch.setenv("DROVER_DEPLOYMENT_SECRET", "a-real-secret-of-at-least-32-characters")
    assert load_settings().resolved_database_url == "mysql+pymysql://u:p@db/drover"


def test_toml_file_from_drover_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "drover.toml"
    config.write_text(
        'node_id = "from-file"\napi_port = 9001\ngroups = "g1:backup"\nzk_session_timeout = 3.5\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("DROVER_CONFIG", str(config))
    settings = load_settings()
    assert settings.node_id == "from-file"
    assert settings.api_port == 9001
    assert settings.group_roles == {"g1": "backup"}
    assert settings.zk_session_timeout == 3.5
    # the environment wins over the file
    monkeypatch.setenv("DROVER_API_PORT", "9002")
    assert load_settings().api_port == 9002


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("api_prot = 9001\n", "DROVER_API_PROT"),  # an unknown key, named as its variable
        ("api_port = = 1\n", None),  # not TOML
    ],
    ids=["unknown-key", "malformed"],
)
def test_a_config_file_it_cannot_take_is_invalid_input(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, match: str | None
) -> None:
    config = tmp_path / "drover.toml"
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("DROVER_CONFIG", str(config))
    with pytest.raises(InvalidInput, match=match):
        load_settings()


def test_settings_are_frozen() -> None:
    settings = load_settings()
    with pytest.raises(ValueError):
        settings.api_port = 1  # type: ignore[misc]
    assert settings.api_port == 8000


# -- regressions -------------------------------------------------------------------------------


def test_production_refuses_the_default_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    # no DROVER_DATABASE_URL: the default is SQLite, which production must refuse too
    monkeypatch.setenv("DROVER_ENVIRONMENT", "production")
    with pytest.raises(InvalidInput):
        load_settings()


def test_missing_config_file_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DROVER_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(InvalidInput):
        load_settings()
