"""Free-text fields: control characters and lone surrogates are refused, everything else is text."""

from __future__ import annotations

import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.text import is_clean_text, text_problem


def test_each_refused_code_point_is_named_with_its_position() -> None:
    for char in ["\x00", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9f", "\ud800", "\udfff"]:
        problem = text_problem(f"ab{char}c")
        assert problem is not None and f"U+{ord(char):04X} at position 2" in problem
        surrogate = unicodedata.category(char) == "Cs"
        assert ("lone surrogate" if surrogate else "control character") in problem


def test_exactly_the_control_and_surrogate_categories_are_refused() -> None:
    refused = {cp for cp in range(sys.maxunicode + 1) if not is_clean_text(chr(cp))}
    expected = {
        cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) in ("Cc", "Cs")
    }
    assert refused == expected
    assert len(refused) == 65 + 2048  # C0 + DEL + C1, and the surrogates


@given(st.text(st.characters(exclude_categories=["Cc", "Cs"])))
def test_printable_text_of_any_script_is_clean(value: str) -> None:
    assert text_problem(value) is None


def test_the_empty_string_is_clean() -> None:
    assert is_clean_text("")
