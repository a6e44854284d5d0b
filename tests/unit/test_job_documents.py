"""api/documents.py: job documents memoized on their rows -- the same JSON as the model, made
once per row, remade when the row changes or the time it shows has moved on, and bounded."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from api.answers import json_answer
from api.documents import JobDocuments, job_document
from api.schemas.resources import JobPage, JobPublic
from scheduler.core.records import JobRecord
from scheduler.core.states import JobState
from scheduler.decisions.gate import QueueRow
from scheduler.decisions.selffencing import CHECK_IN_GRACE_S
from tests.unit.test_planning import NOW, make_job, make_run


class Rows:
    """Raw rows standing for records (a row is the tuple the store would answer), counting how
    often a record was asked for."""

    def __init__(self, *jobs: JobRecord) -> None:
        self.jobs = {self.row(j): j for j in jobs}
        self.made = 0

    @staticmethod
    def row(job: JobRecord) -> tuple[object, ...]:
        run = job.current_run
        return (job.name, job.version, run.fence_checked_at if run else None)

    def record(self, row: tuple[object, ...]) -> tuple[JobRecord, QueueRow | None]:
        self.made += 1
        return self.jobs[row], None


def test_a_document_is_the_models_json_and_is_made_once_per_row() -> None:
    checked = make_run(fence_checked_at=NOW)
    jobs = [make_job(name=f"j{i}", id=i, run=checked) for i in range(3)]
    rows = Rows(*jobs)
    memo = JobDocuments(capacity=100)
    page = list(rows.jobs)
    first = memo.of_rows(page, rows.record, NOW)
    assert [json.loads(d) for d in first] == [JobPublic.of(j).model_dump(mode="json") for j in jobs]
    assert rows.made == 3
    assert memo.of_rows(page, rows.record, NOW + timedelta(days=1)) == first
    assert rows.made == 3  # all three from the memo
    # a changed row (another node wrote the job) is another key: made anew
    changed = replace(jobs[1], version=jobs[1].version + 1, state_reason="moved")
    rows.jobs[Rows.row(changed)] = changed
    again = memo.of_rows([page[0], Rows.row(changed), page[2]], rows.record, NOW)
    assert rows.made == 4
    assert json.loads(again[1])["state_reason"] == "moved"


def test_a_document_showing_time_is_remade_once_that_time_has_come() -> None:
    """A started run without fence checks: self_fencing is null until the check-in grace ends,
    false from then on, although the row has not changed."""
    young = make_job(run=make_run(started_at=NOW, fence_checked_at=None))
    rows = Rows(young)
    memo = JobDocuments(capacity=100)
    row = Rows.row(young)
    early = NOW + timedelta(seconds=CHECK_IN_GRACE_S / 2)
    assert json.loads(memo.of_rows([row], rows.record, early)[0])["self_fencing"] is None
    assert json.loads(memo.of_rows([row], rows.record, early)[0])["self_fencing"] is None
    assert rows.made == 1
    late = NOW + timedelta(seconds=CHECK_IN_GRACE_S)
    assert json.loads(memo.of_rows([row], rows.record, late)[0])["self_fencing"] is False
    assert rows.made == 2
    assert job_document(young, None)[1] == NOW + timedelta(seconds=CHECK_IN_GRACE_S)
    assert job_document(make_job(), None)[1] is None  # no run: nothing changes with time


def test_the_memo_keeps_at_most_its_capacity_and_zero_keeps_none() -> None:
    jobs = [make_job(name=f"j{i}", id=i) for i in range(10)]
    rows = Rows(*jobs)
    memo = JobDocuments(capacity=4)
    memo.of_rows(list(rows.jobs), rows.record, NOW)
    assert len(memo) == 4
    newest = list(rows.jobs)[-4:]
    memo.of_rows(newest, rows.record, NOW)
    assert rows.made == 10  # the newest four were kept
    off = JobDocuments(capacity=0)
    off.of_rows(newest, rows.record, NOW)
    off.of_rows(newest, rows.record, NOW)
    assert len(off) == 0 and rows.made == 18


def test_a_queued_jobs_document_shows_its_place_and_others_do_not() -> None:
    since = NOW - timedelta(seconds=3)
    place = QueueRow(2, "rate", "business b is at its rate", since)
    queued = json.loads(job_document(make_job(state=JobState.QUEUED), place)[0])
    assert queued["queue"]["position"] == 2
    assert json.loads(job_document(make_job(run=make_run()), place)[0])["queue"] is None


def test_a_page_of_documents_is_the_page_models_json() -> None:
    jobs = [make_job(name=f"j{i}", id=i) for i in range(3)]
    documents = [job_document(j, None)[0] for j in jobs]
    spliced = json_answer(
        JobPage(data=[], limit=3, next_cursor="c", next="/v1/jobs?cursor=c", count=None),
        data=documents,
    )
    whole = json_answer(
        JobPage(
            data=[JobPublic.of(j) for j in jobs],
            limit=3,
            next_cursor="c",
            next="/v1/jobs?cursor=c",
            count=None,
        )
    )
    assert spliced.body == whole.body
    empty = json_answer(JobPage(data=[], limit=3, next_cursor=None, next=None, count=0), data=[])
    assert json.loads(bytes(empty.body))["data"] == []
