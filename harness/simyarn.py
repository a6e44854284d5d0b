"""A simulated YARN ResourceManager for the backend contract's unit tests (never a default).

One threaded HTTP server on loopback plays the subset of the ResourceManager's REST API that
:class:`scheduler.backends.yarn.YarnBackend` uses (``/ws/v1/cluster/info``, ``/metrics``,
``/apps`` with the ``states`` and ``applicationTags`` filters, ``/apps/{id}``,
``PUT /apps/{id}/state``) and one NodeManager's container-log service. :func:`fake_spark_submit`
writes a ``$SPARK_HOME/bin/spark-submit`` that submits to it (``POST /sim/submit`` with the
name, tags and queue of the submission's properties file) and prints the line Spark's YARN
client logs (``Submitted application application_...``). No JVM, no YARN: the real thing is
covered by tests/integration and tests/e2e on the test clusters of ``scripts/services.sh``.

Life of one application: ACCEPTED at submission, RUNNING with the ApplicationMaster alone after
``app_start_delay``, with an executor ``executor_delay`` later; a kill makes it KILLED at once.
``unreachable()`` answers 503 to everything but ``/sim/*`` until ``reachable()``.
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

CLUSTER_TS = 1_700_000_000_000


@dataclass
class SimApp:
    id: str
    name: str
    tags: list[str]
    queue: str
    submitted: float
    killed: bool = False
    failed: str = ""
    #: container logs of the ApplicationMaster
    logs: dict[str, str] = field(default_factory=dict)


class SimResourceManager:
    def __init__(self, *, app_start_delay: float = 0.1, executor_delay: float = 0.05) -> None:
        self.app_start_delay = app_start_delay
        self.executor_delay = executor_delay
        self._lock = threading.Lock()
        self._apps: dict[str, SimApp] = {}
        self._next = 1
        self._down = False
        self._recovering = False
        self._server: ThreadingHTTPServer | None = None
        self.requests = 0

    # ----------------------------------------------------------------------- lifecycle

    def start(self) -> SimResourceManager:
        sim = self

        class Handler(_Handler):
            rm = sim

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"{host.decode() if isinstance(host, bytes) else host}:{port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def write_conf(self, conf_dir: Path) -> Path:
        """A HADOOP_CONF_DIR whose yarn-site names this ResourceManager."""
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "yarn-site.xml").write_text(
            "<configuration><property><name>yarn.resourcemanager.webapp.address</name>"
            f"<value>{self.address}</value></property></configuration>\n"
        )
        return conf_dir

    # ----------------------------------------------------------------------- faults

    def unreachable(self) -> None:
        self._down = True

    def recovering(self, on: bool = True) -> None:
        """A restarted ResourceManager that serves its REST API before it has recovered its
        applications: not ACTIVE, every application unknown."""
        self._recovering = on

    def reachable(self) -> None:
        self._down = False

    def fail(self, app_id: str, diagnostics: str = "User application exited with status 1") -> None:
        with self._lock:
            self._apps[app_id].failed = diagnostics

    # ----------------------------------------------------------------------- state

    def submit(self, name: str, tags: list[str], queue: str) -> str:
        with self._lock:
            app_id = f"application_{CLUSTER_TS}_{self._next:04d}"
            self._next += 1
            self._apps[app_id] = SimApp(
                app_id, name, [t.lower() for t in tags], queue or "default", time.monotonic()
            )
            self._apps[app_id].logs = {
                "stdout": "",
                "stderr": f"INFO ApplicationMaster: starting {name}\n",
            }
        return app_id

    def app(self, app_id: str) -> dict[str, Any] | None:
        if self._recovering:
            return None
        with self._lock:
            app = self._apps.get(app_id)
            return None if app is None else self._render(app)

    def apps(self, states: set[str] | None, tags: set[str] | None) -> list[dict[str, Any]]:
        if self._recovering:
            return []
        with self._lock:
            rendered = [self._render(a) for a in self._apps.values()]
        return [
            a
            for a in rendered
            if (states is None or a["state"] in states)
            and (tags is None or tags & set(a["applicationTags"].split(",")))
        ]

    def kill(self, app_id: str) -> str | None:
        with self._lock:
            app = self._apps.get(app_id)
            if app is None:
                return None
            if not app.failed:
                app.killed = True
            return self._render(app)["state"]

    def _render(self, app: SimApp) -> dict[str, Any]:
        age = time.monotonic() - app.submitted
        containers = 0
        if app.killed:
            state, final = "KILLED", "KILLED"
        elif app.failed:
            state, final = "FINISHED", "FAILED"
        elif age < self.app_start_delay:
            state, final = "ACCEPTED", "UNDEFINED"
        else:
            state, final = "RUNNING", "UNDEFINED"
            containers = 2 if age >= self.app_start_delay + self.executor_delay else 1
        container = f"container_{app.id.removeprefix('application_')}_01_000001"
        return {
            "id": app.id,
            "name": app.name,
            "queue": f"root.{app.queue}",
            "state": state,
            "finalStatus": final,
            "diagnostics": app.failed or ("killed by user" if app.killed else ""),
            "applicationType": "SPARK",
            "applicationTags": ",".join(sorted(app.tags)),
            "startedTime": CLUSTER_TS + int(app.submitted * 1000),
            "runningContainers": containers if state == "RUNNING" else -1,
            "amHostHttpAddress": self.address,
            "amContainerLogs": f"http://{self.address}/node/containerlogs/{container}/drover",
            "trackingUrl": f"http://{self.address}/proxy/{app.id}/",
        }

    def container_log(self, container: str, file: str) -> str | None:
        with self._lock:
            for app in self._apps.values():
                if container == f"container_{app.id.removeprefix('application_')}_01_000001":
                    return app.logs.get(file)
        return None


class _Handler(BaseHTTPRequestHandler):
    rm: SimResourceManager

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _down(self) -> bool:
        self.rm.requests += 1
        if self.rm._down and not self.path.startswith("/sim/"):
            self._send(503, {"RemoteException": {"message": "simulated outage"}})
            return True
        return False

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        if self._down():
            return
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [p for p in url.path.split("/") if p]
        if url.path == "/ws/v1/cluster/info":
            ha = "INITIALIZING" if self.rm._recovering else "ACTIVE"
            self._send(200, {"clusterInfo": {"state": "STARTED", "haState": ha}})
        elif url.path == "/ws/v1/cluster/metrics":
            metrics = {"activeNodes": 1, "lostNodes": 0, "unhealthyNodes": 0}
            metrics |= {"availableMB": 8192, "availableVirtualCores": 8}
            self._send(200, {"clusterMetrics": metrics})
        elif url.path == "/ws/v1/cluster/apps":
            states = set(query["states"][0].split(",")) if "states" in query else None
            tagged = query.get("applicationTags")
            tags = set(tagged[0].split(",")) if tagged else None
            apps = self.rm.apps(states, tags)
            self._send(200, {"apps": {"app": apps} if apps else None})
        elif parts[:4] == ["ws", "v1", "cluster", "apps"] and len(parts) == 5:
            app = self.rm.app(parts[4])
            if app is None:
                self._send(404, {"RemoteException": {"message": f"app {parts[4]} not found"}})
            else:
                self._send(200, {"app": app})
        elif parts[:4] == ["ws", "v1", "node", "containers"] and len(parts) == 7:
            text = self.rm.container_log(parts[4], parts[6])
            if text is None:
                self._send(404, "no such log", "text/plain")
            else:
                self._send(200, text, "text/plain")
        else:
            self._send(404, {"RemoteException": {"message": f"no route {url.path}"}})

    def do_PUT(self) -> None:  # noqa: N802 - stdlib's name
        if self._down():
            return
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if parts[:4] == ["ws", "v1", "cluster", "apps"] and parts[5:] == ["state"]:
            if body.get("state") != "KILLED":
                self._send(400, {"RemoteException": {"message": "only KILLED"}})
                return
            state = self.rm.kill(parts[4])
            if state is None:
                self._send(404, {"RemoteException": {"message": "not found"}})
            else:
                self._send(202 if state == "KILLED" else 200, {"state": state})
        else:
            self._send(404, {"RemoteException": {"message": "no route"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        if self._down():
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/sim/submit":
            app_id = self.rm.submit(body["name"], body["tags"], body.get("queue", ""))
            self._send(200, {"id": app_id})
        else:
            self._send(404, {"RemoteException": {"message": "no route"}})


FAKE_SPARK_SUBMIT = '''\
#!{python}
"""A fake spark-submit for the simulated ResourceManager (harness/simyarn.py)."""
import json, os, re, sys, urllib.request

args = sys.argv[1:]
name, props = "", {{}}
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag == "--load-spark-defaults":
        continue
    value = args.pop(0)
    if flag == "--name":
        name = value
    elif flag == "--properties-file":
        for line in open(value, encoding="utf-8"):
            key, _, val = line.rstrip("\\n").partition("=")
            unescape = lambda s: re.sub(r"\\\\(.)", r"\\1", s)
            props[unescape(key)] = unescape(val)
site = open(os.path.join(os.environ["HADOOP_CONF_DIR"], "yarn-site.xml")).read()
address = re.search(r"<value>([^<]+)</value>", site).group(1)
body = {{"name": name, "tags": props.get("spark.yarn.tags", "").split(","),
        "queue": props.get("spark.yarn.queue", "")}}
request = urllib.request.Request(
    f"http://{{address}}/sim/submit", data=json.dumps(body).encode(),
    headers={{"Content-Type": "application/json"}})
try:
    app_id = json.load(urllib.request.urlopen(request, timeout=5))["id"]
except Exception as exc:
    print(f"26/12/01 10:00:00 ERROR Client: cannot submit: {{exc}}", file=sys.stderr)
    sys.exit(1)
print(f"26/12/01 10:00:00 INFO YarnClientImpl: Submitted application {{app_id}}", file=sys.stderr)
'''


def fake_spark_submit(spark_home: Path) -> Path:
    """Write ``<spark_home>/bin/spark-submit`` (the fake above) and ``jars/``; returns home."""
    (spark_home / "bin").mkdir(parents=True, exist_ok=True)
    (spark_home / "jars").mkdir(exist_ok=True)
    script = spark_home / "bin" / "spark-submit"
    script.write_text(textwrap.dedent(FAKE_SPARK_SUBMIT.format(python=sys.executable)))
    script.chmod(0o755)
    return spark_home
