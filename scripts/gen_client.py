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
  returns the parsed answer typed by the operation's success response (``None`` for 204). Its
  body is one call of the request helper of ``drover/client_runtime.py`` (hand-written: the
  session, retries, errors), which finds the arguments by the same names;
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# one rule names the arguments here and finds them again at run time
from drover.client_runtime import snake  # noqa: E402

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


def _success(operation: dict[str, Any]) -> tuple[str, bool]:
    """The answer's type on success, and whether the answer is JSON."""
    types: list[str] = []
    is_json = True
    for status, response in operation.get("responses", {}).items():
        if not _SUCCESS.match(str(status)):
            continue
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
    return " | ".join(types) or "None", is_json


def method_source(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    """One method: the operation's parameters as typed arguments, then one call of the
    runtime's request helper with the method's own arguments and the operation's wire names."""
    op_id = operation["operationId"]
    positional: list[str] = []
    keyword_only: list[str] = []
    wire: dict[str, list[str]] = {"query": [], "header": []}
    for param in operation.get("parameters", []):
        pname = snake(param["name"])
        annotation = py_type(param.get("schema", {}))
        where = param["in"]
        if where == "path":
            positional.append(f"{pname}: {annotation}")
        elif where in wire:
            if param.get("required"):
                keyword_only.append(f"{pname}: {annotation}")
            else:
                if "None" not in annotation.split(" | "):
                    annotation = f"{annotation} | None"
                keyword_only.append(f"{pname}: {annotation} = None")
            wire[where].append(param["name"])
    body = operation.get("requestBody")
    if body is not None:
        schema = (body.get("content") or {}).get("application/json", {}).get("schema", {})
        annotation = py_type(schema)
        if body.get("required"):
            positional.append(f"body: {annotation}")
        else:
            positional.append(f"body: {annotation} | None = None")
    returns, is_json = _success(operation)
    args = ["self", *positional]
    if keyword_only:
        args += ["*", *keyword_only]
    out = [f"    def {op_id}({', '.join(args)}) -> {returns}:"]
    doc = operation.get("summary", op_id)
    if operation.get("description"):
        doc += "\n\n" + operation["description"].strip()
    doc += f"\n\n``{method.upper()} {path}``"
    out += _docstring(doc, "        ")
    options = "".join(
        f", {name}={' '.join(names)!r}"
        for name, names in (("query", wire["query"]), ("headers", wire["header"]))
        if names
    )
    if not is_json:
        options += ", text=True"
    call = f"self._op({method.upper()!r}, {path!r}, locals(){options})"
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
``scripts/gen_client.py``. Every method of :class:`DroverClient` is one operation of the API,
named by its ``operationId``; the models are its schemas as ``TypedDict`` (plain dicts at run
time). How to use it, its errors and retries: ``drover/client_runtime.py``.
"""

# ruff: noqa: E501

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, cast

from drover.client_runtime import CLIENT_HEADER as CLIENT_HEADER
from drover.client_runtime import ApiError as ApiError
from drover.client_runtime import ClientBase
from drover.client_runtime import ClientError as ClientError
from drover.client_runtime import Unreachable as Unreachable'''
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
        "class DroverClient(ClientBase):",
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
