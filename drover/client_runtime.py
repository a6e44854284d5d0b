"""What the generated API client (``drover/api_client.py``) stands on: its errors, the HTTP
session with the node (credential, retries, TLS), and the one request helper every generated
operation calls. Hand-written; ``scripts/gen_client.py`` writes only the models and one short
method per operation on top of it.

    from drover.api_client import DroverClient, ApiError

    with DroverClient("http://127.0.0.1:8000", token="...") as client:
        job = client.create_job(
            {"name": "orders", "entrypoint": "/opt/pipelines/orders.py"},
            idempotency_key="3f2b8c1e-6d4a-4f7e-9b1a-2c5d8e9f0a1b",
        )
        client.start_job(job["name"], if_match=f'"{job["spec_version"]}"')

An error answer raises :class:`ApiError` with the problem document (RFC 9457); a node that
cannot be reached, :class:`Unreachable`.
"""

from __future__ import annotations

import keyword
import random
import re
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx

#: the header that names the client (optional: the API asks nothing of a bodiless request)
CLIENT_HEADER = "X-Drover-Client"

#: methods that may be sent twice; answers worth another try
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_TRANSIENT = frozenset({429, 502, 503, 504})
_PLACEHOLDER = re.compile(r"\{([^}]+)\}")


class ClientError(Exception):
    """Base of the client's errors."""


class Unreachable(ClientError):
    """The node did not answer (connection refused, timeout, protocol error)."""


class ApiError(ClientError):
    """The node answered with an error status; ``problem`` is its RFC 9457 problem document."""

    def __init__(self, status: int, problem: dict[str, Any], response: httpx.Response) -> None:
        self.status = status
        self.problem = problem
        self.response = response
        title = problem.get("title") or response.reason_phrase
        detail = problem.get("detail") or ""
        super().__init__(f"{status} {title}: {detail}".rstrip(": "))

    @property
    def kind(self) -> str:
        """The problem's kind: the last part of its ``type`` (``urn:drover:problem:<kind>``)."""
        return str(self.problem.get("type", "")).rsplit(":", 1)[-1]


def snake(name: str) -> str:
    """A parameter's wire name as the Python identifier of its argument: ``If-Match`` ->
    ``if_match``, ``class`` -> ``class_`` (the generator names arguments by it, and the request
    helper finds them by it)."""
    text = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_").lower()
    if not text or text[0].isdigit():
        text = f"p_{text}"
    return f"{text}_" if keyword.iskeyword(text) else text


class ClientBase:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        client_name: str = "drover-api-client",
        timeout: float = 30.0,
        http: httpx.Client | None = None,
        headers: dict[str, str] | None = None,
        retries: int = 3,
        backoff: float = 0.25,
        max_wait: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``http``: an ``httpx.Client`` to send through (a test's ``TestClient``, a client with
        its own transport or TLS settings); one is made (and closed by :meth:`close`) otherwise.

        Retries: a call that is safe to repeat (``GET``, ``HEAD``, ``PUT``, ``DELETE``, or any
        call with an ``Idempotency-Key``) is sent again up to ``retries`` times when the node
        cannot be reached or answers 429, 502, 503 or 504, after the answer's ``Retry-After``
        seconds when it says (at most ``max_wait``), else after an exponential backoff from
        ``backoff`` seconds with jitter. A 429 is retried whatever the method: the node refused
        it before doing anything."""
        self.base_url = base_url.rstrip("/")
        self.retries, self.backoff, self.max_wait = retries, backoff, max_wait
        self._sleep = sleep
        self._own = http is None
        self._timeout = timeout
        # a node on plain HTTP needs no TLS context (building one reads the CA bundle: ~0.1 s
        # of a command line's start-up); an https URL gets a verifying client of its own
        plain = self.base_url.startswith("http://")
        self._http = http if http is not None else httpx.Client(timeout=timeout, verify=not plain)
        self._tls: httpx.Client | None = None if plain and http is None else self._http
        self._headers = {CLIENT_HEADER: client_name, **(headers or {})}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        #: the last answer (its headers: ``ETag``, ``Location``, ``Idempotent-Replayed``)
        self.last_response: httpx.Response | None = None

    def close(self) -> None:
        if self._own:
            self._http.close()
            if self._tls is not None and self._tls is not self._http:
                self._tls.close()

    def _client_for(self, url: str) -> httpx.Client:
        if not url.startswith("https://"):
            return self._http
        if self._tls is None:
            self._tls = httpx.Client(timeout=self._timeout)
        return self._tls

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def get_url(self, url: str) -> Any:
        """GET a URL the API handed out (a page's ``next`` link), relative or absolute."""
        target = url if "://" in url else f"{self.base_url}{url}"
        return self._send("GET", target, query=None, headers={}, body=None, json_answer=True)

    def _op(
        self,
        method: str,
        path: str,
        arguments: Mapping[str, Any],
        *,
        query: str = "",
        headers: str = "",
        text: bool = False,
    ) -> Any:
        """One operation: ``path`` with its ``{placeholders}`` filled, ``query`` and ``headers``
        (their wire names, space-separated) sent from the ``arguments`` of the same snake names
        (a generated method passes its own), the ``body`` argument as JSON; the answer parsed
        (``text``: the answer is not JSON)."""
        url = self.base_url + _PLACEHOLDER.sub(
            lambda m: quote(str(arguments[snake(m.group(1))]), safe=""), path
        )
        return self._send(
            method,
            url,
            query={name: arguments[snake(name)] for name in query.split()},
            headers={name: arguments[snake(name)] for name in headers.split()},
            body=arguments.get("body"),
            json_answer=not text,
        )

    def _send(
        self,
        method: str,
        url: str,
        *,
        query: dict[str, Any] | None,
        headers: dict[str, Any],
        body: Any,
        json_answer: bool,
    ) -> Any:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        response = self.send(method, url, params=params or None, headers=headers, json=body)
        if response.status_code >= 300:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text[:500]}
            if not isinstance(problem, dict):
                problem = {"detail": str(problem)[:500]}
            raise ApiError(response.status_code, problem, response)
        if not response.content:
            return None
        return response.json() if json_answer else response.text

    def send(
        self,
        method: str,
        url: str,
        *,
        params: Any = None,
        headers: dict[str, Any] | None = None,
        json: Any = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """One request (``url``: absolute, or a path under the base URL) with the client's
        credential, retried as the constructor says; the answer whatever its status.
        Unreachable when the node cannot be reached after the retries."""
        target = url if "://" in url else f"{self.base_url}{url}"
        sent = {**self._headers, **{k: str(v) for k, v in (headers or {}).items() if v is not None}}
        safe = method.upper() in _IDEMPOTENT or any(k.lower() == "idempotency-key" for k in sent)
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        attempt = 0
        while True:
            try:
                response = self._client_for(target).request(
                    method, target, params=params, headers=sent, json=json, **extra
                )
            except httpx.HTTPError as exc:
                if not safe or attempt >= self.retries:
                    raise Unreachable(f"cannot reach {target}: {exc}") from exc
                self._sleep(self._delay(attempt, None))
                attempt += 1
                continue
            self.last_response = response
            status = response.status_code
            retry = status == 429 or (safe and status in _TRANSIENT)
            if not retry or attempt >= self.retries:
                return response
            self._sleep(self._delay(attempt, response.headers.get("Retry-After")))
            attempt += 1

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds before the next try: the answer's ``Retry-After`` (seconds) when it gives
        one, else ``backoff`` doubled per attempt with up to 50 % jitter; never past
        ``max_wait``."""
        if retry_after is not None and retry_after.strip().isdigit():
            return min(float(retry_after.strip()), self.max_wait)
        return min(self.backoff * (2**attempt) * (1 + random.random() / 2), self.max_wait)
