"""What the CLI shows of an operation of any kind (failovers, bulk operations): the shared part of
``drover failover`` and ``drover bulk``.

Each kind keeps its own tables (their columns differ); this module holds what they share: how an
item says what it is doing now, who made and executes the operation, and ``--wait``: drawing each
item's step changes and the summary on stderr until the operation ends, then its final document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import typer

from drover.cli import output as out

#: an operation's final states, as ``--wait`` judges them (0 only for SUCCEEDED)
ENDS = {"SUCCEEDED": out.DONE, "FAILED": out.FAILED, "CANCELLED": out.FAILED}
#: how long ``--wait`` follows an operation by default (seconds)
DEFAULT_WAIT = 3600.0

Document = dict[str, Any]


def short(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def counts_text(counts: Mapping[str, int]) -> str:
    """An operation's counts (per step or per action) as one sorted phrase: "2 DONE, 1 FAILED"."""
    return ", ".join(f"{n} {key}" for key, n in sorted(counts.items()))


def show(url: str, *, as_json: bool, render: Callable[[Document], None]) -> None:
    """``status ID``: the operation's document (``render`` without ``--json``)."""
    out.show(out.call("GET", url), as_json, render)


def last_note(item: Document) -> str:
    """The note of an item's latest step change ("" before its first)."""
    return str(item["history"][-1]["note"]) if item["history"] else ""


def item_now(item: Document) -> str:
    """What an item waits for, its error when it FAILED, else its latest step's note."""
    if item["step"] == "FAILED" and item["last_error"]:
        return str(item["last_error"])
    return str(item["waiting"] or last_note(item))


def print_provenance(data: Document) -> None:
    """Who made the operation and why, who executes it, and a requested cancel."""
    typer.echo(
        f"by {data['created_by']} at {data['created_at']}"
        + (f"  ({data['reason']})" if data["reason"] else "")
    )
    if data["executor"]:
        typer.echo(f"executor {data['executor']} (epoch {data['executor_epoch']})")
    if data["cancel_requested_at"]:
        typer.echo(f"cancel requested by {data['cancel_requested_by']}")


def print_plan(
    data: Document, title: str, header: str, row: Callable[[Document], str], empty: str
) -> None:
    """A dry run's plan: its items, a line each by ``row`` under ``header`` (``empty`` when it
    has none), then ``title`` with the items counted per action, and the plan's digest."""
    items = data["items"]
    typer.echo(header)
    for item in items:
        typer.echo(row(item))
    if not items:
        typer.echo(empty)
    counts = counts_text(data["counts"])
    typer.echo("")
    typer.echo(f"{title}: {len(items)} item(s){': ' + counts if counts else ''}")
    typer.echo(f"plan digest {data['plan_digest']}")


def print_progress(
    data: Document, title: str, header: str, row: Callable[[Document], str], summary: str
) -> None:
    """A stored operation: ``title``, who made and executes it, its items (a line each by
    ``row`` under ``header``) and the ``summary`` line."""
    typer.echo(title)
    print_provenance(data)
    typer.echo("")
    typer.echo(header)
    for item in data["items"]:
        typer.echo(row(item))
    typer.echo("")
    typer.echo(summary)


@dataclass(frozen=True)
class Kind:
    """One kind of operation as the CLI shows it: where the API keeps it (``path``), its latest
    listed a ``row`` each under ``header``, one drawn by ``render``, and how ``--wait`` follows
    it (``step_width``, ``summary``). ``status`` and ``cancel`` are the same for every kind."""

    path: str
    what: str
    header: str
    row: Callable[[Document], str]
    render: Callable[[Document], None]
    summary: Callable[[Document], str]
    step_width: int
    #: what ``cancel`` says, formatted with the operation's document (``{id}``, ``{state}``)
    cancelled: str

    def url(self, api: str | None, suffix: str = "") -> str:
        return f"{out.api_url(api)}{self.path}{suffix}"

    def follow(
        self,
        api: str | None,
        operation_id: int,
        *,
        timeout: float = DEFAULT_WAIT,
        as_json: bool = False,
        interval: float = 2.0,
    ) -> Document:
        """``--wait``: draw step changes and the summary on stderr until the operation ends (or
        ``timeout``), print its final document, and exit 8 unless it SUCCEEDED (7 at the
        deadline)."""
        url = self.url(api, f"/{operation_id}")
        seen: dict[int, str] = {}
        progress = out.Progress()

        def poll() -> Document:
            data: Document = out.call("GET", url)
            for item in data["items"]:
                if seen.get(item["position"]) != item["step"]:
                    seen[item["position"]] = item["step"]
                    progress.event(
                        f"{short(item['job'], 32):<32} {item['step']:<{self.step_width}} "
                        f"{last_note(item)}"
                    )
            return data

        return out.wait_for(
            poll,
            lambda data: ENDS.get(data["state"], out.WAITING),
            self.summary,
            timeout=timeout,
            interval=interval,
            progress=progress,
            on_end=lambda data: out.show(data, as_json, self.render),
        )

    def status(
        self,
        api: str | None,
        operation_id: int | None,
        params: Mapping[str, Any] | None,
        *,
        limit: int,
        wait: bool,
        timeout: float,
        as_json: bool,
    ) -> None:
        """``status``: the latest operations (``params`` filter them) without an id; else the
        operation, followed until it ends with ``--wait``."""
        if operation_id is None:
            self.print_latest(api, params, limit, as_json)
        elif wait:
            self.follow(api, operation_id, timeout=timeout, as_json=as_json)
        else:
            show(self.url(api, f"/{operation_id}"), as_json=as_json, render=self.render)

    def print_latest(
        self, api: str | None, params: Mapping[str, Any] | None, limit: int, as_json: bool
    ) -> None:
        """``status`` without an id: the latest operations (up to ``limit``), a ``row`` each
        under ``header``, or their page with ``--json``."""
        listing = out.fetch_all(self.url(api), params, limit=limit, api=api)
        out.say_if_cut(listing, self.what)
        page = listing.document()
        if as_json:
            out.print_json(page)
            return
        typer.echo(self.header)
        for operation in page["data"]:
            typer.echo(self.row(operation))
        if not page["data"]:
            typer.echo(f"(no {self.what})")

    def cancel(self, api: str | None, operation_id: int, as_json: bool) -> None:
        """``cancel``: ask the operation to stop after its current steps."""
        data = out.call("POST", self.url(api, f"/{operation_id}/cancel"))
        if as_json:
            out.print_json(data)
            return
        typer.echo(self.cancelled.format_map(data))
