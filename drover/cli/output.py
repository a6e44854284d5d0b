"""What every ``drover`` command shares: where the node is, the caller's credential, HTTP calls
with their failures mapped to exit codes, tables and ``--json``, lists that page, and ``--wait``.

Every command module (``drover/cli/*.py``) uses these and nothing else to talk to a node or to the
terminal, so all commands behave alike:

- stdout carries the result only: a table (or ``key  value`` lines for one record) by default,
  with ages ("3m", "2h") instead of timestamps; ``-o json|yaml|name|wide`` (``--json`` is
  ``-o json``) and ``--field PATH`` (one value per record: ``state``, ``current_run.state``) on
  every command that prints something (:func:`add_output_options`). Footers (counts, hints),
  progress, notes and errors go to stderr.
- A failure is one line on stderr, ``drover: <what went wrong>``, and an exit code from
  :class:`Exit`, chosen by the failure's class (never by the command).
- Lists follow the API's ``next`` links until the end, or stop at ``--limit`` and say so on
  stderr (and in the JSON document: ``truncated``).
- ``--wait`` polls with a deadline (``--timeout``) and draws its progress on stderr: one line
  redrawn in place on a terminal, a line per change into a pipe or file.

The node's URL and the token come from flags, the environment (``DROVER_URL``, ``DROVER_TOKEN``)
or the config file ``drover login`` writes; the CLI never reads a node's own settings.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Annotated, Any, NoReturn, TextIO, TypeVar
from urllib.parse import quote

import typer

from scheduler.core import errors

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
#: the biggest page the API serves (``api.paging.MAX_LIMIT``)
PAGE_SIZE = 1000


class Exit(IntEnum):
    """The exit codes of every command, one per class of failure."""

    OK = 0
    #: anything else: an unexpected answer (5xx), a bug
    ERROR = 1
    #: the command line or the request was wrong: bad option, 400, 415, 422
    USAGE = 2
    #: the job, cluster, group, ... does not exist: 404
    NOT_FOUND = 3
    #: the request clashes with the current state: 409, 412 (a stale ``--if-match``)
    CONFLICT = 4
    #: not allowed: no or a bad credential (401), a role that may not (403)
    REFUSED = 5
    #: the node cannot be reached or cannot answer now: connection errors, 429, 502, 503, 504
    UNAVAILABLE = 6
    #: ``--wait`` reached its ``--timeout`` before the end it waited for
    TIMEOUT = 7
    #: ``--wait`` saw it end badly: the job FAILED, the failover FAILED or was CANCELLED
    FAILED = 8


EXIT_CODES_HELP = """\b
Exit codes:
  0  ok
  1  other error (an unexpected answer from the node)
  2  usage: a bad option or argument, an invalid request (400, 415, 422)
  3  not found (404)
  4  conflict or failed precondition (409, 412: e.g. a stale --if-match)
  5  refused: unauthenticated or forbidden (401, 403)
  6  unreachable or unavailable (connection error, 429, 502, 503, 504)
  7  --wait reached its --timeout
  8  --wait saw it end badly (job FAILED, failover FAILED or CANCELLED)
"""

_BY_STATUS = {
    400: Exit.USAGE,
    401: Exit.REFUSED,
    403: Exit.REFUSED,
    404: Exit.NOT_FOUND,
    405: Exit.USAGE,
    409: Exit.CONFLICT,
    412: Exit.CONFLICT,
    415: Exit.USAGE,
    422: Exit.USAGE,
    428: Exit.CONFLICT,
    429: Exit.UNAVAILABLE,
    502: Exit.UNAVAILABLE,
    503: Exit.UNAVAILABLE,
    504: Exit.UNAVAILABLE,
}

#: local failures (the store for ``db`` and ``token create --admin``, the credential file)
_BY_ERROR: list[tuple[type[errors.DroverError], Exit]] = [
    (errors.PreconditionFailed, Exit.CONFLICT),
    (errors.Unauthenticated, Exit.REFUSED),
    (errors.Forbidden, Exit.REFUSED),
    (errors.InvalidInput, Exit.USAGE),
    (errors.NotFound, Exit.NOT_FOUND),
    (errors.Conflict, Exit.CONFLICT),
    (errors.StoreUnavailable, Exit.UNAVAILABLE),
    (errors.CoordinationUnavailable, Exit.UNAVAILABLE),
]


def exit_for_status(status: int) -> Exit:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return Exit.USAGE if 400 <= status < 500 else Exit.ERROR


def exit_for_error(exc: errors.DroverError) -> Exit:
    for kind, code in _BY_ERROR:
        if isinstance(exc, kind):
            return code
    return Exit.ERROR


def fail(message: str, code: int = Exit.ERROR) -> NoReturn:
    """One line on stderr, then exit with ``code``."""
    line = " ".join(str(message).split())
    typer.echo(f"drover: {line}", err=True)
    raise typer.Exit(int(code))


def fail_error(exc: errors.DroverError) -> NoReturn:
    fail(exc.message, exit_for_error(exc))


def note(message: str) -> None:
    """A remark for the person at the terminal (stderr: never mixed into the result)."""
    typer.echo(message, err=True)


def new_app(**settings: Any) -> typer.Typer:
    """A typer app of the command tree: plain help (click's: rich's formatter alone costs more
    than the 0.3 s a command may take to start), no rich tracebacks, ``-h`` as ``--help``, no
    arguments shows the help."""
    settings.setdefault("no_args_is_help", True)
    return typer.Typer(
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        **settings,
    )


# -- where the node is, and who calls it ----------------------------------------------------


@dataclass
class Target:
    """``--url``/``--token`` given before the command (``drover --url U jobs list``), and the
    command's ``-o``/``--field`` (:func:`add_output_options`)."""

    url: str | None = None
    token: str | None = None
    output: str | None = None
    field: str | None = None


GLOBAL = Target()

ApiOption = Annotated[
    str | None,
    typer.Option(
        "--api",
        "--url",
        help="node API URL (default: --url before the command, DROVER_URL, the config file "
        f"written by drover login, else {DEFAULT_URL})",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="print one JSON document on stdout instead of a table")
]
LimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=0,
        help="list at most this many (default: all, following every page; 0 = all)",
        show_default=False,
    ),
]
WaitOption = Annotated[
    bool, typer.Option("--wait", help="follow it until it is done, with progress on stderr")
]
TimeoutOption = Annotated[
    float,
    typer.Option("--timeout", min=0.1, help="--wait gives up after this many seconds (exit 7)"),
]


def _config() -> dict[str, str]:
    from drover.cli import credentials

    try:
        return credentials.load()
    except errors.DroverError as exc:
        fail_error(exc)


def api_url(flag: str | None = None) -> str:
    """The node's URL: the command's ``--api``/``--url``, then ``drover --url``, then
    ``DROVER_URL``, then the config file, then the local default."""
    url = flag or GLOBAL.url or os.environ.get("DROVER_URL") or _config().get("api") or DEFAULT_URL
    return url.rstrip("/")


def token() -> str | None:
    """The caller's token: ``drover --token``, then ``DROVER_TOKEN``, then the config file."""
    return GLOBAL.token or os.environ.get("DROVER_TOKEN") or _config().get("token") or None


def auth_headers() -> dict[str, str]:
    """The credential, and the header naming this client."""
    headers = {"X-Drover-Client": "drover-cli"}
    secret = token()
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    return headers


def path_of(*parts: str) -> str:
    """``/v1/a/b`` from parts, each quoted (names may hold any character the API allows)."""
    return "/v1/" + "/".join(quote(p, safe="") for p in parts)


def job_url(api: str | None, name: str, suffix: str = "") -> str:
    """The API URL of job ``name`` (``suffix``: a sub-resource or action, e.g. ``/start``)."""
    return api_url(api) + path_of("jobs", name) + suffix


def resource_url(api: str | None, kind: str, name: str | None = None) -> str:
    """The API URL of the ``kind`` collection (``clusters``, ``groups``, ...) or of one of its
    records."""
    base = api_url(api) + f"/v1/{kind}"
    return base if name is None else base + path_of(name)[3:]


def if_match(version: int | None) -> dict[str, str]:
    """The ``If-Match`` header for ``version`` (none for None)."""
    return {} if version is None else {"If-Match": f'"{version}"'}


IfMatchOption = Annotated[
    int | None,
    typer.Option(
        "--if-match",
        help="refuse (exit 4) unless the job's spec_version (its ETag) is still this one",
    ),
]
VersionOption = Annotated[
    int | None,
    typer.Option(
        "--if-version", "--if-match", help="refuse (exit 4) unless the record is at this version"
    ),
]


def _problem_line(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and ("title" in body or "detail" in body):
        text = f"{response.status_code} {body.get('title', '')}: {body.get('detail', '')}"
        kind = str(body.get("type", ""))
        if kind.startswith("urn:drover:problem:"):
            text += f" [{kind.rsplit(':', 1)[-1]}]"
        return text
    return f"{response.status_code}: {response.text[:200]}"


def client(api: str | None = None) -> Any:
    """The typed client of the node's API (``drover/api_client.py``, generated from the
    OpenAPI) with the caller's credential: every command talks to the node through it, so all
    share its retries (idempotent calls, with backoff, honouring ``Retry-After``)."""
    base, secret = api_url(api), token()
    made = _CLIENTS.get((base, secret))
    if made is None:
        made = api_client().DroverClient(base, secret, client_name="drover-cli")
        _CLIENTS[(base, secret)] = made
    return made


#: (node URL, token) -> its client (one process may run several commands: tests do)
_CLIENTS: dict[tuple[str, str | None], Any] = {}


def api_client() -> Any:
    """The module ``drover.api_client``, imported without httpx's own command line: httpx
    imports it (click and rich) unless it cannot be found, a fifth of this command line's
    start-up for nothing it uses."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    from drover import api_client as module

    return module


class _Operations:
    """The typed client's operations (``client(api).get_job(...)``), each ending the command as
    :func:`send` does when the node answers an error or cannot be reached."""

    def __init__(self, typed: Any) -> None:
        self._typed = typed

    def __getattr__(self, name: str) -> Callable[..., Any]:
        operation = getattr(self._typed, name)
        module = api_client()

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return operation(*args, **kwargs)
            except module.ApiError as exc:
                fail(_problem_line(exc.response), exit_for_status(exc.status))
            except module.Unreachable as exc:
                fail(str(exc), Exit.UNAVAILABLE)

        return call


def api(flag: str | None = None) -> Any:
    """The node's API as the typed client's operations, named by their ``operationId``
    (``out.api(api).start_job(name, if_match=...)``): no URL is written by hand."""
    return _Operations(client(flag))


def idempotency_key() -> str:
    """A fresh ``Idempotency-Key``: the command's request may then be sent again safely."""
    import uuid

    return str(uuid.uuid4())


def etag(version: int | None) -> str | None:
    """``If-Match``'s value for ``version`` (None for None)."""
    return None if version is None else f'"{version}"'


def send(
    method: str,
    url: str,
    *,
    params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Any:
    """One request through :func:`client`; an error answer or a node that cannot be reached
    ends the command (one line, the class's exit code). Returns the ``httpx.Response``."""
    unreachable = api_client().Unreachable
    try:
        response = client().send(
            method,
            url,
            params=params,
            json=json_body,
            headers=dict(headers or {}),
            timeout=timeout,
        )
    except unreachable as exc:
        fail(str(exc), Exit.UNAVAILABLE)
    if response.status_code >= 400:
        fail(_problem_line(response), exit_for_status(response.status_code))
    return response


def call(method: str, url: str, **kwargs: Any) -> Any:
    """``send`` and the answer's JSON (None for an empty answer)."""
    if "json" in kwargs:
        kwargs["json_body"] = kwargs.pop("json")
    response = send(method, url, **kwargs)
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        fail(f"{url} answered {response.status_code} with something not JSON", Exit.ERROR)


# -- lists -----------------------------------------------------------------------------------


@dataclass
class Listing:
    """The items of a list, from as many pages as it took, and whether more exist."""

    data: list[Any] = field(default_factory=list)
    truncated: bool = False
    next: str | None = None

    def document(self, **extra: Any) -> dict[str, Any]:
        return {
            "data": self.data,
            "count": len(self.data),
            "truncated": self.truncated,
            "next": self.next,
            **extra,
        }


def fetch_all(
    url: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int | None = None,
    api: str | None = None,
) -> Listing:
    """Follow ``next`` until the end, or until ``limit`` items (``None``/0: no limit)."""
    limit = limit or None
    base = api_url(api)
    query: list[tuple[str, Any]] = []
    for key, value in (params or {}).items():
        if value is None or value == "" or value == []:
            continue
        if isinstance(value, list | tuple):
            query.extend((key, v) for v in value)
        else:
            query.append((key, value))
    query.append(("limit", min(limit or PAGE_SIZE, PAGE_SIZE)))
    listing = Listing()
    page = call("GET", url, params=query)
    seen_next: set[str] = set()
    while True:
        items = page.get("data", []) if isinstance(page, dict) else []
        listing.data.extend(items)
        nxt = page.get("next") if isinstance(page, dict) else None
        if limit is not None and len(listing.data) >= limit:
            listing.truncated = len(listing.data) > limit or bool(nxt)
            listing.data = listing.data[:limit]
            listing.next = nxt
            return listing
        if not nxt or nxt in seen_next:
            return listing
        seen_next.add(nxt)
        page = call("GET", nxt if "://" in nxt else base + nxt)


def say_if_cut(listing: Listing, what: str) -> None:
    if listing.truncated:
        note(
            f"drover: showing the first {len(listing.data)} {what}; more exist "
            "(--limit 0 lists them all)"
        )


def show_all(
    url: str,
    what: str,
    render: Callable[[Any], None],
    as_json: bool,
    limit: int | None,
    api: str | None,
    params: Mapping[str, Any] | None = None,
) -> None:
    """A list command: every page of ``url`` (up to ``limit`` items of ``what``, with a note
    when more exist) as one document, shown by ``render`` or as JSON."""
    listing = fetch_all(url, params, limit=limit, api=api)
    say_if_cut(listing, what)
    show(listing.document(), as_json, render)


def list_command(kind: str, render: Callable[[Any], None], doc: str) -> Callable[..., None]:
    """The ``list`` command of the ``kind`` collection (``clusters``, ``teams``, ...): every page
    (up to ``--limit``) shown by ``render`` or as JSON; ``doc`` is its help."""

    def command(
        api: ApiOption = None, limit: LimitOption = None, as_json: JsonOption = False
    ) -> None:
        show_all(resource_url(api, kind), kind, render, as_json, limit, api)

    command.__doc__ = doc
    return command


def job_list_command(what: str, render: Callable[[Any], None], doc: str) -> Callable[..., None]:
    """The command listing one of a job's collections (``runs``, ``revisions``): every page
    (up to ``--limit``) shown by ``render`` or as JSON; ``doc`` is its help."""

    def command(
        name: str, api: ApiOption = None, limit: LimitOption = None, as_json: JsonOption = False
    ) -> None:
        show_all(job_url(api, name, f"/{what}"), what, render, as_json, limit, api)

    command.__doc__ = doc
    return command


# -- output ----------------------------------------------------------------------------------


def paragraphs(text: str | None) -> str:
    """A docstring's paragraphs as single lines (help screens rewrap them)."""
    return "\n\n".join(" ".join(p.split()) for p in (text or "").split("\n\n"))


def print_json(data: Any) -> None:
    """The result as a document on stdout: JSON (``--json``, ``-o json``), YAML (``-o yaml``),
    the names of its records (``-o name``) or the ``--field`` of each."""
    if GLOBAL.field:
        for value in select(data, GLOBAL.field):
            typer.echo(value if isinstance(value, str) else _compact(value))
    elif GLOBAL.output == "name":
        for item in _records(data):
            typer.echo(str(item.get("name") or item.get("id") or item.get("job") or ""))
    elif GLOBAL.output == "yaml":
        import yaml

        typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip("\n"))
    else:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _records(data: Any) -> list[dict[str, Any]]:
    """The records of a document: a page's ``data``, a list's items, or the one record."""
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return [d for d in data["data"] if isinstance(d, dict)]
    if isinstance(data, list):
        return [d for d in data if isinstance(d, dict)]
    return [data] if isinstance(data, dict) else []


def select(data: Any, path: str) -> list[Any]:
    """``path`` (dotted keys and ``[i]`` indexes: ``state``, ``current_run.state``,
    ``args[0]``; kubectl's ``{.state}`` spelling too) in each record of ``data``: one value per
    record, None where a record lacks it."""
    steps = [p for p in re.split(r"\.|\[(\d+)\]", path.strip().strip("{}").lstrip(".")) if p]
    found = []
    records = _records(data) if isinstance(data, dict | list) else []
    for record in records or [data]:
        value: Any = record
        for step in steps:
            if isinstance(value, list) and step.isdigit() and int(step) < len(value):
                value = value[int(step)]
            elif isinstance(value, dict):
                value = value.get(step)
            else:
                value = None
        found.append(value)
    return found


_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def age(value: str, now: float | None = None) -> str:
    """An ISO timestamp as an age: ``45s``, ``3m``, ``2h``, ``5d`` ago (``in 3m`` ahead)."""
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return value
    seconds = (time.time() if now is None else now) - moment
    ahead, seconds = seconds < 0, abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            text = f"{int(seconds // size)}{unit}"
            break
    else:
        text = f"{int(seconds)}s"
    return f"in {text}" if ahead else text


def cell(value: Any) -> str:
    """A value as a table cell or a record's line: timestamps as ages, maps as ``k=v``, lists
    of words space-separated, anything structured as compact JSON (never a Python repr)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return age(value) if _TIMESTAMP.match(value) else " ".join(value.split())
    if isinstance(value, dict):
        if all(not isinstance(v, dict | list) for v in value.values()):
            return ",".join(f"{k}={cell(v)}" for k, v in value.items()) or "-"
        return _compact(value)
    if isinstance(value, list | tuple):
        if all(not isinstance(v, dict | list | tuple) for v in value):
            return " ".join(cell(v) for v in value) or "-"
        return _compact(value)
    return " ".join(str(value).split())


def wide() -> bool:
    """``-o wide``: tables show their extra columns."""
    return GLOBAL.output == "wide"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], empty: str = "") -> None:
    """Aligned columns under a header line (rich's table, without borders), cells as
    :func:`cell` shows them; an empty table is a note on stderr."""
    text = [[cell(v) for v in row] for row in rows]
    if not text:
        note(empty or (f"(no {headers[0].lower()}s)" if headers else "(none)"))
        return
    from rich.console import Console
    from rich.table import Table

    grid = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    for header in headers:
        grid.add_column(header, no_wrap=True, overflow="ellipsis")
    for row in text:
        grid.add_row(*row)
    tty = sys.stdout.isatty()
    # into a pipe or a file, nothing is cut: every cell whole, however wide the lines get
    console = Console(width=None if tty else 1 << 16, highlight=False, emoji=False, markup=False)
    with console.capture() as captured:
        console.print(grid)
    for line in captured.get().splitlines():
        typer.echo(line.rstrip())


def footer(text: str) -> None:
    """A line under a table (a count, a hint): stderr, so stdout stays the result."""
    note(text)


def record(data: Mapping[str, Any], fields: Sequence[str] | None = None) -> None:
    """One record as ``key  value`` lines."""
    keys = list(fields or data.keys())
    width = max((len(k) for k in keys), default=0)
    for key in keys:
        typer.echo(f"{key.ljust(width)}  {cell(data.get(key))}")


def show(data: Any, as_json: bool, render: Callable[[Any], None] | None = None) -> None:
    """``--json`` (or ``-o``/``--field``): the document; else ``render(data)`` (default:
    ``record``)."""
    if as_json or GLOBAL.field or GLOBAL.output in ("json", "yaml", "name"):
        print_json(data)
    elif render is not None:
        render(data)
    elif isinstance(data, Mapping):
        record(data)
    else:
        print_json(data)


class Output(StrEnum):
    """``-o``/``--output``: how a command prints its result."""

    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"
    NAME = "name"


OutputOption = Annotated[
    Output | None,
    typer.Option(
        "-o",
        "--output",
        help="table (default), wide (more columns), json (as --json), yaml, "
        "name (one name per line)",
        show_default=False,
    ),
]
FieldOption = Annotated[
    str | None,
    typer.Option(
        "--field",
        help="print only this field of each record (state, current_run.state, "
        "args[0]), one line each",
        show_default=False,
    ),
]


def add_output_options(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) that prints a result (it takes
    ``--json``) the options ``-o/--output json|yaml|wide|name`` and ``--field PATH``: they are
    added to the command's signature, set :data:`GLOBAL`, and ``-o json`` is ``--json``. A
    command that has an ``--output`` of its own (a file) gets ``--field`` only."""
    for info in app.registered_commands:
        if info.callback is not None:
            info.callback = _with_output_options(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            add_output_options(group.typer_instance)


def _with_output_options(callback: Callable[..., Any]) -> Callable[..., Any]:
    import functools
    import inspect

    signature = inspect.signature(callback, eval_str=True)  # the module's own names
    params = signature.parameters
    if "as_json" not in params or "field" in params:
        return callback
    own_output = "output" in params
    options = (
        {"field": FieldOption} if own_output else {"output": OutputOption, "field": FieldOption}
    )
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
        for name, option in options.items()
    ]

    @functools.wraps(callback)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        GLOBAL.field = kwargs.pop("field", None)
        if not own_output:
            chosen = kwargs.pop("output", None)
            GLOBAL.output = None if chosen is None else str(chosen.value)
        if GLOBAL.field or GLOBAL.output in ("json", "yaml", "name"):
            kwargs["as_json"] = True
        return callback(*args, **kwargs)

    ordered = [p for p in params.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    positional = [p for p in ordered if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    keyword = [p for p in ordered if p.kind is inspect.Parameter.KEYWORD_ONLY]
    positional = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in positional]
    parameters = [*positional, *keyword, *added]
    wrapped.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapped.__annotations__ = {p.name: p.annotation for p in parameters}
    if signature.return_annotation is not inspect.Signature.empty:
        wrapped.__annotations__["return"] = signature.return_annotation
    return wrapped


# -- --wait ----------------------------------------------------------------------------------


class Progress:
    """A live status on stderr: redrawn in place on a terminal, one line per change otherwise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last = ""
        self.drawn = False

    def update(self, line: str) -> None:
        if line == self.last:
            return
        self.last = line
        stamp = time.strftime("%H:%M:%S")
        if self.tty:
            self.stream.write(f"\r\x1b[2K{stamp} {line}")
            self.drawn = True
        else:
            self.stream.write(f"{stamp} {line}\n")
        self.stream.flush()

    def event(self, line: str) -> None:
        """A line that stays (a step of a failover), above the redrawn status."""
        stamp = time.strftime("%H:%M:%S")
        if self.tty and self.drawn:
            self.stream.write("\r\x1b[2K")
        self.stream.write(f"{stamp} {line}\n")
        if self.tty and self.last:
            self.stream.write(f"{stamp} {self.last}")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
        self.drawn = False


#: what ``judge`` says of an observation: keep waiting, done, or ended badly
WAITING, DONE, FAILED = "waiting", "done", "failed"


def wait_for(
    poll: Callable[[], T],
    judge: Callable[[T], str],
    describe: Callable[[T], str],
    *,
    timeout: float,
    interval: float = 1.0,
    progress: Progress | None = None,
    on_end: Callable[[T], None] | None = None,
) -> T:
    """Poll until ``judge`` says DONE (returns the last observation) or FAILED (exit 8), or
    until ``timeout`` seconds passed (exit 7). ``on_end`` sees the last observation first (to
    print the final document even when the wait did not end well)."""
    progress = progress or Progress()
    deadline = time.monotonic() + timeout
    observed = poll()
    try:
        while True:
            verdict = judge(observed)
            progress.update(describe(observed))
            if verdict != WAITING:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(interval, left))
            observed = poll()
    finally:
        progress.close()
    if on_end is not None:
        on_end(observed)
    if verdict == DONE:
        return observed
    if verdict == FAILED:
        fail(describe(observed), Exit.FAILED)
    fail(f"timed out after {timeout:g} s: {describe(observed)}", Exit.TIMEOUT)
