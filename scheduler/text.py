"""What a free-text field may contain (pure): no control characters, no lone surrogates.

Job arguments, Spark properties, labels, entry points and URLs end up in process arguments,
environment variables, file paths, HTTP bodies and database columns. A NUL byte cannot be passed
to ``exec`` (the submission would fail on every tick, "embedded null byte"), a newline or an
escape sequence forges log lines and terminal output, and a lone UTF-16 surrogate (``"\\ud800"``
is valid JSON) cannot be encoded as UTF-8 at all. None of them has a legitimate use in these
fields, so the API refuses them at the edge instead of storing a job that can never run.

Refused: Unicode category ``Cc`` (C0 controls U+0000–U+001F including tab and newline, DEL
U+007F, C1 controls U+0080–U+009F) and ``Cs`` (surrogates). Names are stricter still
(``scheduler.names``).
"""

from __future__ import annotations

import unicodedata

_REFUSED_CATEGORIES = {"Cc": "control character", "Cs": "lone surrogate"}


def text_problem(value: str) -> str | None:
    """Why ``value`` is not acceptable free text, or None when it is."""
    if not isinstance(value, str):
        return "must be a string"
    for position, char in enumerate(value):
        what = _REFUSED_CATEGORIES.get(unicodedata.category(char))
        if what is not None:
            return f"must not contain a {what} (U+{ord(char):04X} at position {position})"
    return None


def is_clean_text(value: str) -> bool:
    return text_problem(value) is None
