"""Test pipeline: a hostile tenant's streaming job that probes what its driver can reach.

    hostile_neighbour.py --report FILE --node-pid PID --data-dir DIR --store FILE
                         --victim-checkpoint DIR --victim-log FILE

Before its stream starts it tries to read the node's environment (``/proc/<pid>/environ``), to
signal the node, to read the store file, to list and write the node's data directory, to read
another team's run log, and to list, read and write another team's job's checkpoint; it writes
what each attempt got (``denied``, ``allowed`` or the error) to ``FILE`` as JSON, then runs a
plain rate stream (checkpointed at its own location) until it is stopped: being refused must
not stop the job.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Callable

from pyspark.sql import SparkSession


def attempt(action: Callable[[], object]) -> str:
    try:
        action()
        return "allowed"
    except PermissionError:
        return "denied"
    except OSError as exc:
        return f"error: {exc}"


def write(path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("written by another team's driver")


def read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("report", "node-pid", "data-dir", "store", "victim-checkpoint", "victim-log"):
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args()
    victim = args.victim_checkpoint
    deadline = time.monotonic() + 60
    while not os.path.isdir(victim) and time.monotonic() < deadline:
        time.sleep(0.2)  # the node makes it when it submits the victim's run
    report: dict[str, object] = {
        "uid": os.getuid(),
        "groups": os.getgroups(),
        "victim_checkpoint_exists": os.path.isdir(victim),
        "node_environ": attempt(lambda: read(f"/proc/{args.node_pid}/environ")),
        "signal_node": attempt(lambda: os.kill(int(args.node_pid), signal.SIGCONT)),
        "store_file": attempt(lambda: read(args.store)),
        "data_dir_list": attempt(lambda: os.listdir(args.data_dir)),
        "data_dir_write": attempt(lambda: write(os.path.join(args.data_dir, "planted"))),
        "runs_list": attempt(lambda: os.listdir(os.path.join(args.data_dir, "runs"))),
        "victim_log": attempt(lambda: read(args.victim_log)),
        "victim_checkpoint_list": attempt(lambda: os.listdir(victim)),
        "victim_checkpoint_read": attempt(lambda: read(os.path.join(victim, "metadata"))),
        "victim_checkpoint_write": attempt(lambda: write(os.path.join(victim, "intruder"))),
        "beside_victim_checkpoint": attempt(
            lambda: os.mkdir(os.path.join(os.path.dirname(victim), "intruder"))
        ),
        "secrets_in_environment": sorted(
            k for k in os.environ if k in ("DROVER_DEPLOYMENT_SECRET", "DROVER_DATABASE_URL")
        ),
    }
    own = os.environ["DROVER_CHECKPOINT_LOCATION"]
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    stream = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 1)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", own)
        .trigger(processingTime="2 seconds")
        .start()
    )
    with open(args.report, "w", encoding="utf-8") as fh:
        json.dump(report, fh)
    stream.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
