"""``scheduler.decisions.identity.grants``: what ``GET /v1/whoami`` tells clients a principal may
do."""

from __future__ import annotations

from scheduler.decisions.identity import Action, Decision, Principal, Role, Scope, decide, grants


def built_in(principal: Principal):  # type: ignore[no-untyped-def]
    return lambda action, team: decide(principal, action, team)


def test_grants_follow_the_built_in_bindings() -> None:
    viewer = Principal("user:v", {"orders": Role.VIEWER})
    assert grants(viewer, built_in(viewer)) == {
        "job.read": ["orders"],
        "catalog.read": ["*"],
        "team.read": ["orders"],
    }
    platform = Principal("user:root", {"*": Role.ADMIN, "ads": Role.VIEWER})
    got = grants(platform, built_in(platform))
    assert got["job.write"] == ["*", "ads"]  # every team first, then the bindings
    assert got["catalog.write"] == ["*"] and "internal" not in got and "job.fence" not in got


def test_grants_ask_the_deciding_function_for_every_team() -> None:
    principal = Principal("jwt:x", {"a": Role.VIEWER, "b": Role.VIEWER})
    asked: list[tuple[Action, str | None]] = []

    def center(action: Action, team: str | None) -> Decision:
        asked.append((action, team))
        return Decision(action is Action.JOB_WRITE and team == "b", "center")

    assert grants(principal, center) == {"job.write": ["b"]}
    assert (Action.JOB_WRITE, "a") in asked and (Action.CATALOG_WRITE, None) in asked


def test_no_grants_for_a_read_only_token_beyond_reads() -> None:
    reader = Principal("user:r", {"orders": Role.ADMIN}, scopes=frozenset({Scope.READ}))
    assert set(grants(reader, built_in(reader))) == {
        "job.read",
        "catalog.read",
        "team.read",
        "audit.read",
    }
