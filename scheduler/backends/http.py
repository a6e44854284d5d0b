"""HTTP for Drover's clients: the one TLS context of the process, and the answers of a
cluster's REST API as every backend reads them (no answer, a 5xx or a garbled body is
ClusterUnreachable, chained, never a guess)."""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx

from scheduler.core.errors import ClusterUnreachable


@functools.cache
def tls() -> ssl.SSLContext:
    """The process's one TLS context for HTTP clients: the CA bundle httpx verifies with by
    default. Making a context parses the whole bundle, about 30 ms of CPU, more than a request
    on loopback costs (``httpx.get`` makes one per call), so every client of a process shares
    this one. ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` are not read, as for any client that does
    not trust the environment."""
    return httpx.create_ssl_context(trust_env=False)


def one_off(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request with no client kept for it: never through a proxy, on :func:`tls`."""
    return httpx.request(method, url, verify=tls(), trust_env=False, **kwargs)


def client(timeout_s: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """The HTTP client of one backend: never through a proxy, ``timeout_s`` per request (at most
    2 s of it to connect); ``transport``: a test's stand-in for the network."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 2.0)),
        verify=tls(),
        trust_env=False,
        transport=transport,
    )


def request(
    client: httpx.Client, method: str, url: str, what: str, **kwargs: Any
) -> httpx.Response:
    """One request; ClusterUnreachable on no answer or a 5xx (a 4xx is the caller's to read)."""
    try:
        response = client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise ClusterUnreachable(f"{what}: no answer from {url}: {exc!r}") from exc
    if response.status_code >= 500:
        raise ClusterUnreachable(
            f"{what}: {url} answered {response.status_code}: {response.text[:200]}"
        )
    return response


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The answer's JSON object; ClusterUnreachable if it is not one."""
    try:
        body = response.json()
    except ValueError as exc:
        raise ClusterUnreachable(
            f"{what}: garbled answer ({response.status_code}): {response.text[:200]!r}"
        ) from exc
    if not isinstance(body, dict):
        raise ClusterUnreachable(f"{what}: unexpected answer {body!r:.200}")
    return body
