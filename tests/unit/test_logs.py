"""Structured logs: one JSON object per line carrying the ids bound where it was
logged; Ray workers' other output wrapped into such objects; readable text on request."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from scheduler.core.logs import (
    JsonFormatter,
    TextFormatter,
    bound,
    configure_logging,
    log_context,
    wrap_foreign_line,
)


@pytest.fixture
def capture() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    configure_logging("DEBUG", fmt="json", node="n1", process="tests", stream=stream)
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_every_line_is_one_json_object_with_the_bound_ids(capture: io.StringIO) -> None:
    log = logging.getLogger("drover.test")
    log.info("plain")
    with log_context(group="g1"):
        with log_context(job="orders", run=7):
            log.warning("two\nlines %s", "here")
        log.info("group only")
    try:
        raise ValueError("boom")
    except ValueError:
        with log_context(request_id="abc"):
            log.exception("failed")
    lines = capture.getvalue().splitlines()
    assert len(lines) == 4  # the newline and the traceback are inside their objects
    plain, job, group, failed = records(capture)
    assert plain["message"] == "plain" and plain["node"] == "n1" and plain["process"] == "tests"
    assert plain["level"] == "INFO" and plain["logger"] == "drover.test"
    assert str(plain["ts"]).endswith("Z") and "job" not in plain
    assert job["message"] == "two\nlines here"
    assert (job["group"], job["job"], job["run"]) == ("g1", "orders", 7)
    assert group["group"] == "g1" and "job" not in group
    assert failed["request_id"] == "abc" and "ValueError: boom" in str(failed["exception"])
    assert bound() == {}


def test_extra_fields_are_kept_and_colour_messages_dropped(capture: io.StringIO) -> None:
    logging.getLogger("uvicorn.error").info(
        "Started", extra={"color_message": "\x1b[36mStarted\x1b[0m", "port": 8000}
    )
    (doc,) = records(capture)
    assert doc["port"] == 8000 and "color_message" not in doc


def test_bindings_stay_in_their_thread(capture: io.StringIO) -> None:
    seen: list[object] = []

    def other() -> None:
        seen.append(dict(bound()))

    with log_context(job="mine"):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        assert bound() == {"job": "mine"}
    assert seen == [{}]


def test_none_unbinds() -> None:
    with log_context(job="a", run=1):
        with log_context(run=None):
            assert bound() == {"job": "a"}


def test_text_format_shows_the_ids_before_a_traceback() -> None:
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "bad %s", ("thing",), None)
    try:
        raise KeyError("k")
    except KeyError:
        import sys

        record.exc_info = sys.exc_info()
    with log_context(job="orders"):
        text = TextFormatter().format(record)
    first, _, rest = text.partition("\n")
    assert first.endswith("job=orders]") and "ERROR x: bad thing" in first
    assert "KeyError" in rest


def test_ray_worker_lines_become_records() -> None:
    ours = JsonFormatter().format(
        logging.LogRecord("drover.a", logging.INFO, __file__, 1, "hello", None, None)
    )
    data = {"pid": 42, "actor_name": "JobReconciler", "is_err": True}
    assert wrap_foreign_line(ours + "\n", data) == ours  # ours pass as they are
    assert wrap_foreign_line("   \n", data) is None
    wrapped = wrap_foreign_line("Traceback (most recent call last):", data)
    assert wrapped is not None
    doc = json.loads(wrapped)
    assert doc["logger"] == "ray.worker" and doc["process"] == "JobReconciler"
    assert doc["pid"] == 42 and doc["level"] == "ERROR" and doc["stream"] == "stderr"
    # something that merely looks like JSON is wrapped, not passed
    doc = json.loads(wrap_foreign_line('{"not": "ours"}', data) or "")
    assert doc["message"] == '{"not": "ours"}'
    text = wrap_foreign_line("some output", data, fmt="text")
    assert text == "some output [ray JobReconciler pid=42]"


def test_ray_loggers_are_quiet_and_ours(capture: io.StringIO) -> None:
    ray_logger = logging.getLogger("ray")
    assert ray_logger.level == logging.ERROR and ray_logger.propagate
    assert not ray_logger.handlers
    ray_logger.warning("Token authentication is enabled")
    ray_logger.error("a real problem")
    (doc,) = records(capture)
    assert doc["message"] == "a real problem" and doc["logger"] == "ray"


def test_a_bad_format_is_refused() -> None:
    with pytest.raises(ValueError):
        configure_logging(fmt="xml", stream=io.StringIO())
