"""What every Drover pipeline uses to know which run it is, and to fence itself.

A pipeline does::

    spark = SparkSession.builder.getOrCreate()     # never set the app name: Drover sets it
    ctx = RunContext.from_spark(spark)
    ...
    def write_batch(df, batch_id):
        ctx.on_batch(batch_id)                       # before anything becomes visible
        ...

Drover passes the run's identity as Spark properties (``spark.drover.job``, ``spark.drover.runId``,
``spark.drover.fencingToken``, ``spark.drover.checkpointLocation``) and, for backends that cannot
set Spark properties, as the environment variables ``DROVER_JOB``, ``DROVER_RUN_ID``,
``DROVER_FENCING_TOKEN`` and ``DROVER_CHECKPOINT_LOCATION``. Spark properties win.

Self-fencing (invariant 6) -- the extension point
-------------------------------------------------
:meth:`RunContext.on_batch` asks ``fence_check(ctx, batch_id)`` whether this run is still the
job's current run, before each micro-batch is committed. ``True`` means go on; ``False`` makes
``on_batch`` raise :class:`FencedOut`, which fails the batch, so nothing of it is committed and
the query stops. The default check (:func:`always_current`) always says ``True``: the real check
(comparing ``fencing_token`` with the job's current run in Drover) is to be plugged in here by
passing ``fence_check=`` to :meth:`RunContext.from_spark` -- pipelines need not change.

Only the standard library and pyspark are used, so the module can ship with any pipeline.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONF_PREFIX = "spark.drover."
#: Spark property -> environment variable fallback, per RunContext field
_KEYS = {
    "job": ("spark.drover.job", "DROVER_JOB"),
    "run_id": ("spark.drover.runId", "DROVER_RUN_ID"),
    "fencing_token": ("spark.drover.fencingToken", "DROVER_FENCING_TOKEN"),
    "checkpoint_location": ("spark.drover.checkpointLocation", "DROVER_CHECKPOINT_LOCATION"),
}
#: the prefix of the line :meth:`RunContext.announce` prints; cluster backends look for it
STARTED_LINE_PREFIX = "drover-runtime: started"

FenceCheck = Callable[["RunContext", int], bool]


def always_current(ctx: RunContext, batch_id: int) -> bool:
    """The placeholder fence check: every run is current (no fencing yet)."""
    return True


class FencedOut(RuntimeError):
    """This run is no longer the job's current run: it must not commit anything more."""


@dataclass(frozen=True)
class RunContext:
    """The identity of one run of a job, as Drover handed it to the pipeline.

    Fields are empty strings when the pipeline runs outside Drover (see :attr:`managed`).
    """

    job: str = ""
    run_id: str = ""
    fencing_token: str = ""
    checkpoint_location: str = ""
    app_id: str = ""
    #: returns True while this run is the job's current run; see the module docstring
    fence_check: FenceCheck = field(default=always_current, compare=False, repr=False)

    @classmethod
    def from_spark(
        cls,
        spark: SparkSession,
        *,
        fence_check: FenceCheck | None = None,
        announce: bool = True,
    ) -> RunContext:
        """Read the run's identity from the session's Spark conf, falling back to DROVER_* env.

        With ``announce`` (the default) prints one ``drover-runtime: started ...`` line carrying
        the Spark application id to stderr, where the cluster backend reads it.
        """
        conf = spark.sparkContext.getConf()
        values = {}
        for name, (prop, env) in _KEYS.items():
            value = conf.get(prop, None)
            values[name] = value if value else os.environ.get(env, "")
        ctx = cls(
            app_id=spark.sparkContext.applicationId or "",
            fence_check=fence_check or always_current,
            **values,
        )
        if announce:
            ctx.announce()
        return ctx

    @property
    def managed(self) -> bool:
        """True when Drover started this run (it carries a job, a run id and a fencing token)."""
        return bool(self.job and self.run_id and self.fencing_token)

    def announce(self) -> None:
        print(
            f"{STARTED_LINE_PREFIX} app_id={self.app_id or '-'} job={self.job or '-'} "
            f"run_id={self.run_id or '-'}",
            file=sys.stderr,
            flush=True,
        )

    def is_current(self, batch_id: int) -> bool:
        """Whether this run may still commit micro-batch ``batch_id``."""
        return bool(self.fence_check(self, batch_id))

    def on_batch(self, batch_id: int) -> None:
        """Call before committing a micro-batch; raises :class:`FencedOut` if the run is stale."""
        if not self.is_current(batch_id):
            raise FencedOut(
                f"run {self.run_id} of job {self.job} is no longer current "
                f"(fencing token {self.fencing_token}); refusing to commit batch {batch_id}"
            )
