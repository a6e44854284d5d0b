"""Sample pipeline in plain PySpark: no ``drover_runtime``, its own application name. Spark's
built-in ``rate`` source is written as Parquet under ``--output``, with a checkpoint, until the
job is stopped.

    plain_rate_parquet.py --output DIR [--app-name plain-rate-parquet] [--rows-per-second 5]
        [--trigger-seconds 5] [--checkpoint DIR]

Drover starts, stops, restarts and adopts such a pipeline like any other: it finds a run's
driver by what Drover itself submitted and links it to its application by the id the driver
logs, never by the application's name. What it cannot do is fence itself: it never asks Drover
whether its run is still current, so the job reports ``self_fencing: false`` ("no fence checks
seen: not self-fencing") and only a confirmed kill stops a driver stranded on a partitioned
cluster. Use ``drover_runtime`` (see ``rate_counter.py``) where that matters.

The checkpoint defaults to the one Drover assigns the run, read straight from the Spark
property ``spark.drover.checkpointLocation`` (so a restart resumes where the last run stopped).
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import SparkSession


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="Parquet output directory")
    parser.add_argument("--app-name", default="plain-rate-parquet")
    parser.add_argument("--rows-per-second", type=int, default=5)
    parser.add_argument("--trigger-seconds", type=float, default=5.0)
    parser.add_argument("--checkpoint", default=None, help="overrides the run's checkpoint")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = SparkSession.builder.appName(args.app_name).getOrCreate()
    checkpoint = args.checkpoint or spark.conf.get("spark.drover.checkpointLocation", "")
    if not checkpoint:
        print("plain_rate_parquet: no checkpoint (--checkpoint or Drover's)", file=sys.stderr)
        return 2
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .load()
        .writeStream.queryName("plain_rate_parquet")
        .format("parquet")
        .option("path", args.output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .start()
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
