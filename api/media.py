"""Which request bodies are JSON (pure): ``Content-Type`` ``application/json`` or
``application/<anything>+json``, any parameters (``; charset=utf-8``), any case.

The security edge (a mutation without a JSON body needs the explicit-client header) and the
request checks (a route taking a body refuses any other media type with a 415) ask the same
question, so they share this answer.
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=64)  # clients send a handful of spellings, over and over
def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    kind, slash, subtype = media.partition("/")
    if kind != "application" or not slash or "/" in subtype:
        return False
    return subtype == "json" or (subtype.endswith("+json") and len(subtype) > len("+json"))
