"""Membership answers a waiting snapshot read at once when the snapshot changes, else after the
wait; the node's API then reads membership changes without reading it several times a second."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from scheduler.actors import membership as actor_module
from scheduler.config import Settings
from scheduler.coordination.zookeeper import ConnectionChanged
from scheduler.decisions.membership import Connection, Mode

#: every test measures time: not beside the e2e tests at nice 19
pytestmark = pytest.mark.serial


def bare_membership(**settings: Any) -> Any:
    """The actor's class without Ray, for a node without ZooKeeper unless ``settings`` say."""
    cls = actor_module.Membership.__ray_metadata__.modified_class
    return cls(Settings(database_url="sqlite://", **settings).membership_settings())


def test_a_first_read_answers_at_once_then_a_read_waits_for_its_deadline() -> None:
    async def scenario() -> tuple[float, float, Any, Any]:
        member = bare_membership()
        t = time.monotonic()
        seen, snapshot, status = await member.next_snapshot(None, 5.0)
        assert status["connection"] == "NONE"
        first = time.monotonic() - t
        t = time.monotonic()
        again, _, _ = await member.next_snapshot(seen, 0.2)
        return first, time.monotonic() - t, (seen, again), snapshot

    first, waited, (seen, again), snapshot = asyncio.run(scenario())
    assert first < 0.1
    assert 0.15 <= waited < 2.0
    assert again == seen
    assert snapshot.mode == Mode.STANDALONE


def test_a_change_answers_a_waiting_read_at_once() -> None:
    async def scenario() -> tuple[float, Any]:
        member = bare_membership(zk_hosts="127.0.0.1:1")
        member._started = True  # registered (no ZooKeeper session in this test)
        seen, _, _ = await member.next_snapshot(None, 5.0)
        t = time.monotonic()
        waiting = asyncio.ensure_future(member.next_snapshot(seen, 10.0))
        await asyncio.sleep(0.05)
        member._on_event(ConnectionChanged(Connection.SUSPENDED))
        changed, _, status = await asyncio.wait_for(waiting, timeout=5.0)
        assert status["connection"] == "SUSPENDED"
        assert changed != seen
        return time.monotonic() - t, member

    took, _ = asyncio.run(scenario())
    assert took < 2.0


def test_a_read_from_another_instance_of_the_actor_answers_at_once() -> None:
    async def scenario() -> float:
        old, new = bare_membership(), bare_membership()
        seen, _, _ = await old.next_snapshot(None, 5.0)
        t = time.monotonic()
        await new.next_snapshot(seen, 10.0)
        return time.monotonic() - t

    assert asyncio.run(scenario()) < 1.0


def test_a_suspended_read_answers_when_the_mode_turns_degraded() -> None:
    async def scenario() -> tuple[float, Mode]:
        member = bare_membership(zk_hosts="127.0.0.1:1", degraded_mode=True)
        member._started = True  # registered (no ZooKeeper session in this test)
        member._on_event(ConnectionChanged(Connection.SUSPENDED))
        member._suspended_since = time.monotonic() - member._lease + 0.2
        seen = member._changes
        t = time.monotonic()
        _, snapshot, _ = await member.next_snapshot(seen, 10.0)
        return time.monotonic() - t, snapshot.mode

    took, mode = asyncio.run(scenario())
    assert took < 5.0
    assert mode == Mode.DEGRADED
