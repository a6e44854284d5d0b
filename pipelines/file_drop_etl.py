"""Sample pipeline: files dropped into a directory -> cleaned, typed Parquet, until killed.

Streaming file source over ``--input`` (CSV with a header line, or JSON lines), read with an
explicit schema (every field as a string, so nothing is lost before cleaning) and at most
``--max-files-per-trigger`` new files per micro-batch. Each order record::

    order_id,customer,country,amount,ordered_at
    17,  Ada  Lovelace ,gb,12.50,2024-05-01 10:00:00

Cleaning, per micro-batch (in ``foreachBatch``, after the run's fence check):

- rows the reader flags as malformed are dropped;
- strings are trimmed; ``customer`` has inner runs of blanks collapsed to one space;
  ``country`` is upper-cased and must be two letters A-Z;
- typed columns: ``order_id`` BIGINT > 0, ``amount`` DECIMAL(12,2) >= 0, ``ordered_at``
  TIMESTAMP; a value that does not convert (or is missing or blank) drops the row;
- duplicates of an ``order_id`` within the batch keep the latest ``ordered_at`` (then the
  highest ``amount``, then the last file name);
- added: ``source_file`` (name of the file the row came from), ``ingested_at`` (when the batch
  was written), ``run_id``, ``batch_id``.

The result is written as Parquet under ``--output``, partitioned by ``batch_id``; a replayed batch
(the run died after writing it but before committing it) overwrites its own partition only.
The checkpoint (by default the run's checkpoint location) remembers which files were read: a
restart reads only new files and continues the batch ids. Files must appear atomically (write
elsewhere or under a name starting with ``.`` or ``_``, then rename into ``--input``).

    spark-submit --name <app> pipelines/file_drop_etl.py --input DIR --output DIR
        [--format csv|json] [--trigger-seconds 5] [--max-files-per-trigger 10]
        [--checkpoint DIR]

Arguments:

- ``--input``: the directory files are dropped into (created if missing);
- ``--output``: the Parquet output directory;
- ``--format``: ``csv`` (default; header line, comma-separated) or ``json`` (one object a line);
- ``--trigger-seconds``: processing-time trigger (default 5);
- ``--max-files-per-trigger``: new files per micro-batch at most (default 10);
- ``--checkpoint``: overrides the run's checkpoint location (``spark.drover.checkpointLocation``).

The app name is never set here: spark-submit's ``--name`` must win.
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

try:  # shipped next to the pipeline (py-file of the standalone backend, or the script dir)
    from drover_runtime import RunContext
except ImportError:  # imported from the repository
    from pipelines.drover_runtime import RunContext  # type: ignore[no-redef]

FIELDS = ("order_id", "customer", "country", "amount", "ordered_at")
CORRUPT = "_corrupt_record"
#: what the reader sees: every field a string, plus the reader's malformed-row marker
RAW_SCHEMA = StructType(
    [StructField(name, StringType(), True) for name in FIELDS]
    + [StructField(CORRUPT, StringType(), True)]
)
OUTPUT_COLUMNS = (*FIELDS, "source_file")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="directory files are dropped into")
    parser.add_argument("--output", required=True, help="Parquet output directory")
    parser.add_argument("--format", choices=("csv", "json"), default="csv")
    parser.add_argument("--trigger-seconds", type=float, default=5.0)
    parser.add_argument("--max-files-per-trigger", type=int, default=10)
    parser.add_argument("--checkpoint", default=None, help="overrides the run's checkpoint")
    return parser.parse_args(argv)


def read_drops(spark: SparkSession, path: str, fmt: str, max_files: int) -> DataFrame:
    """The stream of raw rows of the files dropped into ``path``, with their file's name."""
    reader = (
        spark.readStream.schema(RAW_SCHEMA)
        .option("maxFilesPerTrigger", max_files)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
    )
    if fmt == "csv":
        reader = reader.option("header", "true").option("enforceSchema", "true")
        raw = reader.csv(path)
    else:
        raw = reader.json(path)
    return raw.withColumn("source_file", F.col("_metadata.file_name"))


def _blank_to_null(col: Column) -> Column:
    trimmed = F.trim(col)
    return F.when(trimmed == "", None).otherwise(trimmed)


def clean(raw: DataFrame) -> DataFrame:
    """Drop malformed rows, normalise and type the fields, keep valid rows only (no dedupe)."""
    typed = raw.where(F.col(CORRUPT).isNull()).select(
        _blank_to_null(F.col("order_id")).try_cast("bigint").alias("order_id"),
        F.regexp_replace(_blank_to_null(F.col("customer")), r"\s+", " ").alias("customer"),
        F.upper(_blank_to_null(F.col("country"))).alias("country"),
        _blank_to_null(F.col("amount")).try_cast("decimal(12,2)").alias("amount"),
        F.try_to_timestamp(_blank_to_null(F.col("ordered_at"))).alias("ordered_at"),
        F.col("source_file"),
    )
    return typed.where(
        F.col("order_id").isNotNull()
        & (F.col("order_id") > 0)
        & F.col("customer").isNotNull()
        & F.col("country").rlike("^[A-Z]{2}$")
        & F.col("amount").isNotNull()
        & (F.col("amount") >= 0)
        & F.col("ordered_at").isNotNull()
    )


def dedupe(rows: DataFrame) -> DataFrame:
    """One row per ``order_id``: the latest ``ordered_at``, then the highest amount, last file."""
    newest = Window.partitionBy("order_id").orderBy(
        F.col("ordered_at").desc(), F.col("amount").desc(), F.col("source_file").desc()
    )
    return rows.withColumn("_rank", F.row_number().over(newest)).where("_rank = 1").drop("_rank")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = SparkSession.builder.getOrCreate()
    ctx = RunContext.from_spark(spark)
    checkpoint = args.checkpoint or ctx.checkpoint_location
    if not checkpoint:
        print("file_drop_etl: no checkpoint location (--checkpoint or Drover's)", file=sys.stderr)
        return 2
    if "://" not in args.input:
        os.makedirs(args.input, exist_ok=True)  # a file source refuses a missing directory
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", "4")  # small batches: 200 is waste

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        cleaned = dedupe(clean(batch)).withColumn("ingested_at", F.current_timestamp())
        ctx.write_parquet(cleaned, batch_id, args.output)

    query = (
        read_drops(spark, args.input, args.format, args.max_files_per_trigger)
        .writeStream.queryName("file_drop_etl")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .foreachBatch(ctx.fenced(write_batch))  # self-fencing: a stale run commits nothing
        .start()
    )
    return ctx.await_termination(query)  # 0 also when fenced out


if __name__ == "__main__":
    sys.exit(main())
