"""Schemathesis over the whole published OpenAPI, in process, on a real store: the server
answers as its document says.

The node's FastAPI app runs in this process, called by a platform admin (no network; no actors,
so nothing reaches Spark: the API only writes to the store) on a store holding clusters, groups,
jobs, runs and events. Every
phase the installed schemathesis has runs (examples, coverage, fuzzing, stateful), at least
``MIN_REQUESTS`` requests in all, and the run must show:

- no 5xx, and no failed schemathesis check (status codes, content types, response schemas,
  headers, ``Allow`` on 405, schema-invalid data rejected, resources usable after creation and
  gone after deletion);
- every 4xx/5xx answer an RFC 9457 problem document (``application/problem+json`` with ``type``,
  ``title`` and the response's ``status``) that carries no SQL;
- every request answered with 4xx left the store exactly as it was (row counts of every table a
  request can write, and the versioned fields of every job, cluster, group, run and token, read
  before and after that request).

Left out: revoking tokens and changing team members (they can take the admin's own credential
away; ``test_schemathesis_auth.py`` runs them), and the ``positive_data_acceptance`` check,
which expects every schema-valid request to succeed. Some rules are not expressible in the
schema and the API refuses them with 412/422: a cluster's URLs per kind, a group naming an
existing cluster, a storage root no other cluster uses, ``If-Match`` naming an older version.

The run prints its figures (requests, statuses, phases, seconds); ``-s`` shows them.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
import sqlalchemy as sa
from schemathesis.engine import events, from_schema

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.backend import app_name_for
from scheduler.core.records import JobSpec
from scheduler.core.states import DesiredState, JobState, Priority, RunState
from scheduler.decisions.catalog import ClusterSpec
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import ledger
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers
from tests.support.fakes import FakeBackend, FakeBackends

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

MIN_REQUESTS = 1000
#: the checks that hold the server to its published contract: each must
#: run on every answer, and none may fail. Enabled by name, so a change of schemathesis'
#: defaults cannot switch them off silently.
CONFORMANCE_CHECKS = (
    "not_a_server_error",  # no 5xx
    "status_code_conformance",  # no status the operation does not document
    "content_type_conformance",  # no media type the operation does not document
    "response_headers_conformance",  # documented response headers present and valid
    "response_schema_conformance",  # bodies match their documented schema
    "negative_data_rejection",  # what the schema forbids is refused
    "missing_required_header",  # a required header left out is refused
    "unsupported_method",  # 405 for methods a path does not take
    "allow_header_conformance",  # the 405's Allow names the methods it takes
    "use_after_free",  # deleted resources are gone
    "ensure_resource_availability",  # created resources can be read
)
#: examples per operation in the fuzzing phase (with the other phases: ~1,600 requests)
MAX_EXAMPLES = int(os.environ.get("DROVER_SCHEMATHESIS_EXAMPLES", "20"))
SEED = int(os.environ.get("DROVER_SCHEMATHESIS_SEED", "20260704"))
#: seconds an in-process answer may take: not a latency bound (the suite runs this module at
#: nice 19 beside the e2e tests, where one request can wait seconds for a core)
ANSWER_TIMEOUT_S = 120.0
PIPELINE = "/opt/pipelines/orders_enrich.py"


def seed(store: Store) -> None:
    """Clusters, groups, jobs (one with a run) the generated requests find, change and delete."""
    with store.transaction() as s:
        for name, port in (("spark-a", 7177), ("spark-b", 7178)):
            # unroutable ports: no actor runs here, and nothing would answer if one did
            catalog_store.create_cluster(
                s,
                name,
                ClusterSpec(
                    kind="standalone",
                    storage_root=f"/var/drover-test/{name}",
                    master_url=f"spark://127.0.0.1:{port}",
                    rest_url=f"http://127.0.0.1:{port + 1000}",
                    ui_url=f"http://127.0.0.1:{port + 2000}",
                    az=f"az-{name[-1]}",
                ),
            )
        catalog_store.create_group(s, "ads", primary_cluster="spark-a", failover_cluster="spark-b")
        catalog_store.create_group(s, "empty", primary_cluster="spark-b")
        for name, group, desired in [
            ("orders-enrich", "default", DesiredState.STOPPED),
            ("clicks-rollup", "ads", DesiredState.RUNNING),
            ("café-订单", "ads", DesiredState.STOPPED),
        ]:
            jobs_store.create_job(
                s,
                JobSpec(
                    name=name,
                    entrypoint=PIPELINE,
                    group=group,
                    team="ads",
                    priority=Priority.HIGH,
                    args=("--window", "5m"),
                    conf={"spark.sql.shuffle.partitions": "4"},
                    desired_state=desired,
                ),
                cause="test",
                node_id="seed",
            )
    with store.transaction() as s:
        job = jobs_store.get_job(s, "clicks-rollup")
        run = ledger.create_run(
            s,
            job,
            cluster="spark-a",
            node_id="seed",
            owner_epoch=0,
            checkpoint_location="file:///var/drover-test/spark-a/clicks-rollup/checkpoint",
            app_name_for=app_name_for,
        )
        ledger.transition_job(
            s,
            job,
            JobState.SUBMITTING,
            reason="seeded",
            cause="test",
            node_id="seed",
            current_run_id=run.id,
            cluster_name="spark-a",
        )
        ledger.update_run(s, run, state=RunState.STARTING, submission_id="driver-seed-0001")


#: one round trip per table: row counts, and the fields every write to a row moves
_SNAPSHOT = {
    "counts": "SELECT (SELECT COUNT(*) FROM clusters), (SELECT COUNT(*) FROM scheduling_groups),"
    " (SELECT COUNT(*) FROM jobs), (SELECT COUNT(*) FROM runs),"
    " (SELECT COUNT(*) FROM job_events), (SELECT COUNT(*) FROM audit_log),"
    " (SELECT COUNT(*) FROM cluster_health_events), (SELECT COUNT(*) FROM teams),"
    " (SELECT COUNT(*) FROM identities), (SELECT COUNT(*) FROM role_bindings),"
    " (SELECT COUNT(*) FROM api_tokens)",
    "jobs": "SELECT name, version, spec_version, desired_state, state, updated_at FROM jobs",
    "clusters": "SELECT name, version, health, updated_at FROM clusters",
    "groups": "SELECT name, version, updated_at FROM scheduling_groups",
    "runs": "SELECT id, state FROM runs",
    "tokens": "SELECT id, revoked_at FROM api_tokens",
}


def snapshot(store: Store) -> dict[str, Any]:
    """What a rejected request must leave as it was (``inspection.table_counts`` and more, read in
    one connection: the test takes one after every request)."""
    with store.engine.connect() as conn:
        return {key: sorted(conn.execute(sa.text(sql)).all()) for key, sql in _SNAPSHOT.items()}


def problem_violation(status: int, content_type: str, content: bytes) -> str | None:
    """Why an error response is not an RFC 9457 problem document (None when it is)."""
    if not content_type.startswith("application/problem+json"):
        return f"content type {content_type!r}"
    try:
        body = json.loads(content)
    except ValueError:
        return f"body is not JSON: {content[:80]!r}"
    if not isinstance(body, dict):
        return f"body is not an object: {body!r:.80}"
    if not (isinstance(body.get("type"), str) and isinstance(body.get("title"), str)):
        return f"no type/title: {body!r:.120}"
    if body.get("status") != status:
        return f"status member {body.get('status')!r} is not {status}"
    if "[SQL" in content.decode("utf-8", "replace") or "parameters:" in str(body.get("detail")):
        return f"SQL in the problem: {body!r:.200}"
    return None


@dataclass
class Tally:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    per_phase: Counter[str] = field(default_factory=Counter)
    not_problems: list[str] = field(default_factory=list)
    changed_by_rejected: list[str] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    phases: dict[str, str] = field(default_factory=dict)
    #: how many responses each check judged (a check that never ran proves nothing)
    checks_run: Counter[str] = field(default_factory=Counter)


class Witness:
    """ASGI wrapper around the app: sees every request schemathesis sends, snapshots the store
    before and after it, and checks what the app answered."""

    def __init__(self, app: Any, store: Store, tally: Tally) -> None:
        self.app, self.store, self.tally = app, store, tally
        #: the store as the last request left it (nothing else writes to it during the run)
        self.state = snapshot(store)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        before = self.state
        answer: dict[str, Any] = {"body": b""}

        async def observe(message: Any) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in message["headers"]}
                answer["content_type"] = headers.get("content-type", "")
            elif message["type"] == "http.response.body":
                answer["body"] += message.get("body", b"")
            await send(message)

        await self.app(scope, receive, observe)
        status = answer["status"]
        self.tally.requests += 1
        self.tally.statuses[status] += 1
        where = f"{scope['method']} {scope['path']}?{scope['query_string'].decode()} -> {status}"
        if status >= 400:
            why = problem_violation(status, answer["content_type"], answer["body"])
            if why is not None:
                self.tally.not_problems.append(f"{where}: {why}")
        self.state = snapshot(self.store)
        if 400 <= status < 500 and self.state != before:
            self.tally.changed_by_rejected.append(f"{where}: {answer['body'][:200]!r}")


def run_schemathesis(store: Store, settings: Settings) -> Tally:
    tally = Tally()
    # schemathesis' in-process client calls itself "testserver"
    # the brake on failed credentials is off: schemathesis sends hundreds of bad credentials
    # from one address on purpose, and expects each answered 401/403 (the brake has its own tests)
    node = settings.model_copy(
        update={"trusted_hosts": "testserver,127.0.0.1,localhost", "auth_failure_limit": 0}
    )
    # the seeded run's driver log, from a cluster that answers (the seeded URLs are unroutable)
    cluster = FakeBackend()
    for stream in cluster.log_streams:
        cluster.logs[("driver-seed-0001", stream)] = bytearray(f"the {stream} of a run\n".encode())
    backends = FakeBackends(**{"spark-a": cluster, "spark-b": FakeBackend()})
    app = Witness(create_app(NodeContext(node, store, backends=backends)), store, tally)
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "request-timeout": ANSWER_TIMEOUT_S,
            # a platform admin: who may do what is test_schemathesis_auth.py's business
            "headers": auth_headers(admin_token(store)),
            "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
            "checks": {
                **{name: {"enabled": True} for name in CONFORMANCE_CHECKS},
                "positive_data_acceptance": {"enabled": False},
            },
        }
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
    # the calls that can take the caller's own credential away (revoke its token, unbind it):
    # every later request would be a 401; test_schemathesis_auth.py runs them
    schema = schema.exclude(method="DELETE", path="/v1/tokens/{token_id}").exclude(
        path="/v1/teams/{team}/members/{identity}"
    )
    phase = "?"
    for event in from_schema(schema).execute():
        if isinstance(event, events.PhaseStarted):
            phase = event.phase.name.value
        elif isinstance(event, events.PhaseFinished):
            tally.phases[event.phase.name.value] = (
                event.status.value
                if event.phase.is_enabled
                else f"skipped: {event.phase.skip_reason}"
            )
        elif isinstance(event, events.ScenarioFinished):
            tally.per_phase[phase] += len(event.recorder.interactions)
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    tally.checks_run[check.name] += 1
                    if check.failure_info is None:
                        continue
                    failure = check.failure_info.failure
                    interaction = event.recorder.interactions.get(case_id)
                    request = interaction.request if interaction is not None else None
                    sent = request and f"{request.method} {request.uri} {request.body!r:.160}"
                    tally.failed_checks.append(
                        f"{check.name} on {event.recorder.label}: {failure.title}: "
                        f"{failure.message[:300]} [{sent}]"
                    )
        elif isinstance(event, events.NonFatalError):
            tally.errors.append(repr(event.value))
        elif isinstance(event, events.FatalError):
            tally.errors.append(repr(event.exception))
    return tally


#: the stores the run covers: MariaDB, the production store, by default (a run is ~5,000 requests
#: and ~3 minutes of one core); ``DROVER_SCHEMATHESIS_STORES=sqlite,mysql`` adds the embedded
#: one (test_schemathesis_auth.py runs its callers on SQLite in every run)
STORES = [s.strip() for s in os.environ.get("DROVER_SCHEMATHESIS_STORES", "mysql").split(",")]


@pytest.mark.parametrize("empty_store", STORES, indirect=True)
def test_schemathesis_finds_nothing(store: Store, settings: Settings) -> None:
    seed(store)
    started = time.monotonic()
    tally = run_schemathesis(store, settings)
    seconds = time.monotonic() - started
    print(
        f"\nschemathesis {schemathesis.__version__} on {store.engine.dialect.name}: "
        f"{tally.requests} requests in {seconds:.1f} s (seed {SEED}, {MAX_EXAMPLES} examples); "
        f"statuses {dict(sorted(tally.statuses.items()))}; requests per phase "
        f"{dict(tally.per_phase)}; phases {tally.phases}; checks run {dict(tally.checks_run)}"
    )
    assert tally.errors == [], tally.errors[:5]
    for phase in ("examples", "coverage", "fuzzing", "stateful"):
        assert phase in tally.phases and not tally.phases[phase].startswith("skipped"), tally.phases
    assert tally.requests >= MIN_REQUESTS
    assert not [s for s in tally.statuses if s >= 500], tally.statuses
    assert tally.not_problems == [], tally.not_problems[:10]
    assert tally.changed_by_rejected == [], tally.changed_by_rejected[:10]
    assert tally.failed_checks == [], "\n".join(tally.failed_checks[:15])
    for check in (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    ):
        assert tally.checks_run[check] >= tally.requests // 2, (check, dict(tally.checks_run))
