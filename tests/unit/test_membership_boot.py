"""A booting node retries registering while coordination is unavailable (a chaos run found it:
MariaDB restarting while the node resolved a membership generation made the node exit)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.actors import membership as actor_module
from scheduler.core.errors import CoordinationUnavailable, DuplicateNode


def bare_membership(failures: list[BaseException]) -> tuple[Any, list[bool]]:
    """The actor's class without Ray, its ``_register`` failing with ``failures`` in turn."""
    cls = actor_module.Membership.__ray_metadata__.modified_class
    member = object.__new__(cls)
    calls: list[bool] = []

    async def register(wait_for_old_session: bool) -> None:
        calls.append(wait_for_old_session)
        if failures:
            raise failures.pop(0)

    member._register = register
    return member, calls


@pytest.fixture(autouse=True)
def no_real_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    real_sleep = asyncio.sleep

    async def instant(_seconds: float) -> None:
        await real_sleep(0)

    monkeypatch.setattr(actor_module.asyncio, "sleep", instant)


def test_unavailable_coordination_at_boot_is_retried_until_it_registers() -> None:
    down = CoordinationUnavailable("resolving a membership generation failed: store down")
    member, calls = bare_membership([down, down])
    asyncio.run(member._register_with_retries(True))
    assert calls == [True, True, True]


def test_a_duplicate_node_is_not_retried() -> None:
    member, calls = bare_membership([DuplicateNode("node id 'n1' is already registered")])
    with pytest.raises(DuplicateNode):
        asyncio.run(member._register_with_retries(False))
    assert calls == [False]


def test_retries_end_at_their_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actor_module, "REGISTER_RETRY_SECONDS", 0.0)
    member, calls = bare_membership([CoordinationUnavailable("ZooKeeper down")] * 3)
    with pytest.raises(CoordinationUnavailable):
        asyncio.run(member._register_with_retries(True))
    assert len(calls) == 1
