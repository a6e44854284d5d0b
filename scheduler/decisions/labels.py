"""Job labels and label selectors (pure).

A label is a key/value pair an operator attaches to a job (``env=prod``, ``tier=critical``,
``orders.example.com/owner=alice``) to find jobs and to act on groups of them (list filters, bulk
operations). The rules are Kubernetes' (operators know them), ASCII only:

- key: an optional prefix (a DNS subdomain, at most 253 characters) and ``/``, then a name of 1 to
  63 characters: letters, digits, ``-``, ``_`` and ``.``, beginning and ending with a letter or a
  digit. Keys are case-sensitive.
- value: empty, or 1 to 63 characters of the same alphabet, beginning and ending with a letter or
  a digit.
- at most :data:`MAX_LABELS` labels per job.

A selector is a list of requirements, all of which a job must meet:

- ``key=value``: the job has the label with that value;
- ``key!=value``: the job does not have the label with that value (it may lack the key);
- ``key``: the job has the key (any value);
- ``!key``: the job does not have the key.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.core.errors import InvalidInput

MAX_LABELS = 64
MAX_NAME = 63
MAX_PREFIX = 253
MAX_KEY = MAX_PREFIX + 1 + MAX_NAME
MAX_VALUE = MAX_NAME
#: requirements in one selector
MAX_REQUIREMENTS = 20

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_PREFIX = rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*"
#: a label key, as published in the OpenAPI document (the prefix's length is checked in code)
KEY_PATTERN = rf"^(?:{_PREFIX}/)?{_NAME}$"
#: a label value
VALUE_PATTERN = rf"^(?:{_NAME})?$"
#: one selector requirement: ``key=value``, ``key!=value``, ``key`` or ``!key``
REQUIREMENT_PATTERN = rf"^(?:!?(?:{_PREFIX}/)?{_NAME}|(?:{_PREFIX}/)?{_NAME}!?=(?:{_NAME})?)$"
_KEY = re.compile(KEY_PATTERN)
_VALUE = re.compile(VALUE_PATTERN)


def key_problem(key: object) -> str | None:
    """Why ``key`` is not a valid label key, or None."""
    if not isinstance(key, str):
        return "must be a string"
    if not key or len(key) > MAX_KEY:
        return f"must be 1 to {MAX_KEY} characters"
    prefix, _, _name = key.rpartition("/")
    if len(prefix) > MAX_PREFIX:
        return f"prefix must be at most {MAX_PREFIX} characters"
    if _KEY.fullmatch(key) is None:
        return (
            "must be a name of 1 to 63 letters, digits, '-', '_' or '.' beginning and ending "
            "with a letter or digit, optionally after a DNS prefix and '/'"
        )
    return None


def value_problem(value: object) -> str | None:
    """Why ``value`` is not a valid label value, or None."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > MAX_VALUE or _VALUE.fullmatch(value) is None:
        return (
            "must be empty or 1 to 63 letters, digits, '-', '_' or '.' beginning and ending "
            "with a letter or digit"
        )
    return None


def labels_problem(labels: Mapping[str, str]) -> str | None:
    """Why ``labels`` is not a valid label set, or None."""
    if len(labels) > MAX_LABELS:
        return f"at most {MAX_LABELS} labels per job"
    for key, value in labels.items():
        problem = key_problem(key)
        if problem is not None:
            return f"label key {key!r} {problem}"
        problem = value_problem(value)
        if problem is not None:
            return f"value of label {key!r} {problem}"
    return None


def validate_labels(labels: Mapping[str, str]) -> dict[str, str]:
    problem = labels_problem(labels)
    if problem is not None:
        raise InvalidInput(problem, field="labels")
    return dict(labels)


class Op(enum.StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    NOT_EXISTS = "!exists"


@dataclass(frozen=True)
class Requirement:
    key: str
    op: Op
    value: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op is Op.EQUALS:
            return labels.get(self.key) == self.value
        if self.op is Op.NOT_EQUALS:
            return labels.get(self.key) != self.value
        if self.op is Op.EXISTS:
            return self.key in labels
        return self.key not in labels

    def __str__(self) -> str:
        if self.op is Op.EXISTS:
            return self.key
        if self.op is Op.NOT_EXISTS:
            return f"!{self.key}"
        return f"{self.key}{self.op.value}{self.value}"


def parse_requirement(text: str) -> Requirement:
    """One requirement (``key=value``, ``key!=value``, ``key``, ``!key``); InvalidInput if bad."""
    if not isinstance(text, str) or not text:
        raise InvalidInput("label selector: empty requirement", field="label")
    if "=" in text:
        key, _, value = text.partition("=")
        op = Op.EQUALS
        if key.endswith("!"):
            key, op = key[:-1], Op.NOT_EQUALS
        problem = key_problem(key) or value_problem(value)
        if problem is not None:
            raise InvalidInput(f"label selector {text!r}: {problem}", field="label")
        return Requirement(key, op, value)
    op = Op.EXISTS
    key = text
    if key.startswith("!"):
        key, op = key[1:], Op.NOT_EXISTS
    problem = key_problem(key)
    if problem is not None:
        raise InvalidInput(f"label selector {text!r}: key {problem}", field="label")
    return Requirement(key, op)


def parse_selector(texts: Iterable[str]) -> tuple[Requirement, ...]:
    """Requirements from the ``label`` query parameters (or a bulk selector's list)."""
    requirements = tuple(parse_requirement(t) for t in texts)
    if len(requirements) > MAX_REQUIREMENTS:
        raise InvalidInput(
            f"label selector: at most {MAX_REQUIREMENTS} requirements", field="label"
        )
    return requirements


def matches(requirements: Iterable[Requirement], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in requirements)
