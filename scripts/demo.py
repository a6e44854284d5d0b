"""`make demo`: the embedded default — one node, SQLite, Spark local mode, the sample pipeline.

Starts a node (its own session, so Ctrl-C reaches only this script), creates and starts the sample
job through the REST API, shows its progress until Ctrl-C, then stops the job through the API,
waits until Drover confirms it STOPPED, and stops the node. Nothing of the demo is left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
JOB = "sample-windowed-counts"


def wait_for(what: str, check, deadline_s: float, interval: float = 0.5):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise SystemExit(f"demo: timed out after {deadline_s:.0f} s waiting for {what}")


def main() -> int:
    data_dir = Path(os.environ.get("DROVER_DATA_DIR", ROOT / "var" / "demo")).resolve()
    port = int(os.environ.get("DROVER_API_PORT", "8000"))
    api = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DROVER_DATA_DIR": str(data_dir),
        "DROVER_API_HOST": "127.0.0.1",
        "DROVER_API_PORT": str(port),
        "DROVER_NODE_ID": os.environ.get("DROVER_NODE_ID", "demo-node"),
    }
    env.pop("DROVER_DATABASE_URL", None)  # the embedded default: SQLite under the data dir
    drover = str(Path(sys.executable).with_name("drover"))
    subprocess.run([drover, "db", "upgrade"], env=env, check=True)
    token_file = data_dir / "admin.token"
    if not token_file.exists():  # the store's first admin; --force when an earlier demo made one
        subprocess.run(
            [
                drover,
                "token",
                "create",
                "--admin",
                "--force",
                "--name",
                "demo",
                "--output",
                str(token_file),
            ],
            env=env,
            check=True,
        )
    token = token_file.read_text().strip()

    log_path = data_dir / "node.log"
    output = data_dir / "output" / JOB
    print(f"demo: starting a Drover node on {api} (log: {log_path})")
    with log_path.open("ab") as log:
        node = subprocess.Popen(
            [drover, "node", "run"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    client = httpx.Client(
        base_url=api,
        timeout=10,
        headers={"Authorization": f"Bearer {token}", "X-Drover-Client": "demo"},
    )
    interrupted = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:

        def ready() -> bool:
            if node.poll() is not None:
                raise SystemExit(f"demo: the node exited ({node.returncode}); see {log_path}")
            try:
                return client.get("/readyz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_for("the node to be ready", ready, 120)
        job = client.get(f"/v1/jobs/{JOB}")
        if job.status_code == 404:
            body = {
                "name": JOB,
                "entrypoint": str(ROOT / "pipelines" / "windowed_counts.py"),
                "args": ["--output", str(output)],
                "team": "demo",
                "business": "demo",
                "desired_state": "RUNNING",
            }
            client.post("/v1/jobs", json=body).raise_for_status()
        elif job.json()["desired_state"] != "RUNNING":
            client.post(f"/v1/jobs/{JOB}/start").raise_for_status()
        print(f"demo: job {JOB} created and started. Watch it with:")
        auth = f'-H "Authorization: Bearer $(cat {token_file})"'
        print(f"    curl -s {auth} {api}/v1/jobs/{JOB}")
        print(f"    curl -s {auth} {api}/v1/jobs/{JOB}/events")
        print(f"    DROVER_TOKEN=$(cat {token_file}) drover jobs get {JOB} --api {api}")
        print(f"    ls {output}")
        print("demo: press Ctrl-C to stop the job and the node.")
        last = ""
        while not interrupted:
            state = client.get(f"/v1/jobs/{JOB}").json()["state"]
            batches = len(list(output.glob("batch_id=*"))) if output.exists() else 0
            line = f"demo: {JOB} is {state}; {batches} output batch(es) in {output}"
            if line != last:
                print(line, flush=True)
                last = line
            for _ in range(20):
                if interrupted:
                    break
                time.sleep(0.25)
    finally:
        print("\ndemo: stopping the job through the API ...", flush=True)
        try:
            job = client.get(f"/v1/jobs/{JOB}").json()
            if job.get("desired_state") == "RUNNING":
                client.post(f"/v1/jobs/{JOB}/stop")
            wait_for(
                "the job to stop",
                lambda: client.get(f"/v1/jobs/{JOB}").json()["state"] in ("STOPPED", "FAILED"),
                90,
            )
            print(f"demo: {JOB} is stopped; stopping the node ...", flush=True)
        except (httpx.HTTPError, SystemExit) as exc:
            print(f"demo: could not stop the job cleanly: {exc}", file=sys.stderr)
        if node.poll() is None:
            node.send_signal(signal.SIGTERM)
            try:
                node.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        print("demo: done; nothing left running.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
