"""What a free-text field may contain (pure): no control characters, no lone surrogates.

Job arguments, Spark properties, labels, entry points and URLs end up in process arguments,
environment variables, file paths, HTTP bodies and database columns. A NUL byte cannot be passed
to ``exec`` (the submission would fail on every tick, "embedded null byte"), a newline or an
escape sequence forges log lines and terminal output, and a lone UTF-16 surrogate (``"\\ud800"``
is valid JSON) cannot be encoded as UTF-8 at all. None of them has a legitimate use in these
fields, so the API refuses them at the edge instead of storing a job that can never run.

Refused: Unicode category ``Cc`` (C0 controls U+0000–U+001F including tab and newline, DEL
U+007F, C1 controls U+0080–U+009F) and ``Cs`` (surrogates). Names are stricter still
(``scheduler.core.names``).
"""

from __future__ import annotations

import re

#: the refused code points: category ``Cc`` (C0, DEL, C1: fixed by Unicode's stability policy)
#: and ``Cs`` (the surrogates); the unit tests hold them to the categories for every code point
_REFUSED = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why ``value`` is not acceptable free text, or None when it is."""
    if not isinstance(value, str):
        return "must be a string"
    found = _REFUSED.search(value)
    if found is None:
        return None
    code = ord(found.group())
    what = "lone surrogate" if 0xD800 <= code <= 0xDFFF else "control character"
    return f"must not contain a {what} (U+{code:04X} at position {found.start()})"


def is_clean_text(value: str) -> bool:
    return text_problem(value) is None
