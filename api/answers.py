"""Answers serialized once.

A route that returns a pydantic model has FastAPI validate it against the route's
``response_model`` (for a plain ``def`` route, in a hand-over to the thread pool and back) and
then serialize it. The models here are built by the route itself from store records, so that
validation only repeats the model's own construction. :func:`json_answer` serializes the model
straight to the JSON bytes FastAPI would have sent (same serializer, ``by_alias``), with the
headers the route set on its ``Response`` parameter. The route keeps its ``response_model`` for
the OpenAPI document.
"""

from __future__ import annotations

from fastapi import Response
from pydantic import BaseModel


def json_answer(
    model: BaseModel, response: Response | None = None, status_code: int = 200
) -> Response:
    """``model`` as a JSON answer with ``status_code`` and the headers set on ``response``."""
    answer = Response(
        content=model.__pydantic_serializer__.to_json(model, by_alias=True),
        status_code=status_code,
        media_type="application/json",
    )
    if response is not None:
        answer.headers.raw.extend(response.headers.raw)
    return answer
