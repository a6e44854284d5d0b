"""The committed typed client (drover/api_client.py) is exactly what scripts/gen_client.py makes
from the app's OpenAPI today: a route, parameter or field changed without regenerating it fails
here, so the client cannot drift from the server."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

from drover import api_client

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_client", ROOT / "scripts" / "gen_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_client", module)
    spec.loader.exec_module(module)
    return module


def test_the_committed_client_is_the_generated_one() -> None:
    gen = generator()
    fresh = gen.render()
    committed = (ROOT / "drover" / "api_client.py").read_text(encoding="utf-8")
    assert committed == fresh, (
        "drover/api_client.py differs from what the OpenAPI generates: run "
        "`.venv/bin/python scripts/gen_client.py` and commit the result"
    )


def test_the_client_says_it_is_generated_on_its_first_line() -> None:
    first = (ROOT / "drover" / "api_client.py").read_text(encoding="utf-8").splitlines()[0]
    assert first == generator().MARKER
    assert first.startswith("# Code generated ") and first.endswith("DO NOT EDIT.")


def test_every_operation_is_a_method_with_its_parameters() -> None:
    spec = generator().spec_of_app()
    seen = set()
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            op_id = operation["operationId"]
            seen.add(op_id)
            func = getattr(api_client.DroverClient, op_id)
            params = inspect.signature(func).parameters
            for param in operation.get("parameters", []):
                assert generator().snake(param["name"]) in params, (op_id, param["name"])
            assert ("body" in params) == ("requestBody" in operation), op_id
            assert f"``{method.upper()} {path}``" in (func.__doc__ or ""), op_id
    public = {
        name
        for name, value in vars(api_client.DroverClient).items()
        if callable(value) and not name.startswith("_")
    }
    assert public == seen  # nothing left over from a route that is gone


def test_names_and_types() -> None:
    gen = generator()
    assert gen.class_name("Page_AlertPublic_") == "PageAlertPublic"
    assert gen.snake("If-Match") == "if_match" and gen.snake("class") == "class_"
    assert gen.py_type({"anyOf": [{"type": "null"}, {"$ref": "#/x/JobState"}]}) == "JobState | None"
    assert gen.py_type({"type": "array", "items": {"type": "integer"}}) == "list[int]"
    assert gen.py_type({"type": "object", "additionalProperties": {"type": "string"}}) == (
        "dict[str, str]"
    )
    assert gen.py_type({"enum": ["a", "b"]}) == "Literal['a', 'b']"
    model = "\n".join(
        gen.model_source(
            "X",
            {
                "type": "object",
                "required": ["a"],
                "properties": {"a": {"type": "string", "description": "the a"}, "b": {}},
            },
        )
    )
    assert "class X(TypedDict):" in model and "#: the a" in model
    assert "a: str" in model and "b: NotRequired[Any]" in model
