"""The node's reading of its actors' output files (scheduler/actors/worker_output.py), without
Ray."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from scheduler.actors.worker_output import WorkerOutputTail, follows
from scheduler.core.logs import worker_output_printer

WORKER_OUT = "worker-0a1b2c-01000000-4242.out"
WORKER_ERR = "worker-0a1b2c-01000000-4242.err"


class Emitted:
    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []

    def __call__(self, data: dict[str, Any]) -> None:
        self.batches.append(data)

    def lines(self, name_or_pid: object = None) -> list[str]:
        return [
            line
            for b in self.batches
            if name_or_pid is None or b["pid"] == name_or_pid
            for line in b["lines"]
        ]


def append(path: Path, text: str) -> None:
    with path.open("ab") as handle:
        handle.write(text.encode())


@pytest.fixture
def emitted() -> Emitted:
    return Emitted()


def tail_of(logs: Path, emitted: Emitted, alive: set[int] | None = None) -> WorkerOutputTail:
    live = {4242} if alive is None else alive
    return WorkerOutputTail(logs, emitted, interval=0.2, scan_every=0.2, alive=live.__contains__)


def test_only_workers_output_and_daemons_stderr_are_followed() -> None:
    assert follows(WORKER_OUT) and follows(WORKER_ERR)
    assert follows("raylet.err") and follows("gcs_server.err") and follows("gcs_server.1.err")
    for name in ("raylet.out", "gcs_server.out", "python-core-worker-0a-4242.log",
                 "monitor.log", "dashboard_agent.log", "runtime_env_agent.log", "old",
                 "worker-0a1b2c-01000000-4242.log"):  # fmt: skip
        assert not follows(name), name


def test_lines_are_emitted_once_in_order_with_the_actor_name(
    tmp_path: Path, emitted: Emitted
) -> None:
    tail = tail_of(tmp_path, emitted)
    tail.poll()  # nothing there yet
    assert emitted.batches == []
    out = tmp_path / WORKER_ERR
    append(out, ":job_id:01000000\n:actor_name:JobReconciler\nfirst\nsecond\n")
    tail.poll()
    assert emitted.lines() == ["first", "second"]
    batch = emitted.batches[-1]
    assert batch["pid"] == 4242 and batch["is_err"] is True
    assert batch["actor_name"] == "JobReconciler" and batch["job"] == "01000000"
    tail.poll()  # nothing new: nothing emitted again
    append(out, "third\n")
    tail.poll()
    assert emitted.lines() == ["first", "second", "third"]


def test_lines_before_an_actor_marker_keep_their_own_name(tmp_path: Path, emitted: Emitted) -> None:
    append(tmp_path / WORKER_OUT, "idle worker says\n:actor_name:Membership\nmember line\n")
    tail = tail_of(tmp_path, emitted)
    tail.poll()
    assert [(b["actor_name"], b["lines"], b["is_err"]) for b in emitted.batches] == [
        (None, ["idle worker says"], False),
        ("Membership", ["member line"], False),
    ]


def test_a_partial_line_waits_for_its_newline_or_one_quiet_poll(
    tmp_path: Path, emitted: Emitted
) -> None:
    out = tmp_path / WORKER_ERR
    append(out, "whole\nhalf")
    tail = tail_of(tmp_path, emitted)
    tail.poll()
    assert emitted.lines() == ["whole"]
    append(out, " and the rest\nanother without newline")
    tail.poll()
    assert emitted.lines() == ["whole", "half and the rest"]
    tail.poll()  # the file stayed as it was for a poll: the held line is printed
    assert emitted.lines() == ["whole", "half and the rest", "another without newline"]


def test_a_rotated_or_truncated_file_is_read_from_its_start(
    tmp_path: Path, emitted: Emitted
) -> None:
    err = tmp_path / "raylet.err"
    append(err, "a long first line\n")
    tail = tail_of(tmp_path, emitted)
    tail.poll()
    err.write_bytes(b"b\n")  # truncated, shorter than what was read
    tail.poll()
    replaced = tmp_path / "raylet.err.new"
    replaced.write_bytes(b"c\n")
    os.replace(replaced, err)  # another file under the same name
    tail.poll()
    assert emitted.lines("raylet") == ["a long first line", "b", "c"]


def test_a_dead_workers_file_is_dropped_after_its_last_lines(
    tmp_path: Path, emitted: Emitted
) -> None:
    alive = {4242}
    out = tmp_path / WORKER_ERR
    tail = tail_of(tmp_path, emitted, alive)
    append(out, "last words\n")
    alive.clear()  # died after writing them
    tail.poll()
    assert emitted.lines() == ["last words"]
    tail.poll()  # read to its end and its process is gone: no longer followed
    append(out, "never read\n")
    tail.poll()
    tail.poll()
    assert emitted.lines() == ["last words"]


def test_a_deleted_file_is_forgotten(tmp_path: Path, emitted: Emitted) -> None:
    out = tmp_path / WORKER_OUT
    append(out, "x\n")
    tail = tail_of(tmp_path, emitted)
    tail.poll()
    out.unlink()
    tail.poll()
    assert emitted.lines() == ["x"]


def test_stop_prints_what_was_written_before_it(tmp_path: Path, emitted: Emitted) -> None:
    # the worker is alive while it writes: a dead worker's empty file, seen between its creation
    # and its first write, would rightly be dropped
    tail = WorkerOutputTail(
        tmp_path, emitted, interval=3600, scan_every=3600, alive=lambda pid: True
    )
    tail.start()  # its first poll may find the file or not; the next would be in an hour
    append(tmp_path / WORKER_ERR, "written\nheld without newline")
    tail.stop()
    assert emitted.lines() == ["written", "held without newline"]


def test_a_failing_printer_does_not_stop_the_tail(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def emit(data: dict[str, Any]) -> None:
        seen.append(list(data["lines"]))
        if len(seen) == 1:
            raise RuntimeError("stream closed")

    tail = WorkerOutputTail(tmp_path, emit, alive=lambda pid: True)
    append(tmp_path / WORKER_ERR, "one\n")
    tail.poll()
    append(tmp_path / WORKER_ERR, "two\n")
    tail.poll()
    assert seen == [["one"], ["two"]]


def test_the_printer_prints_our_records_as_they_are_and_wraps_the_rest(tmp_path: Path) -> None:
    sink = io.StringIO()
    ours = json.dumps({"ts": "t", "level": "INFO", "message": "tick", "process": "reconciler"})
    append(tmp_path / WORKER_ERR, f":actor_name:JobReconciler\n{ours}\nstray print\n\n")
    WorkerOutputTail(tmp_path, worker_output_printer("json", sink)).poll()
    first, second = sink.getvalue().splitlines()
    assert first == ours
    doc = json.loads(second)
    assert doc["message"] == "stray print" and doc["process"] == "JobReconciler"
    assert doc["pid"] == 4242 and doc["stream"] == "stderr"
