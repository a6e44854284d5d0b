"""The API's vocabulary: what each field of the published schemas means, with an example.

The OpenAPI document is a contract the UI and other services build on: every field of every
schema has a description and an example. A model says it itself where it can
(``Field(description=..., examples=[...])``); fields that recur across many models (``name``,
``team``, ``created_at``, ``state`` ...) mean the same thing everywhere, and saying it once here
keeps the models short and the wording consistent. :func:`complete` fills, in the generated
document, what a model left out:

- ``"Schema.field"`` first (a field whose meaning depends on the model), then ``"field"``;
- a description or example the model gives itself always wins;
- nothing is invented: a field neither the model nor this table explains stays bare, and
  ``tests/unit/test_openapi_contract.py`` fails, naming it.

Parameters work the same way through :data:`PARAMETERS` (``"in:name"``, e.g. ``"query:team"``).
"""

from __future__ import annotations

from typing import Any, cast

#: "no example here": the field refers to a schema whose own fields carry the examples
NONE = object()

AT = "2026-11-25T03:12:45Z"
LATER = "2026-11-25T03:14:02Z"

#: ``"Schema.field"`` or ``"field"`` -> (description, example); an empty description keeps the
#: model's own and adds only the example
FIELDS: dict[str, tuple[str, Any]] = {
    # -- shared words --------------------------------------------------------------------------
    "name": ("the name: its identity, unique among its kind, never changes", "orders-enrich"),
    "team": ("the team that owns it (who may act on it follows from the team)", "ads"),
    "business": ("the business it serves (submission quotas are per business)", "retail"),
    "group": ("the scheduling group (the primary cluster and the nodes that manage it)", "ads"),
    "cluster": ("the Spark cluster", "spark-a"),
    "priority": ("`high` before `normal` before `low` (submissions, failovers)", "high"),
    "created_at": ("when it was created (UTC)", AT),
    "updated_at": ("when it last changed (UTC)", LATER),
    "started_at": ("when it started (UTC)", AT),
    "finished_at": ("when it ended (UTC); null while it runs", LATER),
    "ended_at": ("when it ended (UTC); null while it runs", LATER),
    "at": ("when it happened (UTC)", AT),
    "reason": ("why, in words, for people", "zone outage in az-a"),
    "description": ("free text for people", "nightly backfill of the orders topic"),
    "id": ("its number (unique, increasing)", 1234),
    "version": ("row version: moves on every change; `If-Match` checks it", 7),
    "az": ("availability zone", "az-a"),
    "cloud": ("cloud or data center", "aws-eu-west-1"),
    "node": ("the Drover node", "node-a1"),
    "node_id": ("the Drover node's id", "node-a1"),
    "api_url": ("the node's REST API URL", "http://10.0.1.7:8000"),
    "actor": ("who did it: a token's identity, or `system` for the scheduler", "alice"),
    "identity": ("the identity (a user or service)", "alice"),
    "subject": ("who or what it is about", "alice"),
    "job": ("the job's name", "orders-enrich"),
    "jobs": ("jobs", 12),
    "data": ("the items of this page", []),
    "count": ("how many items", 3),
    "total": ("how many in all", 1000),
    "state": ("the current state", "RUNNING"),
    "kind": ("what kind it is", "standalone"),
    "enabled": ("whether it is in force", True),
    "detail": ("details (JSON)", {"field": "value"}),
    "history": ("the recent history, newest last", []),
    "members": ("the members", {}),
    "source": ("the cluster the jobs leave", "spark-a"),
    "target": ("the cluster the jobs go to", "spark-b"),
    "labels": ("key/value labels (list filters and bulk selectors use them)", {"env": "prod"}),
    # -- jobs ----------------------------------------------------------------------------------
    "JobCreate.name": ("", "orders-enrich"),
    "JobCreate.group": ("", "default"),
    "JobPublic.state": ("observed state (what the cluster runs)", "RUNNING"),
    "desired_state": ("what the job should be: `RUNNING` or `STOPPED`", "RUNNING"),
    "state_reason": ("why the job is in its state", "submitted to spark-a as run 3"),
    "entrypoint": (
        "the pipeline file: a path or `file://` URL under the artifact roots",
        "/opt/pipelines/orders_enrich.py",
    ),
    "args": ("the pipeline's arguments", ["--window", "5m"]),
    "conf": ("Spark properties of the application", {"spark.sql.shuffle.partitions": "8"}),
    "checkpoint_location": (
        "where the streaming checkpoint lives (under the cluster's storage root when not set)",
        "file:///var/drover/spark-a/orders-enrich/checkpoint",
    ),
    "owner": ("the node that manages the job now (null: none yet)", "node-a1"),
    "current_run": ("the job's current run (null: none)", None),
    "replicate": ("", True),
    "replication": ("", None),
    "self_fencing": ("", True),
    "directive": ("", None),
    "progress": ("the job's streaming progress (null: no run reports any)", None),
    "stall_after": (
        "seconds without progress after which the job counts as stalled (null: automatic)",
        600,
    ),
    "on_stall": ("what a stall does: alert only, or restart the job", "alert"),
    "spec_version": ("", 3),
    # -- runs and events -----------------------------------------------------------------------
    "attempt": ("the run's number among the job's runs (1, 2, ...)", 3),
    "owner_epoch": ("the membership epoch under which the run was claimed (fencing)", 4294967299),
    "RunPublic.state": ("the run's state", "RUNNING"),
    "RunPublic.reason": ("why the run ended, or what it waits for", "killed by a stop request"),
    "RunPublic.cluster": ("the cluster the run is on", "spark-a"),
    "RunPublic.node": ("the node that submitted the run", "node-a1"),
    "exit_code": ("the driver's exit code, when the cluster tells it", 0),
    "app_name": ("the Spark application name (carries the run's tag)", "drover-orders-enrich-r3"),
    "submission_id": ("the cluster's submission id", "driver-20261125031245-0007"),
    "app_id": ("the Spark application id", "app-20261125031250-0012"),
    "submitted_at": ("when the cluster accepted the submission (UTC)", AT),
    "fence_checked_at": ("", AT),
    "fence_superseded_at": ("", None),
    "fenced_at": ("", None),
    "run_id": ("the run", 42),
    "from_state": ("the state before", "SUBMITTING"),
    "to_state": ("the state after", "RUNNING"),
    "cause": ("what caused it (`api:start by alice`, `reconciler`, ...)", "api:start by alice"),
    "message": ("what happened, in words", "application app-20261125031250-0012 is running"),
    # -- progress and stalls -------------------------------------------------------------------
    "batch_id": ("the last micro-batch known committed", 1841),
    "rows": ("input rows of the last batch", 52000),
    "input_rate": ("input rows per second", 1733.3),
    "processing_rate": ("processed rows per second", 2104.9),
    "batch_duration_ms": ("milliseconds the last batch took", 24700),
    "trigger_interval_ms": ("", 30000),
    "spark_timestamp": ("", "2026-11-25T03:12:44.120Z"),
    "reported_at": ("", AT),
    "heartbeat_at": ("", AT),
    "stalled_since": ("since when the job counts as stalled (null: it is not)", None),
    "ProgressPublic.status": ("", "progressing"),
    "effective_stall_after": ("", 600),
    "current": ("the current run's last report (null: none)", None),
    "JobProgressPublic.history": ("samples of the recent minutes, oldest first", []),
    # -- fence ---------------------------------------------------------------------------------
    "current_run_id": ("the job's current run (null: none)", 42),
    "fencing_token": ("the caller's own token while its run is current; null otherwise", None),
    "FencePublic.current": (
        "whether the caller's run is the job's current open run (null: no token sent)",
        True,
    ),
    "run_state": ("the state of the job's current run", "RUNNING"),
    # -- clusters and health -------------------------------------------------------------------
    "ClusterCreate.name": ("", "spark-a"),
    "ClusterPublic.name": ("the cluster's name", "spark-a"),
    "ClusterPublic.kind": ("`standalone`, `yarn`, `local` or `spark-submit`", "standalone"),
    "ClusterCreate.kind": (
        "`standalone` (REST submissions), `yarn` (cluster deploy mode, the ResourceManager's "
        "REST API), `local` or `spark-submit`",
        "standalone",
    ),
    "ClusterUpdate.kind": ("`standalone`, `yarn`, `local` or `spark-submit`", "standalone"),
    "master_url": ("the Spark master URL (`yarn` for a yarn cluster)", "spark://10.0.1.20:7077"),
    "rest_url": (
        "the master's REST submission server (standalone); the ResourceManager's web address "
        "(yarn)",
        "http://10.0.1.20:6066",
    ),
    "ui_url": ("the master's web UI (application listing)", "http://10.0.1.20:8080"),
    "hadoop_conf_dir": (
        "a yarn cluster's Hadoop client configuration directory on every node (empty: none)",
        "/etc/hadoop/conf-yarn-a",
    ),
    "storage_root": (
        "the checkpoint root this cluster writes (unique among clusters): a path, file://, "
        "hdfs://namenode:port/... or s3a://bucket/...",
        "file:///var/drover/spark-a",
    ),
    "artifact_roots": (
        "where entrypoints of jobs on this cluster may live (empty: the node's setting)",
        ["/opt/pipelines/"],
    ),
    "max_concurrent_submissions": ("most submissions in flight to the cluster at once", 8),
    "max_cores": ("cores each application may take (null: the cluster's default)", 4),
    "max_running_apps": ("most applications the cluster runs at once (null: no cap)", 200),
    "health": ("the cluster's health state", "NORMAL"),
    "ClusterHealthPublic.cluster": ("the cluster", "spark-a"),
    "ClusterHealthPublic.state": ("the recorded health state", "NORMAL"),
    "ClusterHealthPublic.reason": (
        "why the cluster is in that state",
        "3 of 3 nodes probe it fine",
    ),
    "since": ("since when (UTC)", AT),
    "assessment": ("what the current votes say (recorded at the monitor's next round)", NONE),
    "votes": ("each live node's latest probe", []),
    "ClusterHealthPublic.history": ("the latest health changes, newest first", []),
    "AssessmentPublic.state": ("the state the votes call for", "NORMAL"),
    "AssessmentPublic.reason": ("why", "3 of 3 live nodes probe it fine"),
    "recent_failures": ("failed probes within the threshold window", 0),
    "last_failure": ("the latest failed probe (UTC)", None),
    "normal_not_before": ("a cluster back to health counts as NORMAL only from then", None),
    "live_nodes": ("the nodes whose votes count", ["node-a1", "node-b1"]),
    "VotePublic.at": ("when the node probed (UTC)", AT),
    "ok": ("whether the probe succeeded", True),
    "latency_s": ("how long the probe took (seconds)", 0.012),
    "VotePublic.detail": ("what the probe saw", "master ALIVE, 2 workers"),
    "counted": ("whether the vote is recent enough to count", True),
    "decided_by": ("`votes`, `threshold` or `operator`", "operator"),
    "HealthEventPublic.reason": (
        "the operator's reason, or the votes' summary",
        "zone outage in az-a",
    ),
    "HealthEventPublic.from_state": ("the health state before", "NORMAL"),
    "HealthEventPublic.to_state": ("the health state after", "MANUAL_ABNORMAL"),
    "evidence": ("what the decision rested on (votes, counts)", {"failures": 3}),
    # -- groups and nodes ----------------------------------------------------------------------
    "GroupCreate.name": ("", "ads"),
    "GroupPublic.name": ("the group's name", "ads"),
    "primary_cluster": ("the cluster the group's jobs run on", "spark-a"),
    "failover_cluster": ("where a failover moves them (null: none)", "spark-b"),
    "epoch": ("the group's membership epoch (grows on every join and leave)", 4294967299),
    "epoch_generation": ("how many times the group's members znode was created", 1),
    "pool": (
        "the members that share the group's jobs, sorted (ownership rule)",
        ["node-a1", "node-a2"],
    ),
    "GroupPublic.members": ("the live members as this node sees them", []),
    "role": ("the node's role in the group: `active` or `backup`", "active"),
    "GroupMemberPublic.started_at": ("when the node started (UNIX seconds)", 1795576365.0),
    "GroupMemberPublic.jobs": ("jobs of the group the node owns (null: unknown)", 120),
    "NodePublic.started_at": ("when the node started (UNIX seconds)", 1795576365.0),
    "groups": ("the groups and the node's role in each", {"ads": "active"}),
    "mode": (
        "`zookeeper` or `single` (no ZooKeeper: this node is every group's member)",
        "zookeeper",
    ),
    "connection": ("this node's ZooKeeper connection state", "CONNECTED"),
    "NodeList.data": ("the live nodes", []),
    "NodeList.count": ("how many live nodes", 3),
    "this_node": ("the id of the node that answered", "node-a1"),
    "actors": ("the answering node's actors and their state", {"reconciler:ads": "running"}),
    # -- identities ----------------------------------------------------------------------------
    "TeamCreate.name": ("the team's name", "ads"),
    "TeamPublic.name": ("the team's name", "ads"),
    "TeamPublic.members": ("each member's role on the team", {"alice": "operator"}),
    "MemberPut.role": ("the role on the team: `viewer` < `operator` < `admin`", "operator"),
    "MemberPut.kind": ("`user` (a person) or `service` (a program)", "service"),
    "roles": ("the caller's role per team (`*`: the platform)", {"ads": "operator"}),
    "scopes": ("what the token may do at most (empty: what its identity may)", ["read"]),
    "TokenCreate.identity": (
        "whose token (created when new; platform admins only for others)",
        "ci-deployer",
    ),
    "expires_in_seconds": ("lifetime in seconds (null: never expires)", 2592000),
    "prefix": (
        "the token's first characters (to recognise it; the secret is shown once)",
        "drv_3f2b8c",
    ),
    "token": ("the secret: shown once, at creation", "drv_3f2b8c1e6d4a4f7e9b1a2c5d8e9f0a1b"),
    "created_by": ("who created it", "alice"),
    "expires_at": ("when it expires (null: never)", None),
    "revoked_at": ("when it was revoked (null: not revoked)", None),
    "TokenPublic.id": ("the token's id (revoke it by this)", 17),
    "TokenCreated.id": ("the token's id (revoke it by this)", 17),
    "WhoAmI.subject": ("the credential's subject", "alice"),
    "WhoAmI.identity": ("the identity behind the credential (null: the bootstrap root)", "alice"),
    # -- audit ---------------------------------------------------------------------------------
    "AuditPublic.action": ("what was done (`job.create`, `job.start`, ...)", "job.start"),
    "target_kind": ("the kind of thing acted on", "job"),
    "target_name": ("its name", "orders-enrich"),
    "AuditPublic.team": ("the team of the thing acted on ('' for platform objects)", "ads"),
    "AuditPublic.detail": ("the request's parameters", {"reason": "zone outage"}),
    "before": ("the thing before (null: it did not exist)", {"desired_state": "STOPPED"}),
    "after": ("the thing after (null: it is gone)", {"desired_state": "RUNNING"}),
    "AuditPublic.node": ("the node that served the request", "node-a1"),
    # -- alerts --------------------------------------------------------------------------------
    "AlertPublic.kind": ("what the alert is about", "job_failed"),
    "AlertPublic.subject": ("the job or cluster it is about", "orders-enrich"),
    "severity": ("`info`, `warning` or `critical`", "critical"),
    "min_severity": ("the least severity the channel receives", "warning"),
    "AlertPublic.status": ("`firing` or `resolved`", "firing"),
    "summary": ("one line for people", "job orders-enrich FAILED (exit code 1)"),
    "resolution": ("how it was resolved (null: still firing)", None),
    "AlertPublic.team": ("the job's team (null: a cluster alert)", "ads"),
    "AlertPublic.cluster": ("the cluster concerned (null: none)", "spark-a"),
    "AlertPublic.group": ("the group concerned (null: none)", "ads"),
    "details": ("what the alert carries for programs", {"run": 42}),
    "resolved_at": ("when it was resolved (null: still firing)", None),
    "folded_into": ("", None),
    "folded": ("", 0),
    "deliveries": ("each channel's delivery of the alert", []),
    "AlertChannelCreate.name": ("the channel's name", "ads-oncall"),
    "AlertChannelPublic.name": ("the channel's name", "ads-oncall"),
    "AlertChannelCreate.kind": ("how messages go out", "webhook"),
    "AlertChannelPublic.kind": ("how messages go out", "webhook"),
    "url": ("where messages are sent", "https://hooks.example.com/drover"),
    "AlertChannelPublic.team": ("", "ads"),
    "kinds": ("the alert kinds the channel receives (empty: all)", ["job_failed"]),
    "secret": (
        "a shared secret: messages carry an HMAC signature (never shown again)",
        "s3cr3t-shared-with-the-receiver",
    ),
    "signed": ("", True),
    # -- replication ---------------------------------------------------------------------------
    "ReplicationPublic.job": ("the job", "orders-enrich"),
    "ReplicationPublic.state": ("", "CURRENT"),
    "ReplicationPublic.reason": ("", ""),
    "ReplicationPublic.enabled": ("", True),
    "source_cluster": ("the cluster the job's checkpoint is on", "spark-a"),
    "source_location": (
        "the job's checkpoint",
        "file:///var/drover/spark-a/orders-enrich/checkpoint",
    ),
    "target_cluster": ("the cluster that receives it", "spark-b"),
    "location": ("", "file:///var/drover/spark-b/replicas/orders-enrich"),
    "source_batch": ("", 1841),
    "source_batch_at": ("when the source committed its newest batch (UTC)", AT),
    "replica_batch": ("", 1840),
    "replica_batch_at": ("", AT),
    "lag_batches": ("batches the replica is behind its source", 1),
    "lag_seconds": ("", 30.5),
    "observed_at": ("", AT),
    "stale": ("", False),
    "error": ("the last copy's error ('' when it worked)", ""),
    "error_since": ("since when copies fail (null: they do not)", None),
    "files_copied": ("files copied in all", 1204),
    "bytes_copied": ("bytes copied in all", 73400320),
    "last_copy_at": ("when the last copy ended (UTC)", AT),
    "last_copy_files": ("files the last copy took", 6),
    "last_copy_bytes": ("bytes the last copy took", 40960),
    "last_copy_seconds": ("how long the last copy took", 0.4),
    "ReplicationPublic.node": ("", "node-a1"),
    "held_by": ("", None),
    "held_until": ("until when the holder may write (UTC)", None),
    # -- failovers -----------------------------------------------------------------------------
    "FailoverCreate.source": ("", "spark-a"),
    "FailoverCreate.target": ("", "spark-b"),
    "FailoverPublic.source": ("the cluster the jobs leave", "spark-a"),
    "FailoverPublic.target": ("the cluster they go to (null: each job's other cluster)", "spark-b"),
    "selector": ("which jobs the operation acts on", {"teams": ["ads"], "priorities": ["high"]}),
    "FailoverCreate.selector": (
        "which jobs: all of the source's, or by priority, team, business, group, name",
        {"priorities": ["high"]},
    ),
    "FailoverPublic.selector": (
        "which jobs: all of the source's, or by priority, team, business, group, name",
        {"priorities": ["high"]},
    ),
    "dry_run": ("only a plan: nothing was stored or done", False),
    "FailoverCreate.reason": (
        "why (kept with the operation and in the audit log)",
        "zone outage in az-a",
    ),
    "FailoverPublic.reason": ("why", "zone outage in az-a"),
    "parallelism": ("most items under way at once", 16),
    "force": (
        "fence these jobs although they do not fence themselves (needs an acknowledgement)",
        None,
    ),
    "expected_plan": ("", "5f0c2d1e"),
    "FailoverPublic.id": ("", 12),
    "FailoverPublic.state": ("", "RUNNING"),
    "FailoverPublic.created_by": ("who started it", "alice"),
    "incident": ("", "INC-4711"),
    "plan_digest": ("", "5f0c2d1e"),
    "source_reachable": ("whether the source cluster answered when planned (null: unknown)", False),
    "executor": ("the node executing the failover now", "node-b1"),
    "executor_epoch": ("the executor's membership epoch (fences a stale executor)", 4294967300),
    "cancel_requested": ("an operator asked to cancel it", False),
    "cancel_requested_at": ("when cancelling was asked (UTC)", None),
    "cancel_requested_by": ("who asked to cancel it", None),
    "counts": ("", {"DONE": 10, "KILL": 2}),
    "FailoverPublic.total": ("", 12),
    "finished": ("", 10),
    "items": ("each job's item, in execution order", []),
    "position": ("the item's place in the plan (execution order)", 0),
    "ItemPublic.job": ("the job", "orders-enrich"),
    "ItemPublic.group": ("the job's group", "ads"),
    "ItemPublic.priority": ("the job's priority", "high"),
    "ItemPublic.action": ("", "move"),
    "why": ("why the plan does that for this job", "running on spark-a"),
    "ItemPublic.step": ("", "DONE"),
    "waiting": ("", ""),
    "source_run_id": ("the job's run on the source (null: none)", 41),
    "target_run_id": ("its run on the target (null: not yet)", 42),
    "forced": ("the item was forced (fenced although not self-fencing)", False),
    "checkpoint_from": (
        "where the job's checkpoint was",
        "file:///var/drover/spark-a/orders-enrich/checkpoint",
    ),
    "checkpoint_to": (
        "where the job resumes from",
        "file:///var/drover/spark-b/replicas/orders-enrich",
    ),
    "resume_batch": ("", 1840),
    "attempts": ("attempts of the current step", 1),
    "last_error": ("the last error of the item ('' : none)", ""),
    "ItemPublic.history": ("the steps the item went through, oldest first", []),
    "StepPublic.step": ("the step reached", "KILLED"),
    "StepPublic.at": ("when (UTC)", AT),
    "note": ("what happened", "source confirmed the application is gone"),
    "DirectivePublic.operation": ("the failover's id", 12),
    "DirectivePublic.item": ("the item's position in it", 0),
    "phase": ("", "drain"),
    "DirectivePublic.source": ("the cluster the job leaves", "spark-a"),
    "DirectivePublic.target": ("the cluster it goes to", "spark-b"),
    "force_unfenced": (
        "the operator forced the move although the job does not fence itself",
        False,
    ),
    "DirectivePublic.description": (
        "the directive in words",
        "failover 12: leaving cluster spark-a for spark-b",
    ),
    "priorities": ("only jobs of these priorities", ["high"]),
    "teams": ("only jobs of these teams", ["ads"]),
    "businesses": ("only jobs of these businesses", ["retail"]),
    "SelectorIn.groups": ("only jobs of these groups", ["ads"]),
    "SelectorIn.jobs": ("only these jobs", ["orders-enrich"]),
    "all": ("every job on the source (no other filter may be given)", False),
    "ForceIn.jobs": ("", ["orders-enrich"]),
    "acknowledgement": ("", "the spark-a hosts are powered off"),
    "after_seconds": ("", 300),
    "min_priority": ("", "normal"),
    "AutoFailoverPublic.group": ("the group", "ads"),
    "AutoFailoverPublic.version": ("", 2),
    "updated_by": ("who changed it last", "alice"),
    # -- bulk operations ------------------------------------------------------------------------
    "BulkCreate.kind": ("", "restart"),
    "OperationPublic.kind": ("`failover`, or the command of a bulk operation", "restart"),
    "BulkSelectorIn.clusters": ("only jobs on these clusters", ["spark-a"]),
    "BulkSelectorIn.groups": ("only jobs of these groups", ["ads"]),
    "BulkSelectorIn.labels": ("only jobs meeting all these label requirements", ["env=prod"]),
    "BulkSelectorIn.jobs": ("only these jobs", ["orders-enrich"]),
    "OperationItemPublic.action": ("", "restart"),
    "OperationItemPublic.step": ("", "DONE"),
    # -- graceful stops, upgrades, revisions, drains ------------------------------------------
    "FencePublic.stop": (
        "`true`: the run must finish its current micro-batch and exit (a graceful stop); "
        "null when the caller's run is not current",
        False,
    ),
    "upgrade_deadline": ("", None),
    "drain_deadline": ("", None),
    "NodeState.started_at": ("", 1795576365.0),
    "draining": ("", False),
    "from_revision": ("the revision the changes start from", 2),
    "to_revision": ("the revision they lead to", 3),
    "RevisionDiff.changes": ("each changed field with its value before and after", []),
    "restarts": ("", True),
    "RevisionPublic.spec": (
        "",
        {"entrypoint": "/opt/pipelines/orders_enrich.py", "args": ["--window", "5m"]},
    ),
    "rollback_of": ("", None),
    "against": ("", 2),
    "RevisionPublic.changes": ("", None),
    # -- overview ------------------------------------------------------------------------------
    "Overview.jobs": ("the jobs at a glance", NONE),
    "clusters": ("the clusters at a glance", NONE),
    "ClustersOverview.total": ("clusters in the catalog", 2),
    "abnormal": ("", ["spark-b"]),
    "JobsOverview.total": ("", 1000),
    "Overview.at": ("", AT),
}

#: ``"in:name"`` -> (description, example) of parameters routes leave bare
PARAMETERS: dict[str, tuple[str, Any]] = {
    "path:name": ("", "orders-enrich"),
    "path:team": ("the team's name (`*`: the platform)", "ads"),
    "path:business": ("the business the quota is for", "ads"),
    "path:identity": ("the identity's name", "alice"),
    "path:token_id": ("the token's id", 17),
    "path:operation_id": ("", 12),
    "query:state": ("only those in this state", "RUNNING"),
    "/v1/failovers query:state": (
        "only failovers in these states (repeat the parameter)",
        ["RUNNING"],
    ),
    "/v1/replication query:state": ("only replicas in this state", "CURRENT"),
    "query:desired_state": ("only jobs with this desired state", "RUNNING"),
    "query:team": ("only those of this team", "ads"),
    "query:business": ("only jobs of this business", "retail"),
    "query:group": ("only those of this group", "ads"),
    "query:cluster": ("only those on this cluster", "spark-a"),
    "query:priority": ("only jobs of this priority", "high"),
    "query:history": ("how many health changes to show (newest first)", 20),
    "query:minutes": ("", 60),
    "query:limit": ("", 50),
    "query:status": ("only alerts of this status", "firing"),
    "query:kind": ("only alerts of this kind", "job_failed"),
    "query:actor": ("only entries of this actor", "alice"),
    "query:action": ("only entries of this action", "job.start"),
    "query:target_kind": ("only entries about this kind of thing", "job"),
    "query:target_name": ("only entries about the thing of this name", "orders-enrich"),
    "query:since": ("only entries at or after this instant (RFC 3339)", "2026-11-25T00:00:00Z"),
    "query:until": ("only entries before this instant (RFC 3339)", "2026-11-25T06:00:00Z"),
    "query:source": ("only failovers from this cluster", "spark-a"),
    "query:count": ("", True),
    "query:items": ("", False),
    "path:revision": ("the revision's number (1 is the job's creation)", 3),
    "/v1/operations query:kind": ("only these kinds (repeat the parameter)", ["restart"]),
    "/v1/operations query:state": ("only these states (repeat the parameter)", ["RUNNING"]),
    "query:cursor": ("", "eyJzIjoibmFtZSIsImsiOlsib3JkZXJzIl0sImYiOiI0NGEzIn0"),
    "query:sort": ("", "name"),
    "query:q": ("", "orders"),
    "query:name_prefix": ("", "orders-"),
}

#: parameter examples that depend on the route (its path's first segments after ``/v1``)
_PATH_NAME_EXAMPLES = {
    "clusters": "spark-a",
    "groups": "ads",
    "alert-channels": "ads-oncall",
    "teams": "ads-oncall",
}


#: response headers: name -> its OpenAPI header object
_ETAG = {
    "description": "the version `If-Match` checks (a job's `spec_version`, a cluster's, group's "
    "or policy's `version`)",
    "required": True,
    "schema": {"type": "string", "pattern": '^"[0-9]+"$', "examples": ['"3"']},
}
_LOCATION = {
    "description": "the path of what was created",
    "required": True,
    "schema": {"type": "string", "maxLength": 2048, "examples": ["/v1/jobs/orders-enrich"]},
}
_LINK = {
    "description": 'the next page: `<URL>; rel="next"` (absent on the last page)',
    "schema": {
        "type": "string",
        "examples": ['</v1/jobs?limit=50&cursor=eyJzIjoibmFtZSJ9>; rel="next"'],
    },
}
_REPLAYED = {
    "description": "`true`: a retry with the same `Idempotency-Key`; this is the first answer, "
    "replayed, and nothing was done again",
    "schema": {"type": "string", "enum": ["true"], "examples": ["true"]},
}
#: operationId -> {status: headers} the route always sets on that success status
RESPONSE_HEADERS: dict[str, dict[str, dict[str, Any]]] = {
    "create_job": {"201": {"ETag": _ETAG, "Location": _LOCATION}},
    "get_job": {"200": {"ETag": _ETAG}},
    "update_job": {"200": {"ETag": _ETAG}},
    "start_job": {"202": {"ETag": _ETAG}},
    "stop_job": {"202": {"ETag": _ETAG}},
    "restart_job": {"202": {"ETag": _ETAG}},
    "create_cluster": {"201": {"ETag": _ETAG, "Location": _LOCATION}},
    "get_cluster": {"200": {"ETag": _ETAG}},
    "update_cluster": {"200": {"ETag": _ETAG}},
    "create_group": {"201": {"ETag": _ETAG, "Location": _LOCATION}},
    "get_group": {"200": {"ETag": _ETAG}},
    "update_group": {"200": {"ETag": _ETAG}},
    "create_failover": {"201": {"Location": _LOCATION}},
    "get_group_auto_failover": {"200": {"ETag": _ETAG}},
    "put_group_auto_failover": {"200": {"ETag": _ETAG}},
}


def _document_headers(spec: dict[str, Any], operation: dict[str, Any]) -> None:
    """The response headers of an operation: its table entry, ``Link`` on pages (a schema with
    ``next_cursor``), ``Idempotent-Replayed`` where ``Idempotency-Key`` is taken."""
    schemas = spec.get("components", {}).get("schemas", {})
    idempotent = any(
        p.get("in") == "header" and p.get("name", "").lower() == "idempotency-key"
        for p in operation.get("parameters", [])
    )
    declared = RESPONSE_HEADERS.get(operation.get("operationId", ""), {})
    for status, response in operation.get("responses", {}).items():
        if not str(status).startswith("2"):
            continue
        headers = response.setdefault("headers", {})
        for name, header in declared.get(str(status), {}).items():
            headers.setdefault(name, header)
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        ref = schema.get("$ref", "").rsplit("/", 1)[-1]
        if "next_cursor" in schemas.get(ref, {}).get("properties", {}):
            headers.setdefault("Link", _LINK)
        if idempotent:
            headers.setdefault("Idempotent-Replayed", _REPLAYED)
        if not headers:
            del response["headers"]


def _lookup(table: dict[str, tuple[str, Any]], *keys: str) -> tuple[str, Any] | None:
    for key in keys:
        if key in table:
            return table[key]
    return None


def _has_example(schema: dict[str, Any]) -> bool:
    return bool({"example", "examples", "const"} & set(schema))


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def fits(example: Any, schema: dict[str, Any], schemas: dict[str, Any]) -> bool:
    """Whether ``example`` has the type (and enum value) ``schema`` asks for: a cheap guard, so
    a shared word's example never lands on a field of another type (the contract test validates
    every example in full)."""
    while "$ref" in schema:
        schema = schemas.get(schema["$ref"].rsplit("/", 1)[-1], {})
    if "enum" in schema:
        return example in schema["enum"]
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            return any(fits(example, option, schemas) for option in schema[combinator])
    kind = schema.get("type")
    if kind is None:
        return True
    if isinstance(example, bool) and kind in ("integer", "number"):
        return False
    if not isinstance(example, _JSON_TYPES.get(kind, (object,))):
        return False
    if kind == "array" and "items" in schema:
        items = cast("list[Any]", example)
        return all(fits(item, schema["items"], schemas) for item in items)
    return True


def _fill_field(
    schema_name: str, field: str, prop: dict[str, Any], schemas: dict[str, Any]
) -> None:
    specific = FIELDS.get(f"{schema_name}.{field}")
    found = specific or FIELDS.get(field)
    if found is None:
        return
    description, example = found
    if specific is None and example is not NONE and not fits(example, prop, schemas):
        return  # the shared word means something else here: the model must say it
    if not prop.get("description") and description:
        prop["description"] = description
    if not _has_example(prop) and example is not NONE:
        prop["examples"] = [example]


def _fill_parameter(path: str, param: dict[str, Any]) -> None:
    key = f"{param['in']}:{param['name']}"
    found = _lookup(PARAMETERS, f"{path} {key}", key)
    schema = param.setdefault("schema", {})
    description = param.get("description") or schema.get("description")
    if found is not None and not description and found[0]:
        param["description"] = found[0]
    elif description and not param.get("description"):
        param["description"] = description
    if _has_example(param) or _has_example(schema):
        return
    example: Any = None
    if key == "path:name":
        parts = path.split("/")
        example = _PATH_NAME_EXAMPLES.get(parts[2] if len(parts) > 2 else "", "orders-enrich")
        if "/alert-channels/" in path:
            example = "ads-oncall"
    elif found is not None:
        example = found[1]
    if example is not None:
        schema["examples"] = [example]


def complete(spec: dict[str, Any]) -> dict[str, Any]:
    """Fill the descriptions and examples models and routes left out (in place; returned)."""
    schemas = spec.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        for field, prop in schema.get("properties", {}).items():
            _fill_field(name, field, prop, schemas)
    for path, item in spec.get("paths", {}).items():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for param in operation.get("parameters", []):
                _fill_parameter(path, param)
            _document_headers(spec, operation)
    return spec
