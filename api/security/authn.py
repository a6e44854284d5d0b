"""Authentication: which :class:`Principal` a request's credential proves.

Credentials, tried in this order:

- ``X-Drover-Node-Secret: <deployment secret>``: another node of this deployment (internal calls);
- ``X-Drover-Fencing-Token: <token>``: a pipeline's run, on its own job's fence check only
  (``fence_job``: the job of the fence route asked; anywhere else the token proves nothing);
- ``Authorization: Bearer drv_…``: a Drover API token (hashed in the store);
- ``Authorization: Bearer <JWT>``: a token of the configured SSO issuer (signature, ``iss``,
  ``aud``, ``exp`` checked; role bindings from ``DROVER_JWT_ROLES_CLAIM``).

No credential is :data:`ANONYMOUS`; a credential that does not verify raises Unauthenticated
(never a silent downgrade to anonymous). Error messages never carry the credential.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.config import Settings
from scheduler.core.errors import IdentityProviderUnavailable, Unauthenticated
from scheduler.decisions.identity import (
    ANONYMOUS,
    FENCING_TOKEN_HEADER,
    NODE_SECRET_HEADER,
    Principal,
    Scope,
    looks_like_token,
    parse_bindings,
    same_secret,
    token_digest,
)
from scheduler.store import identities
from scheduler.store.db import Store


class TokenCache:
    """API tokens verified recently: digest -> principal, each for at most ``ttl`` seconds and
    never past the token's own expiry (bounded: ``most`` entries).

    Verifying a token reads three rows (token, identity, role bindings) in a session of its
    own, on every request; a UI polling the API repeats it many times a second. A revocation,
    role change or new binding made through this node empties the cache at once
    (:meth:`clear`); one made elsewhere applies within ``ttl``. A verification that began
    before a :meth:`clear` is not kept (the generation moved), so a token revoked meanwhile is
    never cached as valid.
    """

    def __init__(
        self,
        ttl: float,
        *,
        most: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.most = most
        self._clock = clock
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        return self._generation

    def get(self, secret: str) -> Principal | None:
        if self.ttl <= 0:
            return None
        hit = self._entries.get(token_digest(secret))
        if hit is None or hit[0] <= self._clock():
            return None
        return hit[1]

    def put(
        self, secret: str, principal: Principal, expires_at: datetime | None, generation: int
    ) -> None:
        if self.ttl <= 0:
            return
        now = self._clock()
        until = now + self.ttl
        if expires_at is not None:
            until = min(until, now + (expires_at - datetime.now(UTC)).total_seconds())
        with self._lock:
            if generation != self._generation or until <= now:
                return
            if len(self._entries) >= self.most:
                self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
                if len(self._entries) >= self.most:
                    self._entries.clear()
            self._entries[token_digest(secret)] = (until, principal)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries = {}


def bearer_token(headers: Any) -> str | None:
    """The Drover API token of a request that carries nothing but one (the case
    :class:`TokenCache` serves), else None."""
    if NODE_SECRET_HEADER in headers or FENCING_TOKEN_HEADER in headers:
        return None
    authorization = headers.get("Authorization")
    if authorization is None:
        return None
    scheme, _, credential = authorization.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not looks_like_token(credential):
        return None
    return credential


def authenticate(
    headers: Any,
    settings: Settings,
    store: Store,
    jwt: JwtVerifier,
    tokens: TokenCache | None = None,
    fence_job: str | None = None,
) -> Principal:
    node_secret = headers.get(NODE_SECRET_HEADER)
    if node_secret is not None:
        expected = settings.resolved_deployment_secret
        if not expected or not same_secret(node_secret, expected):
            raise Unauthenticated("the deployment secret does not match")
        return Principal(subject="node", node=True, scopes=frozenset())
    fencing_token = headers.get(FENCING_TOKEN_HEADER)
    if fencing_token is not None:
        return _run_principal(store, fencing_token, fence_job)
    authorization = headers.get("Authorization")
    if authorization is None:
        return ANONYMOUS
    scheme, _, credential = authorization.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        raise Unauthenticated("use Authorization: Bearer <token>")
    if looks_like_token(credential):
        return _token_principal(store, credential, tokens)
    if credential.count(".") == 2:
        return jwt.verify(credential)
    raise Unauthenticated("the bearer credential is neither a Drover token nor a JWT")


def _token_principal(store: Store, secret: str, tokens: TokenCache | None = None) -> Principal:
    generation = tokens.generation if tokens is not None else 0
    with store.connection() as connection:  # one read: no ORM session
        found = identities.authenticate_token(connection, secret, datetime.now(UTC))
    if found is None:
        raise Unauthenticated("unknown, expired or revoked token")
    prefix = "service" if found.kind == "service" else "user"
    principal = Principal(
        subject=f"{prefix}:{found.identity}",
        roles=dict(found.roles),
        scopes=found.scopes,
        identity=found.identity,
        token_id=found.token_id,
        expires_at=found.expires_at,
    )
    if tokens is not None:
        tokens.put(secret, principal, found.expires_at, generation)
    return principal


#: what a fencing token that proves nothing is told: the same for an unknown job, a token no
#: run holds and a run of another job (no oracle for job names)
NOT_A_RUN_OF_THIS_JOB = "the fencing token is not that of a run of this job"


def _run_principal(store: Store, token: str, job: str | None) -> Principal:
    if job is None:
        raise Unauthenticated("a fencing token opens only its own job's fence check")
    with store.connection() as connection:  # one read: no ORM session
        run_id = identities.run_of_fencing_token(connection, job, token)
    if run_id is None:
        raise Unauthenticated(NOT_A_RUN_OF_THIS_JOB)
    return Principal(
        subject=f"run:{job}/{run_id}", run_of_job=job, run_id=run_id, scopes=frozenset()
    )


# --------------------------------------------------------------------------- JWT


@dataclass
class JwtVerifier:
    """Verifies JWTs of the configured issuer; keys from a JWKS file or URL, re-read every
    ``refresh_s``, and when a token names a key id they lack (the issuer rotated its keys) --
    but then at most once per ``DROVER_JWT_KEYS_REFETCH_SECONDS``: tokens naming unknown ids,
    which anybody can forge, never make the node hammer the issuer.

    (PyJWT's ``PyJWKClient`` caches keys too, but fetches again for every unknown key id and
    reads URLs only, not the JWKS file this verifier also takes.)"""

    settings: Settings
    refresh_s: float = 300.0
    _keys: dict[str, Any] = field(default_factory=dict)
    _loaded_at: float = -1e18
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def configured(self) -> bool:
        s = self.settings
        return bool(s.jwt_issuer and (s.jwt_jwks_file or s.jwt_jwks_url))

    def _jwks(self) -> dict[str, Any]:
        s = self.settings
        if s.jwt_jwks_file is not None:
            raw: Any = json.loads(s.jwt_jwks_file.read_text(encoding="utf-8"))
        else:
            from scheduler.backends import http

            response = http.one_off("GET", s.jwt_jwks_url, timeout=5.0)
            response.raise_for_status()
            raw = response.json()
        return raw if isinstance(raw, dict) else {}

    def _load(self, force: bool = False) -> dict[str, Any]:
        import jwt

        with self._lock:
            age = time.monotonic() - self._loaded_at
            if age > self.refresh_s or (force and age >= self.settings.jwt_keys_refetch_seconds):
                try:
                    jwks = self._jwks()
                except Exception as exc:  # unreadable keys: refuse, say why (no key material)
                    raise IdentityProviderUnavailable(
                        f"cannot load the JWT issuer's keys: {type(exc).__name__}"
                    ) from None
                keys: dict[str, Any] = {}
                for number, jwk in enumerate(jwks.get("keys", [])):
                    try:
                        key = jwt.PyJWK.from_dict(jwk)
                    except jwt.PyJWTError:
                        continue
                    keys[str(jwk.get("kid") or f"#{number}")] = key
                self._keys, self._loaded_at = keys, time.monotonic()
            return self._keys

    def verify(self, credential: str) -> Principal:
        import jwt

        if not self.configured:
            raise Unauthenticated("JWTs are not accepted here (no issuer configured)")
        s = self.settings
        try:
            header = jwt.get_unverified_header(credential)
        except jwt.PyJWTError:
            raise Unauthenticated("malformed JWT") from None
        algorithms = [a.strip() for a in s.jwt_algorithms.split(",") if a.strip()]
        if header.get("alg") not in algorithms:
            raise Unauthenticated("JWT signed with an algorithm this node does not accept")
        kid = str(header.get("kid") or "")
        keys = self._load()
        if kid and kid not in keys:
            keys = self._load(force=True)  # the issuer rotated its keys (or a forger guesses)
        candidates = [keys[kid]] if kid in keys else ([] if kid else list(keys.values()))
        if not candidates:
            raise Unauthenticated("JWT signed by an unknown key")
        claims: dict[str, Any] | None = None
        reason = "bad signature"
        for key in candidates:
            try:
                claims = jwt.decode(
                    credential,
                    key=key,
                    algorithms=algorithms,
                    issuer=s.jwt_issuer,
                    audience=s.jwt_audience or None,
                    options={"require": ["exp", "iss", "sub"], "verify_aud": bool(s.jwt_audience)},
                    leeway=30,
                )
                break
            except jwt.ExpiredSignatureError:
                raise Unauthenticated("the JWT has expired") from None
            except jwt.InvalidAudienceError:
                raise Unauthenticated("the JWT is for another audience") from None
            except jwt.InvalidIssuerError:
                raise Unauthenticated("the JWT is from another issuer") from None
            except jwt.PyJWTError as exc:
                reason = type(exc).__name__
        if claims is None:
            raise Unauthenticated(f"the JWT does not verify ({reason})")
        raw = claims.get(s.jwt_roles_claim, {})
        try:
            roles = parse_bindings(raw if isinstance(raw, dict | list | str) else {})
        except ValueError:
            raise Unauthenticated(f"the JWT's {s.jwt_roles_claim} claim is malformed") from None
        scopes = frozenset({Scope.READ, Scope.WRITE})
        if "scope" in claims and isinstance(claims["scope"], str):
            named = {p.removeprefix("drover:") for p in claims["scope"].split()}
            scopes = frozenset(sc for sc in Scope if sc.value in named) or scopes
        return Principal(
            subject=f"jwt:{claims['sub']}",
            roles=roles,
            scopes=scopes,
            expires_at=datetime.fromtimestamp(int(claims["exp"]), UTC),
        )
