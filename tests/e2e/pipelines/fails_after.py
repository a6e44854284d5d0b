"""Test pipeline: a job that fails rarely -- runs a SparkSession, then exits with code 1 once
``--after`` seconds have passed since the process started.

    fails_after.py --after SECONDS

Used by the restart-policy end-to-end test: failures spaced further apart than
``validity_interval / (max_attempts - 1)`` never exhaust the restart budget.
"""

import argparse
import sys
import time

STARTED = time.monotonic()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", type=float, required=True)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    spark.range(10).count()  # the application really runs (an executor did some work)
    while time.monotonic() - STARTED < args.after:
        time.sleep(0.2)
    print("fails_after: failing on purpose", file=sys.stderr)
    spark.stop()
    return 1


if __name__ == "__main__":
    sys.exit(main())
