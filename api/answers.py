"""Answers serialized once.

A route that returns a pydantic model has FastAPI validate it against the route's
``response_model`` (for a plain ``def`` route, in a hand-over to the thread pool and back) and
then serialize it. The models here are built by the route itself from store records, so that
validation only repeats the model's own construction. :func:`json_answer` serializes the model
straight to the JSON bytes FastAPI would have sent (same serializer, ``by_alias``), with the
headers the route set on its ``Response`` parameter. The route keeps its ``response_model`` for
the OpenAPI document.

A page whose items are already JSON (``api/documents.py``) passes them as ``data``: the page
model is built with an empty ``data`` list (its first field) and the items go in its place.
"""

from __future__ import annotations

from fastapi import Response
from pydantic import BaseModel

#: how a page model with no items begins (its ``data`` field first)
EMPTY_DATA = b'{"data":[]'


def json_answer(
    model: BaseModel,
    response: Response | None = None,
    status_code: int = 200,
    *,
    data: list[bytes] | None = None,
) -> Response:
    """``model`` as a JSON answer with ``status_code`` and the headers set on ``response``;
    ``data``: the JSON of the items of a page ``model`` (whose own ``data`` is empty)."""
    content = model.__pydantic_serializer__.to_json(model, by_alias=True)
    if data is not None:
        if not content.startswith(EMPTY_DATA):
            raise ValueError(f"{type(model).__name__} does not begin with an empty data list")
        content = b'{"data":[' + b",".join(data) + b"]" + content[len(EMPTY_DATA) :]
    return bytes_answer(content, response, status_code)


def bytes_answer(body: bytes, response: Response | None = None, status_code: int = 200) -> Response:
    """JSON already serialized (``api/documents.py``) as an answer, like :func:`json_answer`."""
    answer = Response(content=body, status_code=status_code, media_type="application/json")
    if response is not None:
        answer.headers.raw.extend(response.headers.raw)
    return answer
