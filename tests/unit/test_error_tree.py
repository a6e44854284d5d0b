"""The diagram of the exception tree in scheduler/core/errors.py shows every class, each under
its parent."""

from __future__ import annotations

import inspect
import re

from scheduler.core import errors


def _diagram() -> dict[str, str | None]:
    """class -> the class it is drawn under (None: the root), from the module docstring."""
    assert errors.__doc__ is not None
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        # "    " then one "│   " or "    " per level above, "├── " or "└── ", the class name
        match = re.match(r"^    ((?:│   |    )*)(├── |└── )?([A-Z][A-Za-z]+)\b", line)
        if match is None:
            continue
        depth = len(match.group(1)) // 4 + (1 if match.group(2) else 0)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[match.group(3)] = stack[-1][1] if stack else None
        stack.append((depth, match.group(3)))
    return parents


def test_the_diagram_shows_every_error_under_its_parent() -> None:
    classes = {
        name: cls
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, errors.DroverError)
    }
    drawn = _diagram()
    assert set(drawn) == set(classes)
    for name, cls in classes.items():
        parent = cls.__bases__[0].__name__ if cls is not errors.DroverError else None
        assert drawn[name] == parent, name
