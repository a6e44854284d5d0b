"""The API's cache of verified tokens (api/security/authn.py: TokenCache)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.security.authn import TokenCache, bearer_token
from scheduler.decisions.identity import FENCING_TOKEN_HEADER, NODE_SECRET_HEADER, Principal

ALICE = Principal(subject="user:alice", identity="alice")
SECRET = "drv_" + "a" * 43


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_verified_token_is_kept_for_the_ttl_only() -> None:
    clock = Clock()
    cache = TokenCache(5.0, clock=clock)
    assert cache.get(SECRET) is None
    cache.put(SECRET, ALICE, None, cache.generation)
    assert cache.get(SECRET) is ALICE
    clock.now += 4.9
    assert cache.get(SECRET) is ALICE
    clock.now += 0.2
    assert cache.get(SECRET) is None


def test_never_past_the_tokens_own_expiry() -> None:
    clock = Clock()
    cache = TokenCache(60.0, clock=clock)
    cache.put(SECRET, ALICE, datetime.now(UTC) + timedelta(seconds=2), cache.generation)
    assert cache.get(SECRET) is ALICE
    clock.now += 3
    assert cache.get(SECRET) is None
    cache.put(SECRET, ALICE, datetime.now(UTC) - timedelta(seconds=1), cache.generation)
    assert cache.get(SECRET) is None  # expired already: not kept at all


def test_clear_drops_everything_and_refuses_verifications_begun_before_it() -> None:
    cache = TokenCache(5.0)
    cache.put(SECRET, ALICE, None, cache.generation)
    begun = cache.generation  # a verification reads the store ...
    cache.clear()  # ... while the token is revoked through this node
    assert cache.get(SECRET) is None
    cache.put(SECRET, ALICE, None, begun)  # its answer predates the revocation
    assert cache.get(SECRET) is None
    cache.put(SECRET, ALICE, None, cache.generation)
    assert cache.get(SECRET) is ALICE


def test_off_with_a_zero_ttl_and_bounded() -> None:
    off = TokenCache(0.0)
    off.put(SECRET, ALICE, None, off.generation)
    assert off.get(SECRET) is None
    small = TokenCache(5.0, most=3)
    secrets = [f"drv_{i:043d}" for i in range(10)]
    for secret in secrets:
        small.put(secret, ALICE, None, small.generation)
    assert sum(small.get(s) is not None for s in secrets) <= 3
    assert small.get(secrets[-1]) is ALICE


def test_only_plain_bearer_tokens_are_served_from_the_cache() -> None:
    assert bearer_token({"Authorization": f"Bearer {SECRET}"}) == SECRET
    assert bearer_token({}) is None
    assert bearer_token({"Authorization": "Bearer a.b.c"}) is None  # a JWT
    assert bearer_token({"Authorization": f"Basic {SECRET}"}) is None
    with_secret = {"Authorization": f"Bearer {SECRET}", NODE_SECRET_HEADER: "s"}
    assert bearer_token(with_secret) is None
    with_fence = {"Authorization": f"Bearer {SECRET}", FENCING_TOKEN_HEADER: "t"}
    assert bearer_token(with_fence) is None
