"""One-off HTTP requests of the harness, the tests and the benches: never through a proxy, on
the process's one TLS context (:func:`scheduler.backends.http.tls`). ``httpx.get`` and its
siblings make a TLS context per call, about 30 ms of CPU: a checker that polls two clusters
five times a second would spend a third of a core on that alone."""

from __future__ import annotations

from typing import Any

import httpx

from scheduler.backends.http import one_off


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return one_off(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return one_off("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return one_off("POST", url, **kwargs)


def put(url: str, **kwargs: Any) -> httpx.Response:
    return one_off("PUT", url, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return one_off("DELETE", url, **kwargs)
