"""One exception tree for the whole scheduler.

Adapters (store, cluster backends, ZooKeeper) translate foreign exceptions into these and chain the
original (``raise ClusterUnreachable(...) from exc``). The API maps them to RFC 9457 problem
documents in one place (``api/problems.py``); the CLI prints their message on one line.

    DroverError
    ├── InvalidInput            bad user input (name, field, value)             → 422
    │   ├── RefusedSubmission   entrypoint outside the artifact roots, forbidden conf → 422
    │   ├── IdempotencyKeyReused  an Idempotency-Key sent again with another request → 422
    │   ├── MalformedRequest    unparsable body, undeclared query parameter     → 400
    │   └── UnsupportedMediaType  a request body that is not JSON               → 415
    ├── PayloadTooLarge         a request body over the route's bound           → 413
    ├── Unauthenticated         no valid credential                             → 401
    │   └── TooManyFailedCredentials  this address failed too often; wait       → 429
    ├── Forbidden               the credential may not do this                   → 403
    ├── PermissionCenterUnavailable  the external permission center did not answer → 503
    │   └── IdentityProviderUnavailable  the JWT issuer's keys could not be loaded → 503
    ├── NotFound                unknown job / cluster / group / run             → 404
    ├── Conflict                the request clashes with the current state      → 409
    │   ├── AlreadyExists
    │   ├── IllegalTransition   a state change the transition table forbids
    │   ├── IdempotencyKeyInUse  the first request with this key is still running (or its
    │   │                        answer was lost after its change committed)
    │   ├── DuplicateNode       another live node is registered under this node's id
    │   └── StaleWrite          a conditional write matched no row              → 409
    │       ├── NotOwner        this node's claim on a job is not current
    │       └── PreconditionFailed  the client's If-Match is not the current version → 412
    ├── StoreError              the metadata store failed (a bug, bad data)      → 500
    │   ├── StoreUnavailable    unreachable, timed out, or without our tables   → 503
    │   └── SchemaOutOfDate     the database needs `drover db upgrade`          → 503
    ├── CoordinationUnavailable  ZooKeeper did not answer, or no registered session → 503
    ├── LeaseExpired            this node's claim lease ran out: it stops acting (never raised
    │                           to the API; the loops stop their round and wait for the next)
    ├── ClusterError            a Spark cluster backend failed                  → 502
    │   ├── ClusterUnreachable  no answer: never a guess about the app state
    │   └── SubmissionRejected  the cluster refused the submission
    └── StorageError            checkpoint storage failed (scheduler.storage.local) → 502
        └── StorageUnavailable  a location cannot be read or written right now
"""

from __future__ import annotations


class DroverError(Exception):
    """Base of every error Drover raises on purpose."""

    #: short machine-readable kind, used as the problem ``type`` suffix
    kind = "error"

    def __init__(self, message: str, **extra: object) -> None:
        super().__init__(message)
        self.message = message
        #: extension members of the problem document
        self.extra = extra


class InvalidInput(DroverError):
    kind = "invalid-input"


class RefusedSubmission(InvalidInput):
    """A job spec the submission policy refuses (artifact roots, Spark property allow-list)."""

    kind = "refused-submission"


class IdempotencyKeyReused(InvalidInput):
    """The ``Idempotency-Key`` was first sent with another request (route, body, If-Match)."""

    kind = "idempotency-key-reused"


class Unauthenticated(DroverError):
    """No credential, or one that is unknown, expired, revoked or badly signed."""

    kind = "unauthenticated"


class TooManyFailedCredentials(Unauthenticated):
    """The client's address presented too many credentials that did not verify lately; it is
    answered this (with ``retry_after`` seconds) until its allowance is back."""

    kind = "too-many-failed-credentials"


class PayloadTooLarge(DroverError):
    """A request body longer than the bound of its route (``DROVER_API_MAX_BODY_BYTES``)."""

    kind = "payload-too-large"


class Forbidden(DroverError):
    kind = "forbidden"


class PermissionCenterUnavailable(DroverError):
    """The external permission center could not be asked: every decision fails closed."""

    kind = "permission-center-unavailable"


class IdentityProviderUnavailable(PermissionCenterUnavailable):
    """The JWT issuer's keys could not be loaded."""

    kind = "identity-provider-unavailable"


class MalformedRequest(InvalidInput):
    """The request itself is broken: a body that is not valid JSON, a query parameter the route
    does not take (a typo'd filter must not silently return everything)."""

    kind = "malformed-request"


class UnsupportedMediaType(InvalidInput):
    """A request body in a media type other than JSON."""

    kind = "unsupported-media-type"


class NotFound(DroverError):
    kind = "not-found"


class Conflict(DroverError):
    kind = "conflict"


class AlreadyExists(Conflict):
    kind = "already-exists"


class IllegalTransition(Conflict):
    kind = "illegal-transition"


class IdempotencyKeyInUse(Conflict):
    """The request first sent with this ``Idempotency-Key`` is still being processed, or its change
    committed and its answer was lost: nothing is done again."""

    kind = "idempotency-key-in-use"


class StaleWrite(Conflict):
    """A conditional write matched no row: someone else changed it first, or our claim is stale."""

    kind = "stale-write"


class NotOwner(StaleWrite):
    """This node's claim on a job is not current (another node owns it under a newer epoch)."""

    kind = "not-owner"


class PreconditionFailed(StaleWrite):
    """The client's ``If-Match`` version is not the current one."""

    kind = "precondition-failed"


class StoreError(DroverError):
    """The metadata store refused or failed a statement. The message names the driver's error
    (with its SQL): fine for logs and the CLI, never for an API client (``api.problems``)."""

    kind = "store-error"


class StoreUnavailable(StoreError):
    """The database cannot be used right now: unreachable, timed out, or not migrated."""

    kind = "store-unavailable"


class SchemaOutOfDate(StoreError):
    kind = "schema-out-of-date"


class CoordinationUnavailable(DroverError):
    """ZooKeeper did not answer, or this node has no registered session right now."""

    kind = "coordination-unavailable"


class LeaseExpired(DroverError):
    """This node's claim (its slot in a group's pool under an epoch) is past its lease: the last
    confirmed ZooKeeper round trip is too old (a frozen process, a lost session). Whoever acts
    under the claim stops before its next write; nothing was written under the expired lease,
    and the node acts again once its membership renews the claim."""

    kind = "lease-expired"


class ClusterError(DroverError):
    kind = "cluster-error"


class ClusterUnreachable(ClusterError):
    kind = "cluster-unreachable"


class SubmissionRejected(ClusterError):
    kind = "submission-rejected"


class DuplicateNode(Conflict):
    """Another live node is registered in ZooKeeper under this node's id."""

    kind = "duplicate-node"


class StorageError(DroverError):
    """Checkpoint storage refused or failed an operation (``scheduler.storage.local``)."""

    kind = "storage-error"


class StorageUnavailable(StorageError):
    """A checkpoint location cannot be read or written right now (gone, refused, I/O error)."""

    kind = "storage-unavailable"
