"""A job's checkpoint is its own: under ``<root>/<its name>/`` unless a platform admin places
it, and never where another job checkpoints (the same place, or one inside the other).

Through the real API on both stores: creations (alone and in one batch), changes, and the
cross-team attempt that used to work (team B pointing a job at team A's checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.creations import Creation, Creations
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.errors import Conflict
from scheduler.core.records import JobSpec
from scheduler.decisions.identity import Principal, Role
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers, member_token, store_fingerprint
from tests.support.schema import seed_jobs

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[TestClient]:
    app = create_app(NodeContext(settings, store))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def root(api: TestClient, admin_headers: dict[str, str]) -> str:
    """The local cluster's storage root (``file:///.../checkpoints/local``)."""
    return str(api.get("/v1/clusters/local", headers=admin_headers).json()["storage_root"])


def create(api: TestClient, token: str, name: str, team: str, **extra: Any) -> Any:
    body = {"name": name, "entrypoint": PIPELINE, "team": team, **extra}
    return api.post("/v1/jobs", json=body, headers=auth_headers(token))


def test_another_teams_checkpoint_is_refused(api: TestClient, store: Store, root: str) -> None:
    a_admin = member_token(store, "ann", "team-a", "admin")
    b_admin = member_token(store, "bob", "team-b", "admin")
    assert create(api, a_admin, "a-job", "team-a").status_code == 201
    pinned = create(api, a_admin, "a-pinned", "team-a", checkpoint_location=f"{root}/a-pinned/v2")
    assert pinned.status_code == 201, pinned.text
    before = store_fingerprint(store)
    for location in (
        f"{root}/a-job/checkpoint",  # team A's default location
        f"{root}/a-job",
        f"{root}/a-job/checkpoint/offsets",
        f"{root}/a-pinned/v2",
        f"{root}/shared",  # anywhere but under its own name
    ):
        refused = create(api, b_admin, "b-job", "team-b", checkpoint_location=location)
        assert refused.status_code == 422, (location, refused.text)
        assert refused.json()["type"] == "urn:drover:problem:refused-submission"
        assert "b-job" in refused.json()["detail"]
    assert store_fingerprint(store) == before
    # its own place is fine, and so is a change within it
    own = create(api, b_admin, "b-job", "team-b", checkpoint_location=f"{root}/b-job/main")
    assert own.status_code == 201, own.text
    moved = api.patch(
        "/v1/jobs/b-job",
        json={"checkpoint_location": f"{root}/a-job/checkpoint"},
        headers=auth_headers(b_admin),
    )
    assert moved.status_code == 422
    inside = {"checkpoint_location": f"{root}/b-job/v2"}
    assert (
        api.patch("/v1/jobs/b-job", json=inside, headers=auth_headers(b_admin)).status_code == 200
    )


def test_a_platform_admin_places_checkpoints_but_never_on_another_jobs(
    api: TestClient, store: Store, root: str
) -> None:
    platform = admin_token(store)
    assert create(api, platform, "orders", "team-a").status_code == 201
    for location in (f"{root}/orders/checkpoint", f"{root}/orders", f"{root}/orders/checkpoint/x"):
        taken = create(api, platform, "copycat", "team-b", checkpoint_location=location)
        assert taken.status_code == 409, (location, taken.text)
        assert taken.json()["type"] == "urn:drover:problem:conflict"
        assert "orders" not in taken.json()["detail"]  # another team's job is not named
    # beside it, or anywhere free, is fine
    made = create(api, platform, "legacy", "team-b", checkpoint_location=f"{root}/old/checkpoint")
    assert made.status_code == 201, made.text
    sibling = create(api, platform, "sibling", "", checkpoint_location=f"{root}/orders/other")
    assert sibling.status_code == 201, sibling.text
    # a job created later whose own place holds a checkpoint already is refused too
    assert create(api, platform, "old", "team-c").status_code == 409
    elsewhere = create(api, platform, "old", "team-c", checkpoint_location=f"{root}/old/new")
    assert elsewhere.status_code == 201, elsewhere.text
    assert create(api, platform, "x", "", checkpoint_location=f"{root}/old").status_code == 409
    # and a change onto another job's place
    assert create(api, platform, "later", "team-b").status_code == 201
    headers = auth_headers(platform)
    for location in (f"{root}/old/checkpoint/x", f"{root}/later/checkpoint", f"{root}/later"):
        change = {"checkpoint_location": location}
        assert api.patch("/v1/jobs/orders", json=change, headers=headers).status_code == 409
    free = {"checkpoint_location": f"{root}/orders/v2"}
    assert api.patch("/v1/jobs/orders", json=free, headers=headers).status_code == 200


def test_a_batch_refuses_what_overlaps_inside_it(
    store: Store, settings: Settings, api: TestClient, root: str
) -> None:
    admin = Principal(subject="user:root", roles={"*": Role.ADMIN})

    def creation(name: str, location: str = "") -> Creation:
        spec = JobSpec(name=name, entrypoint=PIPELINE, checkpoint_location=location)
        return Creation(spec, admin, admin.subject, {})

    outcomes = Creations(store, settings).run_batch(
        [
            creation("first", f"{root}/shared/ck"),
            creation("second", f"{root}/shared/ck/inner"),  # inside the one before it
            creation("shared"),  # its default place does not overlap shared/ck
            creation("third", f"{root}/shared/other"),
        ]
    )
    assert [type(o).__name__ for o in outcomes] == [
        "JobPublic",
        "Conflict",
        "JobPublic",
        "JobPublic",
    ]
    assert isinstance(outcomes[1], Conflict)


def test_the_migration_records_each_jobs_area(empty_store: Store) -> None:
    import sqlalchemy as sa

    empty_store.upgrade("0018")
    seed_jobs(
        empty_store,
        {
            "plain": "",
            "own": "file:///ck/c/own/v2",
            "placed": "file:///ck/c/shared/placed",
            "lost": "file:///elsewhere/x",
        },
    )
    empty_store.upgrade()
    with empty_store.engine.connect() as conn:
        areas = dict(conn.execute(sa.text("SELECT name, checkpoint_area FROM jobs")).all())
    assert areas == {"plain": "plain", "own": "own", "placed": "shared", "lost": ""}
    empty_store.downgrade("0018")
    empty_store.upgrade()
