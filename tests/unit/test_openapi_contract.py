"""The published OpenAPI is a contract the UI and other services build on: walks
``app.openapi()`` and the app's routes and fails on any operation or field that does not say what
it is, so a new route or field without these fails here:

- every operation: an explicit, unique ``operationId`` in snake_case ``verb_noun`` form (a
  known verb first), a summary and a description;
- every error response an ``application/problem+json`` problem document (the one ``Problem``
  schema of ``components``), and the statuses a route can answer declared (the probes declare
  only what they answer): 401 and 403 on every authenticated route, 503 everywhere (store
  unavailable), 404 on routes naming a resource in their path, 412 with ``If-Match``, 415 and
  422 with a request body, 409 and 422 with ``Idempotency-Key``, 429 with ``Retry-After``
  throttling;
- every parameter and every field of every schema a description and an example;
- bearer security on every protected operation, none on the probes; an example of every request
  body; declared tags; ``info.contact``, ``servers``; ``Retry-After`` on 429 and 503;
- validation in the schema, not only in code: every string a client sends is bounded (a
  ``maxLength``, a ``pattern``, an ``enum`` or a ``format``), every number bounded, every list
  and map a ``maxItems``/``maxProperties``.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from jsonschema import Draft202012Validator

from api.app import create_app
from api.deps import NodeContext
from api.problems import PROBLEM_MEDIA_TYPE
from api.security.rules import RULES, Target
from scheduler.config import Settings
from scheduler.store.db import Store

#: the first word of every operationId
VERBS = frozenset(
    {
        "get",
        "list",
        "create",
        "update",
        "delete",
        "start",
        "stop",
        "restart",
        "upgrade",
        "rollback",
        "diff",
        "cancel",
        "mark",
        "clear",
        "set",
        "put",
        "remove",
        "revoke",
        "check",
        "test",
        "drain",
        "undrain",
        "plan",
        "execute",
        "retry",
        "pause",
        "resume",
    }
)
OPERATION_ID = re.compile(r"^[a-z]+(_[a-z0-9]+)+$")
METHODS = ("get", "put", "post", "patch", "delete")


@pytest.fixture(scope="module")
def app() -> Iterator[FastAPI]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/unused.db")  # building the app touches no table
        yield create_app(NodeContext(Settings(data_dir=Path(tmp), node_id="contract"), store))
        store.dispose()


@pytest.fixture(scope="module")
def spec(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


def api_routes(routes: Any) -> Iterator[APIRoute]:
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from api_routes(included.routes)
        elif isinstance(route, APIRoute) and route.include_in_schema:
            yield route


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield method.upper(), path, operation


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def has_example(thing: dict[str, Any]) -> bool:
    schema = thing.get("schema", {})
    return any(k in thing or k in schema for k in ("example", "examples")) or "const" in schema


def test_every_route_sets_its_operation_id(app: FastAPI) -> None:
    missing = [
        f"{sorted(r.methods)} {r.path}" for r in api_routes(app.routes) if not r.operation_id
    ]
    assert missing == [], f"routes without an explicit operation_id=: {missing}"


def test_operation_ids_summaries_descriptions(spec: dict[str, Any]) -> None:
    seen: dict[str, str] = {}
    problems = []
    for method, path, op in operations(spec):
        where = f"{method} {path}"
        op_id = op.get("operationId", "")
        if not OPERATION_ID.match(op_id) or op_id.split("_")[0] not in VERBS:
            problems.append(f"{where}: operationId {op_id!r} is not snake_case verb_noun")
        if op_id in seen:
            problems.append(f"{where}: operationId {op_id!r} also names {seen[op_id]}")
        seen[op_id] = where
        for member in ("summary", "description"):
            if not str(op.get(member, "")).strip():
                problems.append(f"{where}: no {member}")
    assert problems == [], "\n".join(problems)


def _required_statuses(method: str, path: str, op: dict[str, Any]) -> set[str]:
    rule = RULES.get((method, path))
    if path in ("/healthz", "/readyz", "/metrics"):
        return set()  # the probes declare what they answer, nothing else
    statuses = {"503"}
    if rule is not None and rule.target is not Target.PUBLIC:
        statuses |= {"401", "403"}
    headers = {p["name"].lower() for p in op.get("parameters", []) if p["in"] == "header"}
    if "{" in path:
        statuses.add("404")
    if "if-match" in headers:
        statuses.add("412")
    if "requestBody" in op:
        statuses |= {"415", "422"}
    if op.get("parameters"):
        statuses.add("422")
    if "idempotency-key" in headers:
        statuses |= {"409", "422"}
    return statuses


def test_error_responses_are_declared_problem_documents(spec: dict[str, Any]) -> None:
    problems = []
    for method, path, op in operations(spec):
        where = f"{method} {path}"
        responses = op.get("responses", {})
        missing = _required_statuses(method, path, op) - set(responses)
        if missing:
            problems.append(f"{where}: undeclared error statuses {sorted(missing)}")
        for status, response in responses.items():
            if not str(status).startswith(("4", "5")):
                continue
            content = response.get("content", {})
            if list(content) != [PROBLEM_MEDIA_TYPE]:
                problems.append(f"{where} {status}: content {list(content)}, not problem+json")
            elif resolve(spec, content[PROBLEM_MEDIA_TYPE].get("schema", {})).get("required") != [
                "type",
                "title",
                "status",
            ]:
                problems.append(f"{where} {status}: not the problem document schema")
            if not response.get("description"):
                problems.append(f"{where} {status}: no description")
        if not any(str(s).startswith("2") for s in responses):
            problems.append(f"{where}: no success response")
    assert problems == [], "\n".join(problems)


def test_every_parameter_is_described_with_an_example(spec: dict[str, Any]) -> None:
    problems = []
    for method, path, op in operations(spec):
        for param in op.get("parameters", []):
            where = f"{method} {path} {param['in']} {param['name']}"
            if not (param.get("description") or param.get("schema", {}).get("description")):
                problems.append(f"{where}: no description")
            if not has_example(param):
                problems.append(f"{where}: no example")
    assert problems == [], "\n".join(problems)


def _fields(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, schema in spec["components"]["schemas"].items():
        for field, prop in schema.get("properties", {}).items():
            yield name, field, prop


def _is_reference(prop: dict[str, Any]) -> bool:
    """A field that is another schema (maybe nullable): that schema's fields carry examples."""
    options = prop.get("anyOf", prop.get("allOf", [prop]))
    refs = [o for o in options if "$ref" in o]
    return bool(refs) and all("$ref" in o or o.get("type") == "null" for o in options)


def test_every_field_is_described_with_an_example(spec: dict[str, Any]) -> None:
    problems = []
    for name, field, prop in _fields(spec):
        if not prop.get("description"):
            problems.append(f"{name}.{field}: no description")
        if not ({"example", "examples", "const"} & set(prop)) and not _is_reference(prop):
            problems.append(f"{name}.{field}: no example")
    assert problems == [], f"{len(problems)} fields:\n" + "\n".join(problems)


def _invalid_examples(spec: dict[str, Any], where: str, schema: dict[str, Any]) -> list[str]:
    examples = schema.get("examples", [])
    if not isinstance(examples, list):
        return []
    plain = {k: v for k, v in schema.items() if k != "examples"}
    validator = Draft202012Validator({**plain, "components": spec["components"]})
    return [
        f"{where}: example {example!r:.60} is invalid: {error.message:.120}"
        for example in examples
        for error in validator.iter_errors(example)
    ]


def test_examples_are_valid(spec: dict[str, Any]) -> None:
    """An example a client copies is a value the server takes (schemathesis sends them too)."""
    problems = []
    for name, field, prop in _fields(spec):
        problems += _invalid_examples(spec, f"{name}.{field}", prop)
    for method, path, op in operations(spec):
        for param in op.get("parameters", []):
            where = f"{method} {path} {param['in']} {param['name']}"
            problems += _invalid_examples(spec, where, param.get("schema", {}))
    assert problems == [], "\n".join(problems)


def _request_schemas(spec: dict[str, Any]) -> set[str]:
    """Names of the component schemas a client sends (request bodies, and what they use)."""
    names: set[str] = set()

    def visit(schema: Any) -> None:
        if isinstance(schema, dict):
            if "$ref" in schema:
                name = schema["$ref"].rsplit("/", 1)[-1]
                if name not in names:
                    names.add(name)
                    visit(spec["components"]["schemas"][name])
            for value in schema.values():
                visit(value)
        elif isinstance(schema, list):
            for value in schema:
                visit(value)

    for _, _, op in operations(spec):
        visit(op.get("requestBody", {}))
    return names


def _merge(outer: dict[str, Any], inner: dict[str, Any]) -> dict[str, Any]:
    """Both schemas at once (JSON Schema applies both: their keywords add up)."""
    merged = dict(outer)
    for key, value in inner.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _unbounded(schema: dict[str, Any]) -> list[str]:
    """What a client-sent value's schema leaves unbounded."""
    if "$ref" in schema or "enum" in schema or "const" in schema:
        return []
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:  # the wrapper's own keywords apply to every option
            outer = {k: v for k, v in schema.items() if k != combinator}
            return [u for o in schema[combinator] for u in _unbounded(_merge(outer, o))]
    kind = schema.get("type")
    if kind == "string" and not ({"maxLength", "pattern", "format"} & set(schema)):
        return ["string without maxLength/pattern/format"]
    if kind in ("integer", "number") and not (
        {"maximum", "exclusiveMaximum"} & set(schema)
        and {"minimum", "exclusiveMinimum"} & set(schema)
    ):
        return [f"{kind} without minimum and maximum"]
    if kind == "array":
        found = [] if "maxItems" in schema else ["array without maxItems"]
        return found + _unbounded(schema.get("items", {}))
    if kind == "null":
        return []
    if kind == "object" and "properties" not in schema:
        found = [] if "maxProperties" in schema else ["map without maxProperties"]
        extra = schema.get("additionalProperties")
        return found + (_unbounded(extra) if isinstance(extra, dict) else [])
    return []


def test_validation_rules_are_in_the_schema(spec: dict[str, Any]) -> None:
    problems = []
    for name in sorted(_request_schemas(spec)):
        for field, prop in spec["components"]["schemas"][name].get("properties", {}).items():
            if prop.get("readOnly"):
                continue
            problems += [f"{name}.{field}: {why}" for why in _unbounded(prop)]
    for method, path, op in operations(spec):
        for param in op.get("parameters", []):
            where = f"{method} {path} {param['in']} {param['name']}"
            problems += [f"{where}: {why}" for why in _unbounded(param.get("schema", {}))]
    assert problems == [], f"{len(problems)} unbounded:\n" + "\n".join(problems)


# -- what clients and generators rely on beyond the routes (api/openapi.py) ------------------

PROBES = ("/healthz", "/readyz", "/metrics")


def test_protected_operations_declare_bearer_security_and_probes_none(
    spec: dict[str, Any],
) -> None:
    schemes = spec["components"]["securitySchemes"]
    assert schemes["apiToken"] == {**schemes["apiToken"], "type": "http", "scheme": "bearer"}
    assert schemes["jwt"]["bearerFormat"] == "JWT"
    problems = []
    for method, path, op in operations(spec):
        names = {name for requirement in op.get("security", [{}]) for name in requirement}
        rule = RULES.get((method, path))
        if path in PROBES or (rule is not None and rule.target is Target.PUBLIC):
            if op.get("security") != []:
                problems.append(f"{method} {path}: a public route must declare security: []")
        elif path.startswith("/v1/internal/"):
            if names != {"nodeSecret"}:
                problems.append(f"{method} {path}: internal, but security {names}")
        elif not {"apiToken", "jwt"} <= names:
            problems.append(f"{method} {path}: protected, but security {names}")
    assert problems == [], "\n".join(problems)


def test_one_problem_schema_is_referenced_by_every_error_and_probes_say_only_theirs(
    spec: dict[str, Any],
) -> None:
    assert spec["components"]["schemas"]["Problem"]["required"] == ["type", "title", "status"]
    for method, path, op in operations(spec):
        for status, response in op["responses"].items():
            if str(status)[0] in "45":
                schema = response["content"][PROBLEM_MEDIA_TYPE]["schema"]
                assert schema == {"$ref": "#/components/schemas/Problem"}, (method, path, status)
    declared = {p: set(spec["paths"][p]["get"]["responses"]) for p in PROBES}
    assert declared == {"/healthz": {"200"}, "/readyz": {"200", "503"}, "/metrics": {"200"}}


def test_every_request_body_has_a_valid_example(spec: dict[str, Any]) -> None:
    problems = []
    for method, path, op in operations(spec):
        if "requestBody" not in op:
            continue
        media = op["requestBody"]["content"]["application/json"]
        if "example" not in media:
            problems.append(f"{method} {path}: request body without an example")
            continue
        validator = Draft202012Validator({**media["schema"], "components": spec["components"]})
        problems += [
            f"{method} {path}: example invalid: {error.message:.160}"
            for error in validator.iter_errors(media["example"])
        ]
    assert problems == [], "\n".join(problems)


def test_tags_contact_servers_and_retry_after(spec: dict[str, Any]) -> None:
    declared = {t["name"]: t.get("description", "") for t in spec["tags"]}
    assert all(declared.values()), declared
    used = {tag for _, _, op in operations(spec) for tag in op.get("tags", ())}
    assert used <= set(declared), used - set(declared)
    assert spec["info"]["contact"]["name"] and spec["servers"][0]["url"] == "/"
    for method, path, op in operations(spec):
        for status, response in op["responses"].items():
            if str(status) == "429":
                assert response["headers"]["Retry-After"]["required"], (method, path)
            if str(status) == "503":
                assert "Retry-After" in response["headers"], (method, path)


def test_the_document_is_small_enough_to_fetch_often(spec: dict[str, Any]) -> None:
    """The problem document is referenced, not copied into every answer: ~0.4 MB, not 1.1."""
    import json

    assert len(json.dumps(spec)) < 600_000
