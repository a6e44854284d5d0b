"""What a driver's own log says about it: the driver <-> application link.

A pipeline may name its application whatever it likes (``SparkSession.builder.appName(...)``
overrides the ``spark.app.name`` Drover submits), so an application's registered name cannot
tell which driver, and so which run, it belongs to. Its *id* can: every driver writes it into its
own log once the application has registered, whatever the application is called. This module
reads those lines; the backends decide when to read (see ``standalone.py`` and ``local.py``).

Lines that carry the link (the first found wins; a value of ``-`` is ignored):

- ``INFO StandaloneSchedulerBackend: Connected to Spark cluster with app ID app-...`` -- Spark's
  standalone scheduler backend, on the driver's stderr the moment the master registered the
  application (measured on Spark 4.3: the same second the application appears in the master's
  ``/json/``). INFO level: a cluster whose log4j configuration hides INFO for
  ``org.apache.spark.scheduler.cluster.StandaloneSchedulerBackend`` hides it too;
- ``INFO YarnClientImpl: Submitted application application_...`` -- YARN client mode;
- ``drover-runtime: started app_id=...`` -- printed by ``pipelines/drover_runtime.py`` from the
  pipeline's own SparkContext, whatever the log configuration (on a standalone worker Python's
  stderr lands in the driver's *stdout* file).

The launch command a standalone worker writes at the top of the driver's stderr carries the
run's tag (``spark.drover.appTag``, see :func:`app_name_from_launch_command`), which is how a
driver is tied to its run in the first place: the worker writes it from the submission, and no
pipeline code runs before it.

Spark's worker serves a driver's logs at ``<worker UI>/log/?driverId=..&logType=stderr|stdout&
offset=..&byteLength=..``; the answer starts with ``==== Bytes <from>-<to> of <total> of <path>
====``, so a log can be read in increments (:class:`LogCursor`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

APP_TAG_PROPERTY = "spark.drover.appTag"
#: the Spark property that carries the run's fence tag (``fence_tag_of_digest``; hex, so never
#: redacted): which token the driver was given, for the stray sweep
FENCE_TAG_PROPERTY = "spark.drover.fenceTag"
#: the line prefix of ``pipelines/drover_runtime.py``'s announcement (kept in step with it)
RUNTIME_STARTED = b"drover-runtime: started"

_APP_ID_LINES: tuple[re.Pattern[bytes], ...] = (
    re.compile(rb"Connected to Spark cluster with app ID (\S+)"),
    re.compile(rb"YarnClientImpl: Submitted application (application_\d+_\d+)"),
    re.compile(re.escape(RUNTIME_STARTED) + rb" app_id=(\S+)"),
)
_TAG = re.compile(r"-D" + re.escape(APP_TAG_PROPERTY) + r"=([0-9a-f]+)")
_FENCE_TAG = re.compile(r"-D" + re.escape(FENCE_TAG_PROPERTY) + r"=([0-9a-f]+)")
_APP_NAME = re.compile(r'"-Dspark\.app\.name=((?:[^"\\]|\\.)*)"')
_PAGE_HEADER = re.compile(rb"^==== Bytes (\d+)-(\d+) of (\d+) of [^\n]* ====\r?\n")
#: a partial line longer than this is dropped (no line of interest is that long)
MAX_CARRY = 1 << 20


def log4j2_properties(header: str, loggers: Sequence[tuple[str, str, str]]) -> str:
    """A log4j2 configuration (properties format) for a Spark process Drover starts: WARN and
    above on stderr, and each of ``loggers`` -- (key, logger name, level) -- at its own level
    (the INFO lines Drover reads). ``header`` is its first line's comment."""
    lines = [
        f"# {header}",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.stdout.ref = console",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex",
    ]
    for key, name, level in loggers:
        lines += [f"logger.{key}.name = {name}", f"logger.{key}.level = {level}"]
    return "\n".join(lines) + "\n"


def app_tag(app_name: str) -> str:
    """The redaction-proof form of a run's tag carried in ``spark.drover.appTag``."""
    return app_name.encode("utf-8").hex()


def app_name_from_launch_command(text: str) -> str | None:
    """The run's tag in a driver's ``Launch Command`` header, or None if it is not there.

    Spark redacts values whose key *or value* matches ``spark.redaction.regex``
    (``secret|password|token|access.?key``): a job named ``token-refresher`` loses its
    ``spark.app.name`` there, never its hex ``spark.drover.appTag``."""
    match = _TAG.search(text)
    if match is not None:
        try:
            return bytes.fromhex(match.group(1)).decode("utf-8")
        except ValueError:
            pass
    match = _APP_NAME.search(text)
    if match is not None and "redacted" not in match.group(1):
        return match.group(1).replace('\\"', '"')
    return None


def fence_tag_from_launch_command(text: str) -> str | None:
    """The fence tag in a driver's ``Launch Command`` header (its 16 hex digits), or None."""
    match = _FENCE_TAG.search(text)
    return match.group(1) if match is not None else None


def app_id_in(line: bytes) -> str | None:
    """The application id a driver log line reports, or None."""
    for pattern in _APP_ID_LINES:
        match = pattern.search(line)
        if match is not None:
            value = match.group(1).decode("utf-8", errors="replace")
            if value != "-":
                return value
    return None


@dataclass(frozen=True)
class LogPage:
    """One answer of a worker's ``/log/`` endpoint."""

    start: int
    end: int
    total: int
    data: bytes


def parse_log_page(body: bytes) -> LogPage | None:
    """Split a ``/log/`` answer into its byte range and content; None if it is not one."""
    match = _PAGE_HEADER.match(body)
    if match is None:
        return None
    start, end, total = (int(match.group(i)) for i in (1, 2, 3))
    return LogPage(start, end, total, body[match.end() :])


@dataclass
class LogCursor:
    """Reads a growing log in increments, handing out complete lines only."""

    offset: int = 0
    carry: bytes = b""
    #: the log's size at the last read
    total: int = 0

    def feed(self, page: LogPage) -> list[bytes]:
        """The complete lines ``page`` adds (a partial last line waits for the next page)."""
        if page.start < self.offset and page.end <= self.offset and page.total >= self.offset:
            return []  # read concurrently and already seen
        if page.start != self.offset:  # not where we stopped (log replaced): go on from there
            self.carry = b""
        lines = (self.carry + page.data).split(b"\n")
        self.carry = lines.pop()
        if len(self.carry) > MAX_CARRY:
            self.carry = b""
        self.offset, self.total = page.end, page.total
        return lines

    @property
    def at_end(self) -> bool:
        return self.offset >= self.total
