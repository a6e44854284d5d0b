"""Sample pipeline: windowed counts over Spark's built-in ``rate`` source, until killed.

Stateful streaming: event-time windows of 10 s on ``timestamp`` (watermark 10 s), keyed by
``value % 5``, with the count and sum of ``value``; ``update`` output mode; a processing-time
trigger. Each micro-batch goes through ``foreachBatch``: the run's fence check first (see
``drover_runtime``; a superseded run exits cleanly with code 0), then the
batch is written as Parquet under ``--output``, partitioned by ``batch_id`` -- so ``batch_id=N``
directories show which batches were written, and a restart from the checkpoint continues the
batch ids. A replayed batch (the run died after writing it but before committing it) overwrites
its own partition only, so replays do not duplicate rows.

    spark-submit --name <app> pipelines/windowed_counts.py --output DIR
        [--rows-per-second 5] [--trigger-seconds 5] [--checkpoint DIR] [--shuffle-partitions N]

The checkpoint defaults to the run's checkpoint location (``spark.drover.checkpointLocation``).
The app name is not set here, so the application keeps Drover's ``drover:<job>:<run>``; a
pipeline may name itself instead (``rate_counter.py`` does).
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

WINDOW = "10 seconds"
WATERMARK = "10 seconds"
KEYS = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="Parquet output directory")
    parser.add_argument("--rows-per-second", type=int, default=5)
    parser.add_argument("--trigger-seconds", type=float, default=5.0)
    parser.add_argument("--checkpoint", default=None, help="overrides the run's checkpoint")
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=None,
        help="state partitions for a new checkpoint (default 4 unless set in the Spark conf)",
    )
    return parser.parse_args(argv)


def windowed_counts(rates: DataFrame) -> DataFrame:
    return (
        rates.withWatermark("timestamp", WATERMARK)
        .groupBy(F.window("timestamp", WINDOW), (F.col("value") % KEYS).alias("key"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "key",
            "count",
            "sum",
        )
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = SparkSession.builder.getOrCreate()
    ctx = RunContext.from_spark(spark)
    checkpoint = args.checkpoint or ctx.checkpoint_location
    if not checkpoint:
        print("windowed_counts: no checkpoint location (--checkpoint or Drover's)", file=sys.stderr)
        return 2
    if args.shuffle_partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
    elif not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # 200 state partitions would make every batch crawl in local mode; a restored
        # checkpoint keeps the number it was created with anyway
        spark.conf.set("spark.sql.shuffle.partitions", "4")

    rates = spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second).load()

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        ctx.write_parquet(batch, batch_id, args.output)

    query = (
        windowed_counts(rates)
        .writeStream.queryName("windowed_counts")
        .outputMode("update")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .foreachBatch(ctx.fenced(write_batch))  # self-fencing: a stale run commits nothing
        .start()
    )
    return ctx.await_termination(query)  # 0 also when fenced out


if __name__ == "__main__":
    sys.exit(main())
