"""What the published OpenAPI says beyond the routes: who must authenticate and how, the one
problem document, the tags, an example of every request body, ``Retry-After``, the server.

FastAPI builds the paths and schemas from the routes and models; :func:`finish` completes that
document (after ``api.glossary.complete``) so standard generators make a clean client of it:

- **Security**: bearer credentials (a Drover API token, or a JWT of the configured issuer) on
  every operation the route table (``api/security/rules.py``) protects; none on the probes and
  ``/metrics``; the deployment secret on ``/v1/internal`` (a run's fencing token, which opens its
  job's fence check, is that route's own business: a stale token is answered, not refused).
- **One problem document**: every error answer refers to ``#/components/schemas/Problem``
  (``api.problems.PROBLEM_REF``); the probes declare only what they answer.
- **Tags** declared, each with what it groups; ``info.contact`` and ``servers``.
- **An example of every request body** (:data:`REQUEST_EXAMPLES`, checked against its schema by
  ``tests/unit/test_openapi_contract.py``).
- **Retry-After** on every 429 and on the 409/503 answers that may carry it.
"""

from __future__ import annotations

from typing import Any

from api.problems import PROBLEM_SCHEMAS
from api.security.rules import RULES, Target
from scheduler.decisions.identity import NODE_SECRET_HEADER, Action

#: the credential schemes (``components.securitySchemes``)
SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    "apiToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "drv_...",
        "description": "A Drover API token (`drover token create`, `POST /v1/tokens`): "
        "`Authorization: Bearer drv_...`.",
    },
    "jwt": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "A JWT of the platform's SSO issuer (`DROVER_JWT_*` settings): "
        "`Authorization: Bearer <JWT>`; roles from its roles claim.",
    },
    "nodeSecret": {
        "type": "apiKey",
        "in": "header",
        "name": NODE_SECRET_HEADER,
        "description": "The deployment secret: calls between the nodes of one deployment only.",
    },
}
BEARER: list[dict[str, list[str]]] = [{"apiToken": []}, {"jwt": []}]

#: every tag, with what it groups (in the order documentation shows them)
TAGS: dict[str, str] = {
    "jobs": "Long-running PySpark jobs: create, change, start, stop, restart, delete; their "
    "runs, events, progress and driver logs.",
    "revisions": "Every spec change of a job is a revision: list, compare, roll back.",
    "fence": "The check a self-fencing pipeline makes before each micro-batch commit.",
    "operations": "Bulk starts, stops and restarts by selector: plan (dry run), execute, "
    "follow, cancel.",
    "failovers": "Move a cluster's jobs to another cluster without a double run: plan, "
    "execute, follow, cancel.",
    "clusters": "Spark clusters: where jobs run, their URLs, storage roots and caps.",
    "cluster health": "A cluster's health as the nodes' probes vote it; manual abnormal marks.",
    "groups": "Scheduling groups: a primary (and failover) cluster and the nodes managing it.",
    "membership": "Drover's nodes as membership sees them; draining a node before maintenance.",
    "replication": "Checkpoint replicas on the failover cluster and their lag.",
    "quotas": "Per-business submission rates and dedicated groups (the submission gate).",
    "alerts": "Alerts (job failed, stalled, cluster abnormal) and the channels they go to.",
    "identities": "Who calls: whoami, teams and their members, API tokens.",
    "audit": "Who changed what, with the record before and after.",
    "overview": "The fleet at a glance.",
    "health": "Probes for load balancers and orchestrators (no credential).",
    "metrics": "Prometheus metrics (no credential).",
}

#: what each probe answers, and nothing else (no credential, any Host, no body)
PROBE_RESPONSES: dict[str, tuple[int, ...]] = {
    "/healthz": (),
    "/readyz": (503,),
    "/metrics": (),
}

AT = "2026-11-25T03:12:45Z"
#: an example of every request body, by the body's schema name
REQUEST_EXAMPLES: dict[str, dict[str, Any]] = {
    "JobCreate": {
        "name": "orders-enrich",
        "entrypoint": "/opt/pipelines/orders_enrich.py",
        "group": "ads",
        "team": "ads",
        "business": "retail",
        "priority": "high",
        "args": ["--window", "5m"],
        "conf": {"spark.sql.shuffle.partitions": "8"},
        "labels": {"env": "prod"},
        "desired_state": "RUNNING",
    },
    "JobUpdate": {"args": ["--window", "10m"], "labels": {"env": "prod", "tier": "gold"}},
    "RollbackRequest": {"revision": 3},
    "ClusterCreate": {
        "name": "spark-a",
        "kind": "standalone",
        "storage_root": "file:///var/drover/spark-a",
        "master_url": "spark://10.0.1.20:7077",
        "rest_url": "http://10.0.1.20:6066",
        "ui_url": "http://10.0.1.20:8080",
        "az": "az-a",
        "cloud": "aws-eu-west-1",
    },
    "ClusterUpdate": {"max_running_apps": 200, "az": "az-a"},
    "MarkAbnormal": {"reason": "AZ a network maintenance"},
    "ClearAbnormal": {"reason": "maintenance over"},
    "GroupCreate": {"name": "ads", "primary_cluster": "spark-a", "failover_cluster": "spark-b"},
    "GroupUpdate": {"failover_cluster": "spark-b"},
    "AlertChannelCreate": {
        "name": "orders-slack",
        "kind": "slack",
        "url": "https://hooks.example/T0/B0/x",
        "min_severity": "critical",
    },
    "TeamCreate": {"name": "orders", "description": "the orders pipelines"},
    "MemberPut": {"role": "operator"},
    "TokenCreate": {
        "identity": "alice",
        "scopes": ["read", "write"],
        "expires_in_seconds": 86400,
        "description": "alice's laptop",
    },
    "FailoverCreate": {
        "source": "spark-a",
        "selector": {"priorities": ["high"]},
        "reason": "zone outage in az-a",
        "dry_run": True,
    },
    "BulkCreate": {
        "kind": "restart",
        "selector": {"teams": ["ads"], "priorities": ["high"]},
        "reason": "CHG-1234",
        "dry_run": True,
    },
    "AutoFailoverPolicy": {"enabled": True, "after_seconds": 120, "min_priority": "high"},
    "AutoSwitchIn": {"reason": "INC-4711: failing back by hand"},
    "QuotaPut": {"rate": 5, "burst": 10},
}

_RETRY_AFTER = {
    "description": "seconds to wait before trying again",
    "schema": {"type": "integer", "minimum": 1, "maximum": 86400},
    "example": 1,
}


def finish(spec: dict[str, Any]) -> dict[str, Any]:
    """Complete the generated document (in place; returned): see the module docstring."""
    spec["info"]["contact"] = {
        "name": "the platform team that runs this Drover deployment (runbooks: docs/runbooks/)"
    }
    spec["servers"] = [
        {
            "url": "/",
            "description": "this node: any node of a deployment answers any request (a write "
            "reaches its job's owner)",
        }
    ]
    components = spec.setdefault("components", {})
    components.setdefault("schemas", {}).update(PROBLEM_SCHEMAS)
    components["securitySchemes"] = SECURITY_SCHEMES
    spec["security"] = BEARER
    used: set[str] = set()
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            used.update(operation.get("tags", ()))
            operation["security"] = _security(method.upper(), path)
            if path in PROBE_RESPONSES:
                _probe(operation, PROBE_RESPONSES[path])
            _request_example(components["schemas"], operation)
            _retry_after(operation)
    spec["tags"] = [{"name": name, "description": text} for name, text in TAGS.items()]
    unknown = sorted(used - set(TAGS))
    if unknown:
        raise RuntimeError(f"operations use undeclared tags {unknown}: describe them in TAGS")
    return spec


def _security(method: str, path: str) -> list[dict[str, list[str]]]:
    rule = RULES.get((method, path))
    if rule is None or rule.target is Target.PUBLIC:
        return []
    if rule.action is Action.INTERNAL:
        return [{"nodeSecret": []}]
    # the fence check also takes a run's fencing token (its description says so): not a
    # scheme of its own, since a token that is not current is answered 200 "superseded" there
    return BEARER


def _probe(operation: dict[str, Any], errors: tuple[int, ...]) -> None:
    """A probe declares its success answer and ``errors`` only."""
    responses = operation["responses"]
    kept = {s: r for s, r in responses.items() if str(s).startswith("2") or int(s) in errors}
    responses.clear()
    responses.update(kept)


def _request_example(schemas: dict[str, Any], operation: dict[str, Any]) -> None:
    body = operation.get("requestBody")
    if body is None:
        return
    media = body.get("content", {}).get("application/json")
    if media is None:
        return
    name = _schema_name(media.get("schema", {}))
    if name in REQUEST_EXAMPLES:
        media.setdefault("example", REQUEST_EXAMPLES[name])


def _schema_name(schema: dict[str, Any]) -> str:
    """The component a body's schema refers to (also through ``anyOf [ref, null]``)."""
    for option in [schema, *schema.get("anyOf", ())]:
        if "$ref" in option:
            return str(option["$ref"]).rsplit("/", 1)[-1]
    return ""


def _retry_after(operation: dict[str, Any]) -> None:
    """``Retry-After`` on 429 (always sent) and on 503 and an idempotent operation's 409
    (``idempotency-key-in-use``): sent when the wait is known."""
    idempotent = any(
        p.get("in") == "header" and str(p.get("name", "")).lower() == "idempotency-key"
        for p in operation.get("parameters", [])
    )
    for status, response in operation["responses"].items():
        code = str(status)
        if code == "429":
            response.setdefault("headers", {})["Retry-After"] = {**_RETRY_AFTER, "required": True}
        elif code == "503" or (code == "409" and idempotent):
            response.setdefault("headers", {})["Retry-After"] = dict(_RETRY_AFTER)
