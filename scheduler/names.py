"""Names of jobs, clusters and groups: Unicode letters/digits and ``-_.``, 1–128 characters.

Names are identities; the ownership hash treats them as UTF-8 (``scheduler.ownership``).
"""

from __future__ import annotations

import unicodedata

from scheduler.errors import InvalidInput

MAX_NAME_LENGTH = 128
_PUNCTUATION = frozenset("-_.")


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid name, or None when it is."""
    if not isinstance(name, str):
        return "must be a string"
    if not 1 <= len(name) <= MAX_NAME_LENGTH:
        return f"must be 1 to {MAX_NAME_LENGTH} characters long"
    if name in (".", ".."):
        return "must not be '.' or '..'"
    for char in name:
        if char in _PUNCTUATION:
            continue
        category = unicodedata.category(char)
        if not (category.startswith("L") or category == "Nd"):
            return f"may contain only letters, digits and '-_.' (found {char!r})"
    return None


def validate_name(name: str, what: str = "name") -> str:
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInput(f"{what} {name!r} {problem}")
    return name
