"""Which Content-Type values are JSON bodies (api/media.py)."""

from __future__ import annotations

import pytest

from api.media import is_json


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        " application/json ;charset=UTF-8",
        "application/problem+json",
        "application/merge-patch+json; charset=utf-8",
    ],
)
def test_json_media_types(content_type: str) -> None:
    assert is_json(content_type)


@pytest.mark.parametrize(
    "content_type",
    [
        "",
        "application",
        "application/",
        "application/+json",
        "application/jsonx",
        "application/x-json",
        "application/json/extra",
        "text/json",
        "text/plain; charset=utf-8",
        "multipart/form-data; boundary=x",
        "json",
    ],
)
def test_other_media_types(content_type: str) -> None:
    assert not is_json(content_type)
