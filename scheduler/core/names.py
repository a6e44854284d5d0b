"""Names of jobs, clusters and groups: letters and digits of any script and ``-_.``, 1–128
characters, not ``.`` or ``..``.

Names are identities; the ownership hash treats them as UTF-8 (``scheduler.core.ownership``). The
rule is exactly ``NAME_PATTERN`` in Python's (Unicode) regular expressions, which the OpenAPI
document publishes: a letter is Unicode category ``L*``, a digit ``N*`` (so ``²`` and ``Ⅻ`` count).
"""

from __future__ import annotations

import re
import unicodedata

from scheduler.core.errors import InvalidInput

MAX_NAME_LENGTH = 128
#: the rule as a regular expression (Python semantics: ``\w`` is a Unicode letter, digit or ``_``)
NAME_PATTERN = rf"^(?!\.\.?$)[\w.-]{{1,{MAX_NAME_LENGTH}}}$"
_NAME = re.compile(NAME_PATTERN)
_PUNCTUATION = frozenset("-_.")


def _allowed(char: str) -> bool:
    return char in _PUNCTUATION or unicodedata.category(char)[0] in "LN"


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid name, or None when it is."""
    if not isinstance(name, str):
        return "must be a string"
    if _NAME.fullmatch(name) is not None:  # the rule below at C speed (the unit tests agree)
        return None
    if not 1 <= len(name) <= MAX_NAME_LENGTH:
        return f"must be 1 to {MAX_NAME_LENGTH} characters long"
    if name in (".", ".."):
        return "must not be '.' or '..'"
    for char in name:
        if not _allowed(char):
            return f"may contain only letters, digits and '-_.' (found {char!r})"
    return None


def validate_name(name: str, what: str = "name") -> str:
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInput(f"{what} {name!r} {problem}")
    return name


def matches_pattern(name: str) -> bool:
    """Whether ``name`` matches ``NAME_PATTERN`` (the unit tests check it agrees with
    ``name_problem`` for every code point)."""
    return _NAME.fullmatch(name) is not None
