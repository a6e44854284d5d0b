"""Test pipeline: a self-fencing stream that records which run committed each micro-batch.

    batch_ids.py --output DIR [--app-name NAME] [--rows-per-second 2] [--trigger-seconds 2]
        [--commit-log FILE]

Spark's ``rate`` source, checkpointed at the run's checkpoint location (Drover's); for every
micro-batch, after the fence check (``drover_runtime``), one file ``DIR/<batch id, 6 digits>``
holding ``<run id> <rows>``, written atomically (a replayed batch rewrites its own file). A run
resumed from a copied checkpoint goes on with the next batch id: the files say which run wrote
which batch; with ``--commit-log`` each batch handed to Spark to commit also appends
``<batch id> <run id> <time>`` to FILE (``drover_runtime.record_commit``), so a batch committed by
two runs shows. The application registers under ``--app-name`` (unique per test run), not Drover's
name, like most real pipelines.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import DataFrame, SparkSession

try:  # shipped next to the pipeline (py-file of the standalone backend)
    from drover_runtime import RunContext
except ImportError:  # imported from the repository
    from pipelines.drover_runtime import RunContext  # type: ignore[no-redef]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--app-name", default="batch-ids")
    parser.add_argument("--rows-per-second", type=int, default=2)
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument("--commit-log", default=None)
    args = parser.parse_args(argv)
    spark = SparkSession.builder.appName(args.app_name).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    ctx = RunContext.from_spark(spark)
    os.makedirs(args.output, exist_ok=True)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        rows = batch.count()
        path = os.path.join(args.output, f"{batch_id:06d}")
        with open(path + ".tmp", "w") as out:
            out.write(f"{ctx.run_id} {rows}\n")
        os.replace(path + ".tmp", path)

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .load()
        .writeStream.queryName("batch_ids")
        .option("checkpointLocation", ctx.checkpoint_location)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .foreachBatch(ctx.fenced(write_batch, commit_log=args.commit_log))
        .start()
    )
    return ctx.await_termination(query)


if __name__ == "__main__":
    sys.exit(main())
