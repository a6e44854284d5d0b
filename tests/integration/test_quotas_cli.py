"""``drover quotas list|show|set|delete`` against a real node API (uvicorn on a free port,
SQLite): tables by default, JSON that parses with ``--json``, failures on stderr with a
non-zero exit."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_catalog_cli import api_url, drover  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def test_quotas_through_the_cli(api_url: str) -> None:  # noqa: F811
    code, out, err = drover(
        "quotas", "set", "ads", "--rate", "5", "--burst", "10", "--api", api_url
    )
    assert code == 0, err
    assert out.strip() == "ads: rate 5/s, burst 10, dedicated group - (version 1)"
    code, out, err = drover(
        "quotas", "set", "bank", "--dedicated-group", "default", "--api", api_url, "--json"
    )
    assert code == 0, err
    assert json.loads(out)["dedicated_group"] == "default" and json.loads(out)["rate"] is None

    code, out, err = drover("quotas", "list", "--api", api_url)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split() == ["BUSINESS", "RATE", "BURST", "TOKENS", "DEDICATED", "GROUP"]
    assert lines[1].split()[:3] == ["ads", "5/s", "10"]
    assert lines[2].split() == ["bank", "-", "1", "-", "default"]
    assert err.strip() == "2 quota(s)"  # the footer: stderr
    code, out, err = drover("quotas", "list", "--api", api_url, "--json")
    assert code == 0 and json.loads(out)["complete"] is True
    assert [q["business"] for q in json.loads(out)["data"]] == ["ads", "bank"]

    code, out, err = drover("quotas", "show", "ads", "--api", api_url, "--json")
    assert code == 0 and json.loads(out)["version"] == 1
    code, out, err = drover(
        "quotas", "set", "ads", "--rate", "2", "--api", api_url, "--if-version", "7"
    )
    assert code != 0 and "412" in err and out == ""
    code, out, err = drover("quotas", "set", "ads", "--rate", "-1", "--api", api_url)
    assert code != 0 and "422" in err
    code, out, err = drover("quotas", "delete", "ads", "--api", api_url, "--json")
    assert code == 0 and json.loads(out) == {"business": "ads", "deleted": True}
    code, out, err = drover("quotas", "show", "ads", "--api", api_url)
    assert code != 0 and "404" in err and len(err.strip().splitlines()) == 1
