"""Test pipeline: a job that always fails -- exits with code 1 at once, before any Spark work.

Used by the restart-policy end-to-end test: Drover must retry it ``max_attempts`` times within the
failure-validity interval, then mark it FAILED with the reason.
"""

import sys

print("always_fails: failing on purpose", file=sys.stderr)
sys.exit(1)
