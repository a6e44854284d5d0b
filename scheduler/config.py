"""Node configuration: one settings object, from ``DROVER_*`` environment variables or a TOML file.

Precedence (highest first): constructor arguments, environment, ``DROVER_CONFIG`` TOML file,
defaults. The embedded default needs no configuration at all: SQLite under ``./var``, Spark local
mode, one node on 127.0.0.1:8000.
"""

from __future__ import annotations

import os
import re
import socket
import tomllib
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from scheduler.core.errors import ClusterError, InvalidInput
from scheduler.decisions.destinations import Destinations
from scheduler.decisions.health import HealthPolicy
from scheduler.decisions.membership import MembershipSettings, Role
from scheduler.decisions.planning import DEFAULT_IN_DOUBT_GRACE_S
from scheduler.decisions.stalls import StallPolicy

if TYPE_CHECKING:
    from scheduler.decisions.operations.failover import Timing as FailoverTiming

#: the deployment secret of a development node when none is configured; production refuses it
DEVELOPMENT_SECRET = "drover-development-secret-do-not-use-in-production"
#: Spark properties (exact names, or prefixes ending in ``.``/``*``) a non-admin may set
DEFAULT_SPARK_CONF_ALLOWED = (
    "spark.app.*,spark.sql.*,spark.default.parallelism,spark.cores.max,"
    "spark.executor.memory,spark.executor.cores,spark.executor.instances,"
    "spark.executor.memoryOverhead,spark.driver.memory,spark.driver.cores,"
    "spark.driver.memoryOverhead,spark.dynamicAllocation.*,spark.streaming.*,"
    "spark.drover.fenceMaxBlindSeconds,spark.drover.fenceTimeoutSeconds,"
    "spark.drover.fenceIdleCheckSeconds,spark.task.maxFailures,spark.scheduler.mode,"
    "spark.shuffle.partitions,spark.serializer"
)
#: variables of the node's environment a driver inherits (nothing else of it)
DEFAULT_DRIVER_ENV = "PATH,JAVA_HOME,LANG,LC_ALL,TZ,HOME,USER,TMPDIR,HADOOP_CONF_DIR,SPARK_CONF_DIR"


def _default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DROVER_", extra="forbid", frozen=True)

    #: ``development`` (the default) or ``production``; production refuses unsafe defaults
    environment: Literal["development", "production"] = "development"

    node_id: str = Field(default_factory=_default_node_id, min_length=1, max_length=128)
    data_dir: Path = Path("var")
    #: default: SQLite file ``<data_dir>/drover.db``
    database_url: str = ""

    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=0, le=65535)
    #: URL other nodes use to reach this node's API (default: http://api_host:api_port)
    api_url: str = ""

    # Membership (filled in by the distribution issue; empty = standalone one-member mode)
    zk_hosts: str = ""
    zk_namespace: str = "/drover"
    zk_session_timeout: float = Field(default=10.0, gt=0)
    #: a ZooKeeper digest credential ``user:password`` (or read from ``zk_auth_file``): the nodes
    #: authenticate with it and create the namespace's znodes readable and writable by that
    #: identity only (creator-all ACLs); empty: open znodes, as ZooKeeper makes them
    zk_auth: str = Field(default="", repr=False)
    zk_auth_file: Path | None = None
    #: ``g1:active,g2:backup``; empty = every group in the store, as ``active``
    groups: str = ""
    az: str = "az-1"
    cloud: str = "local"
    #: while ZooKeeper is unreachable, keep acting (incl. new starts) on the last known membership
    #: view; every start made so is flagged in the job's events. Off: such a node only waits.
    degraded_mode: bool = False
    #: Drover API URLs pipelines ask for their fencing check (comma separated; default: this
    #: node's URL plus every live member's); in production a load balancer in front of the nodes
    fence_urls: str = ""
    #: seconds of fence lease each confirming fence answer grants a run's driver: it stops
    #: committing (and exits, to be restarted) when it heard no confirmation for that long, so a
    #: driver stranded on a dead or cut-off cluster is harmless that long after its last check
    #: and a failover may go on then; a platform-wide Drover outage longer than this stops
    #: pipelines (scheduler/decisions/leases.py). The same on every node of a deployment.
    fence_lease_seconds: float = Field(default=90.0, ge=5.0, le=3600.0)
    #: seconds added to a recorded lease end before a run counts as surely gone: the largest
    #: wall-clock difference expected between two nodes (the one that granted, the one deciding)
    fence_lease_margin: float = Field(default=5.0, ge=0)

    # Security (see README "Authentication and authorization")
    #: shared by every node of a deployment: authenticates node-to-node calls (``/v1/internal``)
    deployment_secret: str = Field(default="", repr=False)
    #: read the deployment secret from this file instead (wins over ``deployment_secret``)
    deployment_secret_file: Path | None = None
    #: read the database password from this file; it replaces the password of the database URL
    database_password_file: Path | None = None
    #: Host headers served (comma separated; default: loopback names plus the API host/URL host)
    trusted_hosts: str = ""
    #: browser origins allowed by CORS (comma separated; default: none)
    cors_origins: str = ""
    #: where job entrypoints may come from when a cluster declares no ``artifact_roots``
    #: (comma separated path prefixes or ``scheme://`` URL prefixes; default: the pipelines
    #: shipped with Drover and ``<data_dir>/artifacts``)
    artifact_roots: str = ""
    #: Spark properties a non-admin may set (exact names; ``prefix.*`` for a family)
    spark_conf_allowed: str = DEFAULT_SPARK_CONF_ALLOWED
    #: node environment variables every driver inherits (everything else of it is withheld)
    driver_env_passthrough: str = DEFAULT_DRIVER_ENV
    #: the unprivileged Unix user the drivers of local and spark-submit clusters run as;
    #: ``{team}`` in it is the job's team (``drover-{team}``: one user per team, so one team's
    #: drivers cannot read another's checkpoints). Empty: the node's own user, development
    #: only (production refuses to run such clusters' drivers)
    driver_user: str = ""
    #: JWTs from the platform's SSO: issuer (``iss``), audience (``aud``), keys (JWKS file or URL)
    jwt_issuer: str = ""
    jwt_audience: str = ""
    jwt_jwks_file: Path | None = None
    jwt_jwks_url: str = ""
    #: the claim carrying role bindings: ``{"team": "role"}`` or ``["team:role", ...]``
    jwt_roles_claim: str = "drover_roles"
    jwt_algorithms: str = "RS256,ES256"
    #: an external permission center (``POST`` per decision); empty = built-in role bindings
    authz_url: str = ""
    authz_cache_seconds: float = Field(default=5.0, ge=0)
    authz_timeout: float = Field(default=2.0, gt=0)
    #: who may mark a cluster abnormal (and clear the mark): ``team-operators`` (an operator of
    #: any team; the mark names the team in every event) or ``platform-operators`` (operators
    #: of every team, ``*``, only)
    cluster_marks: Literal["team-operators", "platform-operators"] = "team-operators"
    #: seconds a verified API token is trusted without reading the store again. A revocation
    #: or role change made through this node applies at once; one made through another node or
    #: the CLI within this many seconds (like ``authz_cache_seconds``). It saves a store read
    #: and a hand-over to a thread on every request of a caller seen within it (a polling UI,
    #: an internal service); 0 reads the token on every request
    token_cache_seconds: float = Field(default=2.0, ge=0, le=60)
    #: seconds between two fetches of the JWT issuer's keys caused by a token naming a key id
    #: the node does not know (a rotation); unknown ids within it are refused without a fetch
    jwt_keys_refetch_seconds: float = Field(default=30.0, ge=0)
    #: credentials that do not verify, per client address, within ``auth_failure_window``
    #: seconds, before that address is answered 429 (a credential this node verified lately
    #: still passes; probes and metrics are never throttled); 0: no throttle
    auth_failure_limit: int = Field(default=30, ge=0)
    auth_failure_window: float = Field(default=60.0, gt=0)
    #: the longest request body a route reads (bytes); a longer one is a 413 before more than
    #: this is read, chunked or not
    api_max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=1024 * 1024 * 1024)

    # API
    #: serve the API's reference page (Swagger UI, from the node's own files) at ``/docs``;
    #: default: on in development, off in production
    api_docs: bool | None = None
    #: threads serving the API's blocking work at once (route handlers, store reads), in each of
    #: its two sets (its own for the hot routes and the checks, ``api/threads.py``; anyio's for
    #: the other routes); the API's store keeps as many connections open, so no request opens one
    #: (see ``make_engine``)
    api_threads: int = Field(default=32, ge=1, le=256)
    #: job documents a node's API keeps made (``api/documents.py``: pages of ``GET /v1/jobs`` and
    #: ``GET /v1/jobs/{name}`` answer an unchanged job from there; 2-5 KB each with its key,
    #: 1.7-2.9 KiB measured for a job without a run); 0: make every one anew
    api_job_documents: int = Field(default=5000, ge=0, le=1_000_000)
    #: seconds an ``Idempotency-Key`` (and the first answer to it) is kept
    idempotency_ttl: float = Field(default=86400.0, ge=60, le=30 * 86400)

    # Spark
    #: SPARK_HOME; default: the installed pyspark package
    spark_home: Path | None = None
    spark_local_master: str = "local[2]"
    #: Python the Spark drivers run (default: this interpreter)
    spark_python: str = ""

    # Reconciler
    reconcile_interval: float = Field(default=2.0, gt=0)
    restart_max_attempts: int = Field(default=3, ge=1)
    restart_validity_interval: float = Field(default=600.0, gt=0)
    restart_backoff_initial: float = Field(default=2.0, ge=0)
    restart_backoff_max: float = Field(default=60.0, ge=0)
    #: seconds a stop or restart waits for a self-fencing pipeline to finish its micro-batch
    #: and exit before it is killed, unless the request says (``grace_seconds``); 0 (the
    #: default): a stop kills at once unless it asks for grace
    stop_grace_seconds: float = Field(default=0.0, ge=0, le=86400)
    #: the same for an upgrade (a spec change of a running job) and a rollback, which are
    #: graceful by default
    upgrade_grace_seconds: float = Field(default=30.0, ge=0, le=86400)
    #: seconds after a run's latest submission was decided (its intent or its latest reissue)
    #: during which a run without a recorded submission id that its cluster does not list is
    #: "in doubt": not submitted again (a timed-out submission may still become a driver: a
    #: standalone master waits up to ``spark.rpc.askTimeout`` on a create its client gave up on
    #: after 3 s), nor closed; a driver that shows up meanwhile is adopted. Default 60 s: twenty
    #: times the standalone client timeout, and a truly lost submission is retried about a
    #: minute later (scheduler/decisions/planning.py says more). The same on every node.
    submit_in_doubt_grace: float = Field(default=DEFAULT_IN_DOUBT_GRACE_S, ge=0, le=3600)

    # Cluster monitor (scheduler.decisions.health): every node probes the clusters its groups use
    #: probe the clusters at all (off: this node never votes nor decides health)
    health_monitor: bool = True
    #: seconds between two probe rounds (each round is jittered by +-20 %)
    health_probe_interval: float = Field(default=5.0, gt=0)
    #: a probe that has not answered within this many seconds is a failed vote
    health_probe_timeout: float = Field(default=3.0, gt=0)
    #: a node's latest vote counts in the majority only if it is at most this old (seconds)
    health_vote_freshness: float = Field(default=20.0, gt=0)
    #: this many failed probes (all nodes) within the window make a cluster THRESHOLD_ABNORMAL
    health_threshold_count: int = Field(default=6, ge=1)
    health_threshold_window: float = Field(default=60.0, gt=0)
    #: an automatic abnormal state returns to NORMAL after this many seconds without a failure
    health_quiet_period: float = Field(default=60.0, ge=0)

    # Checkpoint replication (scheduler.loops.replication): each node mirrors the checkpoints of the
    # replicated jobs it owns into their other cluster's storage root
    #: run the replication loop at all (off: this node replicates nothing)
    replication: bool = True
    #: seconds between two replication rounds (each jittered by +-20 %)
    replication_interval: float = Field(default=5.0, gt=0)
    #: a round stops copying after this many seconds (the next round goes on from there)
    replication_round_seconds: float = Field(default=30.0, gt=0)
    #: jobs replicated at once in a round (threads; copies mostly wait on storage)
    replication_parallelism: int = Field(default=2, ge=1, le=64)

    # Observability (README "Observability": logs, metrics)
    #: ``json``: one JSON object per line (what log shippers read); ``text``: for people
    log_format: Literal["json", "text"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: level of Ray's own loggers (its start-up notices, worker warnings): quiet by default
    ray_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "ERROR"
    #: seconds between two collections of the actors' figures for ``/metrics``
    metrics_interval: float = Field(default=5.0, gt=0)
    #: seconds the figures ``/metrics`` reads from the store (jobs by state, ...) are reused
    metrics_store_ttl: float = Field(default=5.0, ge=0)
    #: seconds between two writes of the progress pipelines report (0: each report at once)
    progress_flush_interval: float = Field(default=2.0, ge=0)
    #: a job's progress history keeps one sample every this many seconds, for this long
    progress_sample_interval: float = Field(default=30.0, gt=0)
    progress_history: float = Field(default=3600.0, gt=0)
    #: a job without its own stall_after is stalled after no progress for the longer of this
    #: many seconds and this many of its observed trigger intervals (scheduler.decisions.stalls)
    stall_after_min: float = Field(default=60.0, ge=5.0)
    stall_after_triggers: float = Field(default=5.0, gt=0)
    #: seconds between two stall checks of a group's jobs by their owner
    stall_check_interval: float = Field(default=5.0, gt=0)
    #: run the alert loop (raise/resolve alerts, send the outbox); off: this node sends nothing
    alerts: bool = True
    #: seconds between two rounds of the alert loop
    alert_interval: float = Field(default=2.0, gt=0)
    #: internal destinations alert channels may send to nonetheless (comma separated host
    #: names, addresses, networks: ``hooks.internal,10.1.0.0/16``); every other destination
    #: must be public (scheduler.decisions.destinations)
    alert_allowed_hosts: str = ""

    # Failovers (scheduler/decisions/operations/): every node executes the operations of its groups
    #: run the operations executor on this node (off: it never executes nor starts failovers)
    failover_executor: bool = True
    #: seconds between two rounds of the executor
    failover_interval: float = Field(default=1.0, gt=0)
    #: items of one operation under way at once (an operation may ask for another number)
    failover_parallelism: int = Field(default=32, ge=1, le=1000)
    #: seconds a stale driver gets to exit once a fence check answered it "superseded"
    failover_fence_exit_grace: float = Field(default=15.0, ge=0)
    #: seconds a job's owner may take to drain it from the source (0: no limit)
    failover_drain_timeout: float = Field(default=600.0, ge=0)
    #: seconds a fenced run's driver may take to be told it is superseded (0: no limit)
    failover_fence_timeout: float = Field(default=0.0, ge=0)
    #: seconds a moved job may take to be RUNNING on the target (0: no limit)
    failover_start_timeout: float = Field(default=900.0, ge=0)
    #: seconds after a cluster's last abnormal period during which automatic failover never
    #: moves jobs onto it (unless an operator cleared it: ``drover failover auto clear``)
    failover_auto_cooldown: float = Field(default=3600.0, ge=0)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("DROVER_CONFIG")
        if config_file:
            if not Path(config_file).is_file():
                raise InvalidInput(f"DROVER_CONFIG names no file: {config_file}")
            try:
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
            except tomllib.TOMLDecodeError as exc:
                raise InvalidInput(f"DROVER_CONFIG {config_file} is not valid TOML: {exc}") from exc
        return tuple(sources)

    @field_validator("groups")
    @classmethod
    def _check_groups(cls, value: str) -> str:
        parse_groups(value)
        return value

    @field_validator("zk_auth")
    @classmethod
    def _check_zk_auth(cls, value: str) -> str:
        _check_digest(value, "DROVER_ZK_AUTH")
        return value

    @field_validator("deployment_secret_file", "database_password_file", "jwt_jwks_file")
    @classmethod
    def _check_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no such file: {value}")
        return value

    @model_validator(mode="after")
    def _refuse_unknown_file_settings(self) -> Settings:
        """A ``DROVER_*_FILE`` variable that names no setting is a mistake (a secret meant to be
        read from a file), never something to ignore: ``DROVER_DATABASE_URL_FILE`` must not
        leave a node on its default SQLite store."""
        known = {f"DROVER_{name.upper()}" for name in type(self).model_fields}
        unknown = sorted(
            name
            for name in os.environ
            if name.startswith("DROVER_") and name.endswith("_FILE") and name not in known
        )
        if unknown:
            files = sorted(n for n in known if n.endswith("_FILE"))
            raise ValueError(
                f"{', '.join(unknown)}: no such setting (file settings: {', '.join(files)})"
            )
        return self

    def __repr_args__(self) -> Any:
        """Every setting but secrets: URLs without their passwords (``repr``, ``str``)."""
        for name, value in super().__repr_args__():
            yield name, _without_password(value) if isinstance(value, str) else value

    @field_validator("alert_allowed_hosts")
    @classmethod
    def _check_alert_allowed_hosts(cls, value: str) -> str:
        Destinations.parse(value)
        return value

    @model_validator(mode="after")
    def _refuse_unsafe_production(self) -> Settings:
        if self.environment != "production":
            return self
        if self.resolved_database_url.startswith("sqlite"):
            raise ValueError("production mode needs a MySQL DROVER_DATABASE_URL, not SQLite")
        secret = self.resolved_deployment_secret
        if secret == DEVELOPMENT_SECRET or len(secret) < 32:
            raise ValueError(
                "production mode needs DROVER_DEPLOYMENT_SECRET(_FILE) of at least 32 characters "
                "(not the development default)"
            )
        if self.jwt_issuer and not self.jwt_audience:
            raise ValueError(
                "production mode with JWTs (DROVER_JWT_ISSUER) needs DROVER_JWT_AUDIENCE: "
                "else a token the issuer made for any other service is taken here"
            )
        return self

    @model_validator(mode="after")
    def _check_health_timing(self) -> Settings:
        if self.health_vote_freshness <= self.health_probe_interval:
            raise ValueError(
                "health_vote_freshness must be longer than health_probe_interval "
                "(else no vote is ever fresh)"
            )
        return self

    @cached_property
    def resolved_database_url(self) -> str:
        if not self.database_url:
            return f"sqlite:///{(self.data_dir / 'drover.db').resolve()}"
        if self.database_password_file is None:
            return self.database_url
        from sqlalchemy.engine import make_url

        password = _read_secret(self.database_password_file, "DROVER_DATABASE_PASSWORD_FILE")
        url = make_url(self.database_url).set(password=password)
        return url.render_as_string(hide_password=False)

    @cached_property
    def resolved_deployment_secret(self) -> str:
        if self.deployment_secret_file is not None:
            return _read_secret(self.deployment_secret_file, "DROVER_DEPLOYMENT_SECRET_FILE")
        if self.deployment_secret:
            return self.deployment_secret
        return DEVELOPMENT_SECRET if self.environment == "development" else ""

    @cached_property
    def resolved_zk_auth(self) -> str:
        """The ZooKeeper digest credential (``user:password``), or "" for none."""
        if self.zk_auth_file is not None:
            return _check_digest(
                _read_secret(self.zk_auth_file, "DROVER_ZK_AUTH_FILE"), "DROVER_ZK_AUTH_FILE"
            )
        return self.zk_auth

    @cached_property
    def resolved_trusted_hosts(self) -> list[str]:
        if self.trusted_hosts.strip():
            return _csv(self.trusted_hosts)
        from urllib.parse import urlparse

        hosts = ["127.0.0.1", "localhost", "::1", "[::1]"]
        for host in (self.api_host, urlparse(self.resolved_api_url).hostname or ""):
            if host and not _is_wildcard(host) and host not in hosts:
                hosts.append(host)
        return hosts

    @cached_property
    def resolved_artifact_roots(self) -> list[str]:
        if self.artifact_roots.strip():
            return _csv(self.artifact_roots)
        shipped = Path(__file__).resolve().parents[1] / "pipelines"
        return [f"{shipped}/", f"{(self.data_dir / 'artifacts').resolve()}/"]

    @property
    def spark_conf_allow_list(self) -> list[str]:
        return _csv(self.spark_conf_allowed)

    @property
    def driver_env_names(self) -> list[str]:
        return _csv(self.driver_env_passthrough)

    @cached_property
    def resolved_api_url(self) -> str:
        return self.api_url or f"http://{self.api_host}:{self.api_port}"

    @cached_property
    def resolved_spark_home(self) -> Path:
        if self.spark_home is not None:
            return self.spark_home
        # where the pyspark package is, without importing it (py4j and 110 modules, ~9 MiB
        # resident in a process that only starts spark-submit)
        from importlib.util import find_spec

        spec = find_spec("pyspark")
        if spec is None or not spec.submodule_search_locations:
            raise ClusterError("no SPARK_HOME: set DROVER_SPARK_HOME or install pyspark")
        return Path(next(iter(spec.submodule_search_locations))).resolve()

    @cached_property
    def resolved_spark_python(self) -> str:
        import sys

        return self.spark_python or sys.executable

    @property
    def health_policy(self) -> HealthPolicy:
        return HealthPolicy(
            vote_freshness=self.health_vote_freshness,
            threshold_count=self.health_threshold_count,
            threshold_window=self.health_threshold_window,
            quiet_period=self.health_quiet_period,
        )

    @property
    def failover_timing(self) -> FailoverTiming:
        from scheduler.decisions.operations.failover import Timing

        return Timing(
            fence_exit_grace=self.failover_fence_exit_grace,
            drain_timeout=self.failover_drain_timeout,
            fence_timeout=self.failover_fence_timeout,
            start_timeout=self.failover_start_timeout,
            lease_margin=self.fence_lease_margin,
        )

    @property
    def stall_policy(self) -> StallPolicy:
        return StallPolicy(minimum=self.stall_after_min, triggers=self.stall_after_triggers)

    @property
    def serve_api_docs(self) -> bool:
        return self.api_docs if self.api_docs is not None else self.environment != "production"

    @cached_property
    def alert_destinations(self) -> Destinations:
        return Destinations.parse(self.alert_allowed_hosts)

    @property
    def group_roles(self) -> dict[str, Role]:
        return parse_groups(self.groups)

    def membership_settings(self) -> MembershipSettings:
        """What the Membership actor needs of these settings, as a plain value it can unpickle
        without pydantic."""
        return MembershipSettings(
            node_id=self.node_id,
            az=self.az,
            cloud=self.cloud,
            resolved_api_url=self.resolved_api_url,
            zk_hosts=self.zk_hosts,
            zk_namespace=self.zk_namespace,
            zk_session_timeout=self.zk_session_timeout,
            degraded_mode=self.degraded_mode,
            groups=tuple(self.group_roles.items()),
            log_format=self.log_format,
            log_level=self.log_level,
            ray_log_level=self.ray_log_level,
            resolved_zk_auth=self.resolved_zk_auth,
        )

    @property
    def runs_dir(self) -> Path:
        return (self.data_dir / "runs").resolve()

    @property
    def checkpoints_dir(self) -> Path:
        return (self.data_dir / "checkpoints").resolve()


#: ``scheme://user:password@`` in a URL (the password part is what never prints)
_URL_PASSWORD = re.compile(r"(//[^/@:\s]*):[^@/\s]*@")


def _without_password(text: str) -> str:
    return _URL_PASSWORD.sub(r"\1:***@", text)


def _csv(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def _read_secret(path: Path, setting: str) -> str:
    """A secret from a file (trailing newline dropped); the error never shows the content."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"{setting}: cannot read {path}: {exc.strerror}") from None
    if not value:
        raise ValueError(f"{setting}: {path} is empty")
    return value


def _check_digest(value: str, setting: str) -> str:
    """A ZooKeeper digest credential: ``user:password``, both non-empty (never shown)."""
    user, colon, password = value.partition(":")
    if value and not (user and colon and password):
        raise ValueError(f"{setting} must be user:password (a ZooKeeper digest credential)")
    return value


def parse_groups(spec: str) -> dict[str, Role]:
    """``"g1:active,g2:backup"`` → ``{"g1": "active", "g2": "backup"}``; a bare name is active."""
    roles: dict[str, Role] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, role = item.partition(":")
        role = role or "active"
        if not name or role not in ("active", "backup"):
            raise ValueError(f"bad group entry {item!r}: expected name or name:active|backup")
        roles[name] = role  # type: ignore[assignment]
    return roles


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with a one-line error on bad values."""
    from pydantic import ValidationError

    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise InvalidInput(f"invalid configuration DROVER_{where.upper()}: {first['msg']}") from exc


def _is_wildcard(host: str) -> bool:
    """An "any address" listen host (IPv4 or IPv6): never a name a client sends in ``Host``."""
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False
