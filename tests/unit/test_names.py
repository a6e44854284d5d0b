"""Names of jobs, clusters and groups."""

from __future__ import annotations

import pytest

from scheduler.core.errors import InvalidInput
from scheduler.core.names import MAX_NAME_LENGTH, name_problem, validate_name

VALID = [
    "a",
    "orders-enrich",
    "user_profile_sync",
    "search.query.rollup",
    "ad-impressions-5m",
    "0042",
    "café-crème",
    "Ünïcödé_Äccents",
    "日志清洗-实时",
    "ジョブ.一",
    "x²",
    "...",
    "-leading-dash",
    "x" * MAX_NAME_LENGTH,
    "日" * MAX_NAME_LENGTH,
]

INVALID = [
    "",
    "x" * (MAX_NAME_LENGTH + 1),
    "two words",
    " leading",
    "trailing ",
    "a/b",
    "../etc",
    "a:b",
    "job🚀",
    "tab\there",
    "new\nline",
    "nul\x00",
    "bell\x07",
    ".",
    "..",
    "semi;colon",
    "star*",
    "percent%",
]


@pytest.mark.parametrize("name", VALID)
def test_valid_names(name: str) -> None:
    assert name_problem(name) is None
    assert validate_name(name) == name


@pytest.mark.parametrize("name", INVALID, ids=[repr(n)[:20] for n in INVALID])
def test_invalid_names(name: str) -> None:
    problem = name_problem(name)
    assert problem is not None
    with pytest.raises(InvalidInput) as info:
        validate_name(name, "job name")
    assert info.value.message.startswith("job name ")
    assert problem in info.value.message


def test_length_message_names_the_limit() -> None:
    assert name_problem("") == f"must be 1 to {MAX_NAME_LENGTH} characters long"
    assert MAX_NAME_LENGTH == 128


def test_bad_character_is_shown() -> None:
    problem = name_problem("a/b")
    assert problem is not None and "'/'" in problem


def test_non_string_is_refused() -> None:
    assert name_problem(42) == "must be a string"  # type: ignore[arg-type]


def test_the_published_pattern_is_the_rule_for_every_code_point() -> None:
    """NAME_PATTERN (in the OpenAPI document), name_problem and the rule in words (letters
    ``L*``, digits ``N*`` and ``-_``; ``.`` alone is no name) agree on all of Unicode."""
    import sys
    import unicodedata

    from scheduler.core.names import matches_pattern

    def in_words(char: str) -> bool:
        return char in "-_" or unicodedata.category(char)[0] in "LN"

    disagree = [
        hex(cp)
        for cp in range(sys.maxunicode + 1)
        if not (name_problem(chr(cp)) is None) == matches_pattern(chr(cp)) == in_words(chr(cp))
    ]
    assert disagree == []
    for name in VALID + INVALID:
        assert (name_problem(name) is None) == matches_pattern(name), repr(name)
