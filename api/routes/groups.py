"""``/v1/groups``: scheduling groups, each bound to a primary and an optional failover cluster.

Every mutation is one transaction that also writes the audit log. The group document carries the
catalog fields; ``members``, ``pool``, ``epoch`` and ``epoch_generation`` are null unless a
membership view fills them. ``PATCH`` and ``DELETE`` take ``If-Match: "<version>"``.

``DELETE`` removes an empty group: it is refused (409) while any job belongs to the group, and
always for the ``default`` group, which jobs created without a group join and which every node
creates at start (``scheduler.store.bootstrap``): deleting it would only last until the next start.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response, status

from api.deps import CallerDep, ContextDep, ExpectedVersionDep, NamePath, StoreDep
from api.paging import PageDep
from api.problems import problem_responses
from api.routes.common import Listing, changes_of, etag
from api.schemas.resources import GroupCreate, GroupPage, GroupPublic, GroupUpdate
from scheduler.core.errors import Conflict
from scheduler.core.paging import Sort
from scheduler.decisions.catalog import validate_group_name
from scheduler.decisions.membership import MembershipSnapshot
from scheduler.store import catalog as catalog_store
from scheduler.store import ledger
from scheduler.store.bootstrap import DEFAULT_GROUP

router = APIRouter(prefix="/v1/groups", tags=["groups"])
_LISTING = Listing(
    Sort("name"), (str,), catalog_store.page_groups, catalog_store.count_groups, GroupPage
)


@router.post(
    "",
    operation_id="create_group",
    summary="Create a scheduling group",
    description=(
        "Create a group bound to a primary cluster and optionally a failover cluster (both must "
        "exist: 422). The answer's `Location` names it."
    ),
    status_code=status.HTTP_201_CREATED,
    response_model=GroupPublic,
    responses=problem_responses(409, 415),
)
def create_group(body: GroupCreate, caller: CallerDep, response: Response) -> GroupPublic:
    with caller.store.transaction() as session:
        group = catalog_store.create_group(
            session,
            body.name,
            primary_cluster=body.primary_cluster,
            failover_cluster=body.failover_cluster,
        )
        caller.audit(session, "group.create", group.name, body.model_dump(mode="json"))
    response.headers["Location"] = f"/v1/groups/{quote(group.name, safe='')}"
    etag(response, group.version)
    return GroupPublic.of(group)


@router.get(
    "", operation_id="list_groups", summary="List scheduling groups", response_model=GroupPage
)
def list_groups(
    request: Request,
    response: Response,
    store: StoreDep,
    asked: PageDep,
) -> GroupPage:
    """The scheduling groups, by name (catalog fields; `GET /v1/groups/{name}` adds members)."""
    return _LISTING.read(request, response, store, asked, GroupPublic.of)


@router.get(
    "/{name}",
    operation_id="get_group",
    summary="Read a group with its live members",
    response_model=GroupPublic,
    responses=problem_responses(404),
)
def get_group(name: NamePath, ctx: ContextDep, store: StoreDep, response: Response) -> GroupPublic:
    """The group's catalog fields plus, as this node sees them, its live members (with the number
    of jobs each owns), the pool and the epoch."""
    with store.session() as session:
        group = catalog_store.get_group(session, validate_group_name(name))
        per_owner = ledger.jobs_per_owner(session, group.name)
    etag(response, group.version)
    return GroupPublic.of(group, **_live(ctx.views(), group.name, per_owner))


def _live(
    snapshot: MembershipSnapshot, group: str, per_owner: dict[str | None, int]
) -> dict[str, Any]:
    if snapshot.standalone:  # this node is the group's only member
        me = snapshot.this_node
        members = [
            {
                "node_id": me.node_id,
                "role": "active",
                "az": me.az,
                "cloud": me.cloud,
                "api_url": me.api_url,
                "jobs": sum(per_owner.values()),
            }
        ]
        return {"members": members, "pool": [me.node_id], "epoch": 0, "epoch_generation": 0}
    view = snapshot.groups.get(group)
    if view is None:  # this node is not a member: it does not watch the group
        return {}
    members = [{**asdict(m), "jobs": per_owner.get(m.node_id, 0)} for m in view.members]
    return {
        "members": members,
        "pool": list(view.pool),
        "epoch": view.epoch,
        "epoch_generation": view.generation,
    }


@router.patch(
    "/{name}",
    operation_id="update_group",
    summary="Change a group",
    description=(
        "Change the group's primary or failover cluster; fields left out keep their value. With "
        "`If-Match` the change applies only to that version (412 otherwise)."
    ),
    response_model=GroupPublic,
    responses=problem_responses(404, 409, 412, 415),
)
def update_group(
    name: NamePath,
    body: GroupUpdate,
    caller: CallerDep,
    expected_version: ExpectedVersionDep,
    response: Response,
) -> GroupPublic:
    changes = changes_of(body)
    with caller.store.transaction() as session:
        group = catalog_store.update_group(
            session, validate_group_name(name), changes, expected_version=expected_version
        )
        detail = body.model_dump(mode="json", exclude_unset=True)
        caller.audit(session, "group.update", group.name, detail)
    etag(response, group.version)
    return GroupPublic.of(group)


@router.delete(
    "/{name}",
    operation_id="delete_group",
    summary="Delete a group",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409, 412),
)
def delete_group(
    name: NamePath, caller: CallerDep, expected_version: ExpectedVersionDep
) -> Response:
    """Delete an empty group (refused while it has jobs; the default group is never deleted)."""
    name = validate_group_name(name)
    if name == DEFAULT_GROUP:
        raise Conflict(
            f"the {DEFAULT_GROUP!r} group cannot be deleted: jobs created without a group join "
            "it, and every node creates it at start"
        )
    with caller.store.transaction() as session:
        group = catalog_store.delete_group(session, name, expected_version=expected_version)
        caller.audit(
            session,
            "group.delete",
            group.name,
            {"primary_cluster": group.primary_cluster, "version": group.version},
            before={
                "primary_cluster": group.primary_cluster,
                "failover_cluster": group.failover_cluster,
                "version": group.version,
            },
        )
    return Response(status_code=status.HTTP_204_NO_CONTENT)
