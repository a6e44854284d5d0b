"""The CLI's shared output helpers: exit codes per failure class, the progress display, waits."""

from __future__ import annotations

import io
from typing import Any

import pytest
import typer

from drover.cli import output as out
from drover.cli.apps import judge as _judge
from drover.cli.output import Exit


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, Exit.USAGE), (415, Exit.USAGE), (422, Exit.USAGE), (404, Exit.NOT_FOUND),
        (409, Exit.CONFLICT), (412, Exit.CONFLICT), (401, Exit.REFUSED), (403, Exit.REFUSED),
        (429, Exit.UNAVAILABLE), (502, Exit.UNAVAILABLE), (503, Exit.UNAVAILABLE),
        (500, Exit.ERROR), (418, Exit.USAGE),
    ],
)  # fmt: skip
def test_each_status_has_its_class(status: int, code: Exit) -> None:
    assert out.exit_for_status(status) == code


def test_exit_codes_are_distinct_and_documented() -> None:
    assert len({int(c) for c in Exit}) == len(Exit)
    for code in Exit:
        assert f"\n  {int(code)}  " in out.EXIT_CODES_HELP


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_redraws_a_terminal_line_and_writes_lines_into_a_pipe() -> None:
    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        progress = out.Progress(stream)
        for line in ("QUEUED", "QUEUED", "STARTING", "RUNNING"):
            progress.update(line)
        progress.close()
    assert tty.getvalue().count("\r\x1b[2K") == 3 and tty.getvalue().endswith("RUNNING\n")
    lines = pipe.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["QUEUED", "STARTING", "RUNNING"]
    assert "\r" not in pipe.getvalue()


def _job(state: str, desired: str = "RUNNING", run: int | None = 1) -> dict[str, Any]:
    return {"state": state, "desired_state": desired, "current_run": {"id": run} if run else None}


def test_what_a_wait_waits_for() -> None:
    assert _judge("start", _job("STARTING")) == out.WAITING
    assert _judge("start", _job("RUNNING")) == out.DONE
    assert _judge("start", _job("FAILED")) == out.FAILED
    assert _judge("start", _job("QUEUED", desired="STOPPED")) == out.FAILED
    assert _judge("restart", _job("RUNNING", run=1), old_run=1) == out.WAITING
    assert _judge("restart", _job("RUNNING", run=2), old_run=1) == out.DONE
    assert _judge("stop", _job("STOPPING", desired="STOPPED")) == out.WAITING
    assert _judge("stop", _job("STOPPED", desired="STOPPED")) == out.DONE
    assert _judge("stop", _job("RUNNING")) == out.FAILED


def test_a_wait_that_ends_badly_exits_8_and_one_at_the_deadline_exits_7() -> None:
    seen: list[str] = []
    states = iter(["QUEUED", "FAILED"])
    with pytest.raises(typer.Exit) as failed:
        out.wait_for(
            lambda: next(states),
            lambda s: out.FAILED if s == "FAILED" else out.WAITING,
            str,
            timeout=10,
            interval=0.01,
            progress=out.Progress(io.StringIO()),
            on_end=seen.append,
        )
    assert failed.value.exit_code == Exit.FAILED and seen == ["FAILED"]
    with pytest.raises(typer.Exit) as late:
        out.wait_for(
            lambda: "QUEUED",
            lambda s: out.WAITING,
            str,
            timeout=0.05,
            interval=0.01,
            progress=out.Progress(io.StringIO()),
        )
    assert late.value.exit_code == Exit.TIMEOUT
