#!/usr/bin/env python3
"""Generate the typed Python client of the REST API (``drover/api_client.py``) from its OpenAPI.

    .venv/bin/python scripts/gen_client.py            # rewrite drover/api_client.py
    .venv/bin/python scripts/gen_client.py --check    # exit 1 if the committed file is stale

The spec is the app's own (``api.app.create_app(...).openapi()``), so the client follows the
server and never the other way round; ``tests/unit/test_api_client.py`` regenerates it and fails
when the committed module differs (a route or a field changed without running this script).

What comes out, all from the spec and nothing else:

- one ``TypedDict`` per component schema (fields the schema requires are required keys, the
  others ``NotRequired``), one ``Literal`` alias per enum, field descriptions as comments;
- one method per operation of :class:`DroverClient`, named by its ``operationId``: path
  parameters positional, the JSON body (``body``) positional, query and header parameters
  keyword-only (``If-Match`` is ``if_match``, ``Idempotency-Key`` ``idempotency_key``); it
  returns the parsed answer typed by the operation's success response (``None`` for 204);
- an error answer raises :class:`ApiError` carrying the problem document (RFC 9457); a node
  that cannot be reached raises :class:`Unreachable`.

No third-party generator: this script is the generator, and it needs only the standard library
(plus ruff, when present, to format its output like the rest of the code).
"""

from __future__ import annotations

import argparse
import keyword
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "drover" / "api_client.py"

_PY_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
_SUCCESS = re.compile(r"^2\d\d$")


def class_name(schema_name: str) -> str:
    """``Page_AlertPublic_`` -> ``PageAlertPublic``; ``Job-Input`` -> ``JobInput``."""
    parts = re.split(r"[^0-9A-Za-z]+", schema_name)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def snake(name: str) -> str:
    """A parameter name as a Python identifier: ``If-Match`` -> ``if_match``."""
    text = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_").lower()
    if not text or text[0].isdigit():
        text = f"p_{text}"
    return f"{text}_" if keyword.iskeyword(text) else text


def _literal(values: list[Any]) -> str:
    return f"Literal[{', '.join(repr(v) for v in values)}]"


def py_type(schema: dict[str, Any]) -> str:
    """The Python annotation of a JSON schema (as the OpenAPI of FastAPI/pydantic writes them)."""
    if not schema:
        return "Any"
    if "$ref" in schema:
        return class_name(schema["$ref"].rsplit("/", 1)[-1])
    if "const" in schema:
        return _literal([schema["const"]])
    if "enum" in schema:
        return _literal(schema["enum"])
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            members: list[str] = []
            for option in schema[combinator]:
                annotation = py_type(option)
                if annotation not in members:
                    members.append(annotation)
            if "None" in members:  # Optional last, as people write it
                members = [m for m in members if m != "None"] + ["None"]
            return " | ".join(members)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return py_type(schema["allOf"][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(py_type({**schema, "type": k}) for k in kind)
    if kind == "array":
        return f"list[{py_type(schema.get('items', {}))}]"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"dict[str, {py_type(extra)}]"
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict) and len(patterns) == 1:
            return f"dict[str, {py_type(next(iter(patterns.values())))}]"
        return "dict[str, Any]"
    return _PY_TYPES.get(str(kind), "Any")


def _comment(text: str, indent: str) -> list[str]:
    words = " ".join(text.split())
    lines: list[str] = []
    line = ""
    for word in words.split(" "):
        if line and len(indent) + 2 + len(line) + 1 + len(word) > 96:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return [f"{indent}#: {chunk}" for chunk in lines]


def _docstring(text: str, indent: str) -> list[str]:
    """A docstring of ``text``: each paragraph refilled to the code's width."""
    body = text.strip().replace("\\", "\\\\").replace('"""', "'''")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip()]
    width = 100 - len(indent)
    lines: list[str] = []
    for paragraph in paragraphs or [""]:
        if lines:
            lines.append("")
        lines += textwrap.wrap(paragraph, width=width, break_on_hyphens=False) or [""]
    if len(lines) == 1 and len(lines[0]) + 6 <= width:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""', *(f"{indent}{line}".rstrip() for line in lines), f'{indent}"""']


def model_source(name: str, schema: dict[str, Any]) -> list[str]:
    cls = class_name(name)
    if "enum" in schema or schema.get("type") != "object" or "properties" not in schema:
        out = [
            f"{cls} = {py_type(schema) if 'enum' in schema else py_type({**schema, 'title': None})}"
        ]
        if schema.get("description"):
            out = _comment(schema["description"], "") + out
        return out
    required = set(schema.get("required", ()))
    fields = []
    for field, prop in schema["properties"].items():
        annotation = py_type(prop)
        if field not in required:
            annotation = f"NotRequired[{annotation}]"
        fields.append((field, annotation, prop.get("description", "")))
    if all(f.isidentifier() and not keyword.iskeyword(f) for f, _, _ in fields):
        out = [f"class {cls}(TypedDict):"]
        out += _docstring(schema.get("description") or schema.get("title") or cls, "    ")
        for field, annotation, description in fields:
            if description:
                out += _comment(description, "    ")
            out.append(f"    {field}: {annotation}")
        return out
    # the functional form evaluates its annotations at once: strings, so order does not matter
    members = ", ".join(f"{field!r}: {annotation!r}" for field, annotation, _ in fields)
    return [f"{cls} = TypedDict({cls!r}, {{{members}}})"]


def _success(operation: dict[str, Any]) -> tuple[list[int], str, bool]:
    """The success statuses, the answer's type, and whether the answer is JSON."""
    statuses: list[int] = []
    types: list[str] = []
    is_json = True
    for status, response in operation.get("responses", {}).items():
        if not _SUCCESS.match(str(status)):
            continue
        statuses.append(int(status))
        content = response.get("content") or {}
        if not content:
            annotation = "None"
        elif "application/json" in content:
            annotation = py_type(content["application/json"].get("schema", {}))
        else:
            is_json = False
            annotation = "str"
        if annotation not in types:
            types.append(annotation)
    return sorted(statuses), " | ".join(types) or "None", is_json


def method_source(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    op_id = operation["operationId"]
    params = operation.get("parameters", [])
    positional: list[str] = []
    keyword_only: list[str] = []
    path_map, query_map, header_map = [], [], []
    for param in params:
        pname = snake(param["name"])
        annotation = py_type(param.get("schema", {}))
        where = param["in"]
        if where == "path":
            positional.append(f"{pname}: {annotation}")
            path_map.append((param["name"], pname))
        elif where in ("query", "header"):
            if param.get("required"):
                keyword_only.append(f"{pname}: {annotation}")
            else:
                if "None" not in annotation.split(" | "):
                    annotation = f"{annotation} | None"
                keyword_only.append(f"{pname}: {annotation} = None")
            (query_map if where == "query" else header_map).append((param["name"], pname))
    body = operation.get("requestBody")
    body_arg = "None"
    if body is not None:
        schema = (body.get("content") or {}).get("application/json", {}).get("schema", {})
        annotation = py_type(schema)
        if body.get("required"):
            positional.append(f"body: {annotation}")
        else:
            positional.append(f"body: {annotation} | None = None")
        body_arg = "body"
    statuses, returns, is_json = _success(operation)
    args = ["self", *positional]
    if keyword_only:
        args += ["*", *keyword_only]
    out = [f"    def {op_id}({', '.join(args)}) -> {returns}:"]
    doc = operation.get("summary", op_id)
    if operation.get("description"):
        doc += "\n\n" + operation["description"].strip()
    doc += f"\n\n``{method.upper()} {path}``"
    out += _docstring(doc, "        ")
    fmt_path = path
    for original, pname in path_map:
        fmt_path = fmt_path.replace("{" + original + "}", "{_segment(" + pname + ")}")
    path_expr = f'f"{fmt_path}"' if path_map else repr(path)
    query = "{" + ", ".join(f"{o!r}: {p}" for o, p in query_map) + "}"
    headers = "{" + ", ".join(f"{o!r}: {p}" for o, p in header_map) + "}"
    call = (
        f"self._call({method.upper()!r}, {path_expr}, query={query}, headers={headers}, "
        f"body={body_arg}, ok={tuple(statuses)!r}, json_answer={is_json!r})"
    )
    if returns == "None":
        out.append(f"        {call}")
    else:
        out.append(f"        return cast({returns!r}, {call})")
    return out


#: the first line of the generated module: the usual "generated, do not edit" marker, which
#: editors, code review and linguist tools recognise
MARKER = "# Code generated by scripts/gen_client.py from the API's OpenAPI; DO NOT EDIT."

HEADER = (
    MARKER
    + '''
"""Typed client of the Drover REST API, generated from the app's OpenAPI: change the API and run
``scripts/gen_client.py``.

    from drover.api_client import DroverClient, ApiError

    with DroverClient("http://127.0.0.1:8000", token="...") as client:
        job = client.create_job(
            {"name": "orders", "entrypoint": "/opt/pipelines/orders.py"},
            idempotency_key="3f2b8c1e-6d4a-4f7e-9b1a-2c5d8e9f0a1b",
        )
        client.start_job(job["name"], if_match=f'"{job["spec_version"]}"')

Every method is one operation of the API, named by its ``operationId``; the models below are the
API's schemas as ``TypedDict`` (plain dicts at run time). An error answer raises
:class:`ApiError` with the problem document; a node that cannot be reached, :class:`Unreachable`.
"""

# ruff: noqa: E501

from __future__ import annotations

import random
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal, NotRequired, TypedDict, cast
from urllib.parse import quote

import httpx

#: the header that names the client (optional: the API asks nothing of a bodiless request)
CLIENT_HEADER = "X-Drover-Client"


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


def _segment(value: object) -> str:
    return quote(str(value), safe="")


class _Base:
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

    def __enter__(self) -> DroverClient:
        return cast(DroverClient, self)

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
        return self._send(
            "GET", target, query=None, headers={}, body=None, ok=(200,), json_answer=True
        )

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any],
        headers: dict[str, Any],
        body: Any,
        ok: tuple[int, ...],
        json_answer: bool,
    ) -> Any:
        return self._send(
            method, f"{self.base_url}{path}", query=query, headers=headers, body=body, ok=ok,
            json_answer=json_answer,
        )

    def _send(
        self,
        method: str,
        url: str,
        *,
        query: dict[str, Any] | None,
        headers: dict[str, Any],
        body: Any,
        ok: tuple[int, ...],
        json_answer: bool,
    ) -> Any:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        response = self.send(method, url, params=params or None, headers=headers, json=body)
        if response.status_code >= 300 and response.status_code not in ok:
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


#: methods that may be sent twice; answers worth another try
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_TRANSIENT = frozenset({429, 502, 503, 504})
'''
)


def generate(spec: dict[str, Any]) -> str:
    out = [HEADER, "", "# -- models " + "-" * 86, ""]
    for name, schema in sorted(spec.get("components", {}).get("schemas", {}).items()):
        out += model_source(name, schema)
        out += ["", ""]
    out += [
        "# -- operations " + "-" * 82,
        "",
        "",
        "class DroverClient(_Base):",
        f'    """The operations of {spec["info"]["title"]} {spec["info"]["version"]}: one method '
        'per operation."""',
    ]
    operations = []
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in ("get", "put", "post", "patch", "delete"):
                operations.append((operation["operationId"], path, method, operation))
    for _, path, method, operation in sorted(operations):
        out.append("")
        out += method_source(path, method, operation)
    return "\n".join(out) + "\n"


def format_source(text: str) -> str:
    """Format like the rest of the code (ruff, from the same environment), when ruff is there."""
    ruff = Path(sys.executable).with_name("ruff")
    command = str(ruff) if ruff.exists() else shutil.which("ruff")
    if command is None:
        return text
    done = subprocess.run(
        [command, "format", "--quiet", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return done.stdout


def spec_of_app() -> dict[str, Any]:
    """The OpenAPI of the app as a node serves it (no store is touched to build it)."""
    sys.path.insert(0, str(ROOT))
    from api.app import create_app
    from api.deps import NodeContext
    from scheduler.config import Settings
    from scheduler.store.db import Store

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), node_id="gen-client")
        store = Store(f"sqlite:///{tmp}/unused.db")
        try:
            return create_app(NodeContext(settings, store)).openapi()
        finally:
            store.dispose()


def render() -> str:
    return format_source(generate(spec_of_app()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if the committed client is stale"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if TARGET.read_text(encoding="utf-8") != text:
            print(
                f"{TARGET.relative_to(ROOT)} is stale: run scripts/gen_client.py", file=sys.stderr
            )
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
