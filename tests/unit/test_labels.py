"""Labels and label selectors (scheduler.decisions.labels): the rules, the published patterns,
parsing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.errors import InvalidInput
from scheduler.decisions.labels import (
    KEY_PATTERN,
    MAX_LABELS,
    REQUIREMENT_PATTERN,
    VALUE_PATTERN,
    Op,
    Requirement,
    key_problem,
    labels_problem,
    matches,
    parse_requirement,
    parse_selector,
    value_problem,
)

GOOD_KEYS = ["env", "a", "tier.level", "app_1", "orders.example.com/owner", "x-y/z", "A9"]
BAD_KEYS = ["", "-env", "env-", "a b", "é", "x/", "/x", "UPPER.COM/x", "a" * 64, "a/b/c", "env\n"]
GOOD_VALUES = ["", "prod", "v1.2.3", "a_b-c", "Z" * 63]
BAD_VALUES = ["-x", "x-", "a b", "ü", "a" * 64, "x\x00"]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_good_keys(key: str) -> None:
    assert key_problem(key) is None and re.fullmatch(KEY_PATTERN, key)


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys(key: str) -> None:
    assert key_problem(key) is not None


def test_a_prefix_longer_than_253_is_refused_though_the_pattern_allows_it() -> None:
    key = ".".join(["a" * 60] * 5) + "/x"
    assert re.fullmatch(KEY_PATTERN, key) and "prefix" in (key_problem(key) or "")


@pytest.mark.parametrize("value", GOOD_VALUES)
def test_good_values(value: str) -> None:
    assert value_problem(value) is None and re.fullmatch(VALUE_PATTERN, value)


@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_values(value: str) -> None:
    assert value_problem(value) is not None


def test_at_most_max_labels() -> None:
    assert labels_problem({f"k{i}": "v" for i in range(MAX_LABELS)}) is None
    assert "at most" in (labels_problem({f"k{i}": "v" for i in range(MAX_LABELS + 1)}) or "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("env=prod", Requirement("env", Op.EQUALS, "prod")),
        ("env!=prod", Requirement("env", Op.NOT_EQUALS, "prod")),
        ("env=", Requirement("env", Op.EQUALS, "")),
        ("canary", Requirement("canary", Op.EXISTS)),
        ("!canary", Requirement("canary", Op.NOT_EXISTS)),
        ("a.example.com/owner=alice", Requirement("a.example.com/owner", Op.EQUALS, "alice")),
    ],
)
def test_requirements_parse_and_print_back(text: str, expected: Requirement) -> None:
    assert parse_requirement(text) == expected and str(expected) == text
    assert re.fullmatch(REQUIREMENT_PATTERN, text)


@pytest.mark.parametrize("text", ["", "=x", "!", "!=x", "env==x", "env=a b", "!env=x", "e nv"])
def test_bad_requirements(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_requirement(text)
    assert re.fullmatch(REQUIREMENT_PATTERN, text) is None


def test_too_many_requirements() -> None:
    with pytest.raises(InvalidInput):
        parse_selector([f"k{i}" for i in range(21)])


def test_matching() -> None:
    labels = {"env": "prod", "tier": ""}
    assert matches(parse_selector(["env=prod", "tier", "!canary"]), labels)
    assert matches(parse_selector(["env!=dev", "team!=x"]), labels)
    assert not matches(parse_selector(["env=dev"]), labels)
    assert not matches(parse_selector(["!tier"]), labels)
    assert matches((), {})


name = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._-]{0,10}[A-Za-z0-9])?\Z")


@given(key=name, value=st.one_of(st.just(""), name))
def test_every_generated_pair_is_valid_and_round_trips(key: str, value: str) -> None:
    assert key_problem(key) is None and value_problem(value) is None
    for op in (Op.EQUALS, Op.NOT_EQUALS):
        requirement = Requirement(key, op, value)
        assert parse_requirement(str(requirement)) == requirement
    for op in (Op.EXISTS, Op.NOT_EXISTS):
        requirement = Requirement(key, op)
        assert parse_requirement(str(requirement)) == requirement


@given(text=st.text(max_size=40))
def test_the_pattern_and_the_parser_agree(text: str) -> None:
    try:
        parse_requirement(text)
        parsed = True
    except InvalidInput:
        parsed = False
    assert parsed == (re.fullmatch(REQUIREMENT_PATTERN, text) is not None)
