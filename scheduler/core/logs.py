"""Logging of the node process and its actors: one JSON object per line, or readable text.

Every record carries what is known of where it comes from:

- ``node`` and ``process`` (``api``, ``supervisor``, ``membership``, ``reconciler``; set once per
  process by :func:`configure_logging`) and ``pid``;
- ``group``, ``job``, ``run`` and ``request_id`` when the code that logs runs inside
  :func:`log_context` (the reconcile loop binds its group, then each job and run it works on;
  the API binds each request's id). The binding lives in a :mod:`contextvars` variable, so it
  follows a request through ``await`` and is private to a worker thread.

JSON (``DROVER_LOG_FORMAT=json``, the default) is what log shippers read::

    {"ts": "2026-11-24T21:48:31.643Z", "level": "INFO", "logger": "scheduler.backends.standalone",
     "message": "submitted ...", "node": "a1", "process": "reconciler", "pid": 21308,
     "group": "g1", "job": "orders-enrich", "run": 17}

Text (``DROVER_LOG_FORMAT=text``) is for a person at a terminal in development.

Ray's own output: the actors are Ray worker processes whose stdout and stderr Ray writes to files;
the node process follows them (``scheduler.actors.worker_output``, in place of Ray's log monitor
process and its printer, which prefixes every line with a coloured ``(Actor pid=...)``) and prints
them through :func:`worker_output_printer`: a line that already is one of our JSON objects is
printed as it is, anything else a worker prints (a stray ``print``, a native crash) is wrapped into
one. Ray's own loggers are quiet (``DROVER_RAY_LOG_LEVEL``, ``ERROR`` by default).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import IO, Any

__all__ = [
    "FORMATS",
    "JsonFormatter",
    "TextFormatter",
    "bound",
    "configure_from",
    "configure_logging",
    "log_context",
    "worker_output_printer",
    "wrap_foreign_line",
]

FORMATS = ("json", "text")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: ids bound by the code running now (see :func:`log_context`)
_CONTEXT: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "drover_log_context", default=None
)
#: who this process is (node id, process role): set once by configure_logging
_PROCESS: dict[str, Any] = {}
#: attributes every LogRecord has; anything else was passed with ``extra=`` and is shown
#: (uvicorn's ``color_message`` is its message with terminal colour codes: never shown)
_RESERVED = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName", "color_message"}
)


@contextlib.contextmanager
def log_context(**ids: Any) -> Iterator[None]:
    """Bind ``ids`` (``group=``, ``job=``, ``run=``, ``request_id=``) to every record logged
    inside the block, in this thread or task; ``None`` values unbind."""
    current = dict(_CONTEXT.get() or {})
    for key, value in ids.items():
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    token = _CONTEXT.set(current)
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def bound() -> Mapping[str, Any]:
    """The ids bound now (for tests and for handing to another thread)."""
    return _CONTEXT.get() or {}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's own ids: the process's, the bound context's, then ``extra=`` ones."""
    fields: dict[str, Any] = dict(_PROCESS)
    fields.update(_CONTEXT.get() or {})
    for key, value in record.__dict__.items():
        if key not in _RESERVED and not key.startswith("_"):
            fields[key] = value
    return fields


def _timestamp(created: float) -> str:
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in messages are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for key, value in _fields(record).items():
            doc.setdefault(key, _jsonable(value))
        if record.exc_info:
            doc["exception"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        elif record.exc_text:
            doc["exception"] = record.exc_text
        if record.stack_info:
            doc["stack"] = record.stack_info
        return json.dumps(doc, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message [node=.. group=.. job=..]`` for people."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = _fields(record)
        fields.pop("pid", None)
        ids = " ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, ""))
        if not ids:
            return line
        head, sep, tail = line.partition("\n")  # ids before a traceback, not after it
        return f"{head} [{ids}]{sep}{tail}"


def formatter_for(fmt: str) -> logging.Formatter:
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {FORMATS}, not {fmt!r}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


def _level(value: str | int) -> int:
    if isinstance(value, int):
        return value
    level = logging.getLevelName(value.strip().upper())
    if not isinstance(level, int):
        raise ValueError(f"not a log level: {value!r}")
    return level


def configure_logging(
    level: str | int | None = None,
    *,
    fmt: str | None = None,
    node: str | None = None,
    process: str | None = None,
    ray_level: str | int | None = None,
    stream: IO[str] | None = None,
) -> None:
    """Send every record of this process to ``stream`` (stderr) in one format.

    Unset arguments come from ``DROVER_LOG_LEVEL`` (INFO), ``DROVER_LOG_FORMAT`` (json) and
    ``DROVER_RAY_LOG_LEVEL`` (ERROR), so the actors' processes, which inherit the node's
    environment, log as the node does. Safe to call again (the handler is replaced).
    """
    fmt = fmt or os.environ.get("DROVER_LOG_FORMAT", "json") or "json"
    root_level = _level(level if level is not None else os.environ.get("DROVER_LOG_LEVEL", "INFO"))
    quiet_level = _level(
        ray_level if ray_level is not None else os.environ.get("DROVER_RAY_LOG_LEVEL", "ERROR")
    )
    if node is not None:
        _PROCESS["node"] = node
    if process is not None:
        _PROCESS["process"] = process
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter_for(fmt))
    handler.set_name("drover")
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(root_level)
    logging.captureWarnings(True)  # warnings.warn(...) become records too
    # Ray installs its own handler (and format) on its loggers: ours instead, quiet by default
    for name in ("ray", "ray.data", "ray.tune", "ray.rllib", "ray.train", "ray.serve"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.propagate = True
        logger.setLevel(quiet_level)
    # uvicorn's loggers propagate to ours at our level (the node passes log_config=None; an
    # earlier uvicorn.Config in the same process may have set its own level on them)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
        logger.disabled = False
    # alembic reports every schema check at INFO; readiness probes run one each time
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # httpx logs every request at INFO: one line per job and tick against a Spark REST server
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)


# -- Ray workers' output, as the node process prints it ---------------------------------------


def _looks_like_ours(line: str) -> bool:
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        doc = json.loads(line)
    except ValueError:
        return False
    return isinstance(doc, dict) and "level" in doc and "message" in doc


def wrap_foreign_line(line: str, data: Mapping[str, Any], fmt: str = "json") -> str | None:
    """One line a Ray worker printed, as the node prints it (None: print nothing).

    Our own records pass as they are; anything else becomes a record of the logger
    ``ray.worker`` naming the actor and pid it came from.
    """
    line = line.rstrip("\r\n")
    if not line.strip():
        return None
    if fmt == "json" and _looks_like_ours(line):
        return line
    if fmt == "text" and not line.startswith("{"):
        who = data.get("actor_name") or data.get("task_name") or "worker"
        return f"{line} [ray {who} pid={data.get('pid')}]"
    if fmt == "text":
        return line
    doc: dict[str, Any] = {
        "ts": _timestamp(time.time()),
        "level": "ERROR" if data.get("is_err") and "Traceback" in line else "INFO",
        "logger": "ray.worker",
        "message": line,
        "pid": data.get("pid"),
    }
    doc.update({k: v for k, v in _PROCESS.items() if k == "node"})
    who = data.get("actor_name") or data.get("task_name")
    if who:
        doc["process"] = str(who)
    doc["stream"] = "stderr" if data.get("is_err") else "stdout"
    return json.dumps(doc, ensure_ascii=False, default=str)


def worker_output_printer(
    fmt: str | None = None, stream: IO[str] | None = None
) -> Callable[[Mapping[str, Any]], None]:
    """What prints the actors' output in the node process (``scheduler.actors.worker_output`` hands
    it each file's new lines, in the shape of Ray's log monitor: ``lines``, ``pid``,
    ``is_err``, ``actor_name``): our own records as they are, anything else wrapped into one
    (:func:`wrap_foreign_line`), to ``stream`` (stderr)."""
    fmt = fmt or os.environ.get("DROVER_LOG_FORMAT", "json") or "json"

    def emit(data: Mapping[str, Any]) -> None:
        sink = stream or sys.stderr
        out = [wrap_foreign_line(str(line), data, fmt) for line in data.get("lines", ())]
        text = "".join(f"{line}\n" for line in out if line is not None)
        if text:
            try:
                sink.write(text)
                sink.flush()
            except (OSError, ValueError):  # a closed stream at shutdown
                pass

    return emit


def configure_from(settings: Any, process: str) -> None:
    """:func:`configure_logging` from a node's :class:`~scheduler.config.Settings`."""
    configure_logging(
        settings.log_level,
        fmt=settings.log_format,
        node=settings.node_id,
        process=process,
        ray_level=settings.ray_log_level,
    )
