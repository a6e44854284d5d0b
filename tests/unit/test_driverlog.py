"""The driver-log lines that link a driver to its application (scheduler/backends/driverlog.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.backends.driverlog import LogCursor, app_id_in, parse_log_page

# as Spark 4.3 writes them (tests/e2e saw these on cluster A)
CONNECTED = (
    b"26/11/23 08:44:23 INFO StandaloneSchedulerBackend: Connected to Spark cluster with app ID "
    b"app-20261123084423-0009"
)
YARN = b"26/11/23 08:44:23 INFO YarnClientImpl: Submitted application application_1700000000_0042"
RUNTIME = b"drover-runtime: started app_id=app-20261123085347-0012 job=e2e-counts run_id=3"


def test_app_id_lines() -> None:
    assert app_id_in(CONNECTED) == "app-20261123084423-0009"
    assert app_id_in(YARN) == "application_1700000000_0042"
    assert app_id_in(RUNTIME) == "app-20261123085347-0012"
    assert app_id_in(b"drover-runtime: started app_id=- job=- run_id=-") is None
    # the application's name is never taken for its id
    assert app_id_in(b"INFO SparkContext: Submitted application: rate-counter") is None
    assert app_id_in(b"INFO Executor added: app-20261123084423-0009/0 on worker-1") is None


def test_log_pages_and_incremental_reads() -> None:
    assert parse_log_page(b"Error: invalid log directory /w/driver-1/") is None
    head = b"==== Bytes 0-0 of 0 of /w/driver-1/stderr ====\nError: invalid log directory\n"
    empty = parse_log_page(head)
    assert empty is not None and (empty.start, empty.end, empty.total) == (0, 0, 0)

    text = b"Launch Command: x\n" + b"=" * 40 + b"\n\n" + CONNECTED + b"\nINFO more\n"
    cursor = LogCursor()
    seen: list[bytes] = []
    for start in range(0, len(text), 7):  # 7-byte pages split every line somewhere
        end = min(start + 7, len(text))
        body = f"==== Bytes {start}-{end} of {len(text)} of /w/d/stderr ====\n".encode()
        page = parse_log_page(body + text[start:end])
        assert page is not None and page.data == text[start:end]
        seen += cursor.feed(page)
        seen += cursor.feed(page)  # the same page again (a concurrent read): nothing twice
    assert seen == text.split(b"\n")[:-1]
    assert cursor.at_end and cursor.carry == b""


@given(st.binary(max_size=300), st.integers(min_value=1, max_value=50))
def test_cursor_hands_out_every_complete_line_once(text: bytes, step: int) -> None:
    cursor = LogCursor()
    lines: list[bytes] = []
    for start in range(0, len(text), step):
        end = min(start + step, len(text))
        head = f"==== Bytes {start}-{end} of {len(text)} of /x ====\n".encode()
        page = parse_log_page(head + text[start:end])
        assert page is not None
        lines += cursor.feed(page)
    assert lines == text.split(b"\n")[:-1]
