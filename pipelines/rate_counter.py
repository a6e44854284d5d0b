"""Sample pipeline that names its own application -- ``builder.appName("rate-counter")``, as most
real pipelines do -- and fences itself with ``drover_runtime``: counts the rows of Spark's
built-in ``rate`` source per micro-batch and writes one row per batch (``batch_id``, ``rows``,
``run_id``) as Parquet under ``--output``, partitioned by ``batch_id`` (a replayed batch
overwrites its own partition).

    rate_counter.py --output DIR [--app-name rate-counter] [--rows-per-second 5]
        [--trigger-seconds 5] [--checkpoint DIR] [--commit-log FILE]

With ``--commit-log`` every batch the run hands to Spark to commit also appends
``<batch id> <run id> <unix time>`` to FILE (``drover_runtime.read_commit_log`` reads it): which
run committed which batch, so a checker can tell that no batch was committed by two runs.

Drover does not need the application to carry its ``drover:<job>:<run>`` name: it links a run
to its application by the id the driver itself reports (see ``scheduler/backends/driverlog.py``).
The checkpoint defaults to the run's checkpoint location (``spark.drover.checkpointLocation``).
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--commit-log", default=None, help="append '<batch> <run> <time>' lines")
    return parser.parse_args(argv)


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
        ctx.write_parquet(batch.agg(F.count(F.lit(1)).alias("rows")), batch_id, args.output)

    query = (
        rates.writeStream.queryName("rate_counter")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        # self-fencing: a stale run (or one whose lease lapsed) commits nothing
        .foreachBatch(ctx.fenced(write_batch, commit_log=args.commit_log))
        .start()
    )
    return ctx.await_termination(query)  # 0 also when fenced out


if __name__ == "__main__":
    sys.exit(main())
