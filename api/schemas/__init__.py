"""The API's request and response documents (pydantic), one module per family of resources."""

from typing import Any

from pydantic import BaseModel


def attributes(model: type[BaseModel], record: object, **given: Any) -> dict[str, Any]:
    """The values of ``model``'s fields: those ``given``, the others read from the ``record``'s
    attributes of the same names (a field the record has no attribute for keeps its default)."""
    read = {
        name: getattr(record, name)
        for name in model.model_fields
        if name not in given and hasattr(record, name)
    }
    return {**read, **given}
