"""``drover token``, ``drover teams``, ``drover login``/``logout``/``whoami``, ``drover audit``.

``drover token create --admin`` works on the store directly (the first admin of a fresh store
has nobody to ask); everything else goes through a node's API with the caller's credential.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from drover.cli import apps
from drover.cli import output as out
from drover.cli.output import JsonOption
from scheduler.core.errors import DroverError

token_app = out.new_app(no_args_is_help=True, help="API tokens (shown once, stored hashed).")
teams_app = out.new_app(no_args_is_help=True, help="Teams and their members' roles.")

ApiOption = out.ApiOption


def register(app: typer.Typer) -> None:
    app.add_typer(token_app, name="token")
    app.add_typer(teams_app, name="teams")
    app.command("login")(login)
    app.command("logout")(logout)
    app.command("whoami")(whoami)
    app.command("audit")(audit)


def write_secret_file(path: Path, secret: str) -> None:
    """Write ``secret`` to ``path`` readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(secret + "\n")
    os.chmod(path, 0o600)


@token_app.command("create")
def token_create(
    admin: Annotated[
        bool, typer.Option("--admin", help="bootstrap the first platform admin on the store")
    ] = False,
    name: Annotated[str, typer.Option(help="--admin: the admin identity's name")] = "admin",
    force: Annotated[
        bool, typer.Option(help="--admin: even when an admin exists (local operators only)")
    ] = False,
    output: Annotated[
        Path | None, typer.Option(help="write the token to this file (mode 0600), not stdout")
    ] = None,
    identity: Annotated[
        str | None, typer.Option(help="whose token (default: your own identity)")
    ] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="a GET-only token")] = False,
    expires_days: Annotated[
        int | None,
        typer.Option(
            help="lifetime in days (0 = never expires: platform admins only); default 90 "
            "(through the API: cut to the lifetime of the token minting it, which it never "
            "outlives)",
            min=0,
            max=3650,
        ),
    ] = None,
    description: str = "",
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token. Its secret is printed (or written to --output) once, and never again.

    --json prints the token's record, with the secret as ``token`` unless --output is given."""
    created: dict[str, Any] = {}
    if admin:
        secret = _bootstrap(name, force, 90 if expires_days is None else expires_days)
        created = {"identity": name, "admin": True}
    else:
        body: dict[str, Any] = {
            "identity": identity,
            "scopes": ["read"] if read_only else ["read", "write"],
            "description": description,
        }
        if expires_days is not None:  # absent: the API's default, cut to the caller's token
            body["expires_in_seconds"] = expires_days * 86400 if expires_days else None
        created = out.call("POST", f"{out.api_url(api)}/v1/tokens", json=body)
        secret = created["token"]
        typer.echo(f"token {created['id']} for {created['identity']}", err=True)
    if output is not None:
        write_secret_file(output, secret)
        typer.echo(f"token written to {output}", err=True)
        created = {k: v for k, v in created.items() if k != "token"}
        if as_json:
            out.print_json({**created, "output": str(output)})
    elif as_json:
        out.print_json({**created, "token": secret})
    else:
        typer.echo(secret)


def _bootstrap(name: str, force: bool, expires_days: int) -> str:
    from scheduler.store import identities, journal

    store = apps.store()
    expires = datetime.now(UTC) + timedelta(days=expires_days) if expires_days else None
    try:
        store.check_schema()
        with store.transaction() as session:
            new, record = identities.bootstrap_admin(session, name, force=force, expires_at=expires)
            journal.add_audit(
                session,
                actor="cli:bootstrap",
                action="token.create",
                target_kind="token",
                target_name=str(record.id),
                detail={"admin": True, "forced": force},
                after=record.as_dict(),
            )
    except DroverError as exc:
        out.fail_error(exc)
    finally:
        store.dispose()
    typer.echo(f"platform admin {name!r}: token {record.id}", err=True)
    return new.secret


def _render_tokens(doc: dict[str, Any]) -> None:
    out.table(
        ("ID", "PREFIX", "IDENTITY", "SCOPES", "STATE"),
        (
            (
                t["id"],
                f"{t['prefix']}…",
                t["identity"],
                ",".join(t["scopes"]),
                "revoked" if t["revoked_at"] else f"expires {t['expires_at'] or 'never'}",
            )
            for t in doc["data"]
        ),
        empty="(no tokens)",
    )
    out.footer(f"{doc['count']} token(s)")


token_app.command("list")(
    out.list_command(
        "tokens",
        _render_tokens,
        "Your tokens (every token for a platform admin); never their secrets.",
    )
)


@token_app.command("revoke")
def token_revoke(token_id: int, api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Revoke a token at once."""
    revoked = out.call("DELETE", f"{out.api_url(api)}/v1/tokens/{token_id}")
    out.show(
        revoked,
        as_json,
        lambda r: typer.echo(f"token {r['id']} of {r['identity']} revoked"),
    )


def _render_teams(doc: dict[str, Any]) -> None:
    out.table(
        ("TEAM", "MEMBERS"),
        ((t["name"], ", ".join(f"{i}:{r}" for i, r in t["members"].items())) for t in doc["data"]),
        empty="(no teams)",
    )


teams_app.command("list")(
    out.list_command("teams", _render_teams, "Teams and their members' roles.")
)


@teams_app.command("create")
def teams_create(
    name: str, description: str = "", api: ApiOption = None, as_json: JsonOption = False
) -> None:
    body = {"name": name, "description": description}
    out.show(out.call("POST", f"{out.api_url(api)}/v1/teams", json=body), as_json)


@teams_app.command("bind")
def teams_bind(
    team: str,
    identity: str,
    role: Annotated[str, typer.Argument(help="viewer | operator | admin")],
    kind: Annotated[str, typer.Option(help="user | service (for a new identity)")] = "user",
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give IDENTITY the ROLE on TEAM ('*' = every team)."""
    url = out.resource_url(api, "teams", team) + out.path_of("members", identity)[3:]
    out.show(out.call("PUT", url, json={"role": role, "kind": kind}), as_json)


@teams_app.command("unbind")
def teams_unbind(
    team: str, identity: str, api: ApiOption = None, as_json: JsonOption = False
) -> None:
    out.call("DELETE", out.resource_url(api, "teams", team) + out.path_of("members", identity)[3:])
    out.show(
        {"team": team, "identity": identity, "unbound": True},
        as_json,
        lambda d: typer.echo(f"{identity} has no role on {team} any more"),
    )


def login(
    token: Annotated[
        str | None, typer.Option(help="the token (default: read from stdin, not echoed)")
    ] = None,
    api: ApiOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check a token against the node and store it, with the node's URL, for later commands
    (0600 file: the config file later commands read URL and token from)."""
    from drover.cli import credentials

    if token is None:
        if sys.stdin.isatty():
            token = typer.prompt("token", hide_input=True)
        else:
            token = sys.stdin.readline()
    token = (token or "").strip()
    if not token:
        out.fail("no token given", out.Exit.USAGE)
    url = out.api_url(api)
    me = out.call("GET", f"{url}/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    path = credentials.save(token, url)
    out.show(
        {"subject": me["subject"], "api": url, "config": str(path)},
        as_json,
        lambda d: typer.echo(f"logged in as {me['subject']} (saved in {path})"),
    )


def logout(as_json: JsonOption = False) -> None:
    """Forget the stored token."""
    from drover.cli import credentials

    removed = credentials.remove()
    out.show(
        {"logged_out": removed},
        as_json,
        lambda d: typer.echo("logged out" if removed else "no stored token"),
    )


def whoami(api: ApiOption = None, as_json: JsonOption = False) -> None:
    """Who the credential is, and its roles per team."""
    out.show(out.call("GET", f"{out.api_url(api)}/v1/whoami"), as_json)


def _render_audit(doc: dict[str, Any]) -> None:
    out.table(
        ("AT", "ACTOR", "ACTION", "TARGET"),
        (
            (e["at"], e["actor"], e["action"], f"{e['target_kind']}/{e['target_name']}")
            for e in reversed(doc["data"])
        ),
        empty="(no audit entries)",
    )


def audit(
    api: ApiOption = None,
    action: Annotated[str | None, typer.Option()] = None,
    actor: Annotated[str | None, typer.Option()] = None,
    target: Annotated[str | None, typer.Option(help="target name")] = None,
    limit: Annotated[int, typer.Option(min=0, help="the newest this many (0 = all)")] = 50,
    as_json: JsonOption = False,
) -> None:
    """The newest audit entries (who changed what), oldest first in the table."""
    params = {"action": action, "actor": actor, "target_name": target}
    url = f"{out.api_url(api)}/v1/audit"
    out.show_all(url, "audit entries", _render_audit, as_json, limit, api, params)
