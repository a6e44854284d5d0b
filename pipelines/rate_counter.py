"""Sample pipeline that names its own application -- ``builder.appName("rate-counter")``, as most
real pipelines do -- and fences itself with ``drover_runtime``: counts the rows of Spark's
built-in ``rate`` source per micro-batch and writes one row per batch (``batch_id``, ``rows``,
``run_id``) as Parquet under ``--output``, partitioned by ``batch_id`` (a replayed batch
overwrites its own partition).

    rate_counter.py --output DIR [--app-name rate-counter] [--rows-per-second 5]
        [--trigger-seconds 5] [--checkpoint DIR] [--commit-log DIR]

Drover does not need the application to carry its ``drover:<job>:<run>`` name: it links a run
to its application by the id the driver itself reports (see ``scheduler/backends/driverlog.py``).
The checkpoint defaults to the run's checkpoint location (``spark.drover.checkpointLocation``).

``--commit-log DIR`` keeps a record of which run wrote and which committed each batch, that a
replayed partition cannot overwrite: an empty file ``<batch id, 8 digits>.<run id>.wrote`` once
the batch is written, and ``<batch id>.<run id>.committed`` once Spark committed it -- known when
the next batch of the same run begins (Spark starts a micro-batch only after it committed the
one before), so the last batch a run committed before it ended has no such file. A batch written
by two runs is a replay (the first died before Spark committed it); one committed by two runs is
a double run (the chaos checker's ``double_commit``).
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

try:  # shipped next to the pipeline (py-file of the standalone backend, or the script dir)
    from drover_runtime import RunContext
except ImportError:  # imported from the repository
    from pipelines.drover_runtime import RunContext  # type: ignore[no-redef]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="Parquet output directory")
    parser.add_argument("--app-name", default="rate-counter", help="the application's own name")
    parser.add_argument("--rows-per-second", type=int, default=5)
    parser.add_argument("--trigger-seconds", type=float, default=5.0)
    parser.add_argument("--checkpoint", default=None, help="overrides the run's checkpoint")
    parser.add_argument("--commit-log", default=None, help="record each batch's run (see above)")
    return parser.parse_args(argv)


class CommitLog:
    """The ``--commit-log`` files of one run (see the module docstring)."""

    def __init__(self, directory: str, run_id: str) -> None:
        self.directory = directory
        self.run_id = run_id or "unmanaged"
        self.uncommitted: set[int] = set()
        os.makedirs(directory, exist_ok=True)

    def _touch(self, batch_id: int, what: str) -> None:
        path = os.path.join(self.directory, f"{batch_id:08d}.{self.run_id}.{what}")
        with open(path, "a"):
            pass

    def starting(self, batch_id: int) -> None:
        """Batch ``batch_id`` begins: Spark committed every earlier one this run wrote."""
        for done in sorted(b for b in self.uncommitted if b < batch_id):
            self._touch(done, "committed")
            self.uncommitted.discard(done)

    def wrote(self, batch_id: int) -> None:
        self._touch(batch_id, "wrote")
        self.uncommitted.add(batch_id)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = SparkSession.builder.appName(args.app_name).getOrCreate()
    ctx = RunContext.from_spark(spark)
    checkpoint = args.checkpoint or ctx.checkpoint_location
    if not checkpoint:
        print("rate_counter: no checkpoint location (--checkpoint or Drover's)", file=sys.stderr)
        return 2
    rates = spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second).load()

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        (
            batch.agg(F.count(F.lit(1)).alias("rows"))
            .withColumn("run_id", F.lit(ctx.run_id))
            .withColumn("batch_id", F.lit(batch_id))
            .write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy("batch_id")
            .parquet(args.output)
        )

    fenced = ctx.fenced(write_batch)  # self-fencing: a stale run commits nothing
    log = CommitLog(args.commit_log, ctx.run_id) if args.commit_log else None

    def batch(frame: DataFrame, batch_id: int) -> None:
        if log is not None:
            log.starting(batch_id)
        fenced(frame, batch_id)
        if log is not None:
            log.wrote(batch_id)

    query = (
        rates.writeStream.queryName("rate_counter")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .foreachBatch(batch)
        .start()
    )
    return ctx.await_termination(query)  # 0 also when fenced out


if __name__ == "__main__":
    sys.exit(main())
