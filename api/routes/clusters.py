"""``/v1/clusters``: the Spark clusters jobs run on (``scheduler.decisions.catalog`` says what is
valid).

Every mutation is one transaction that also writes the audit log. ``health`` is read-only here:
the cluster monitor sets it. ``PATCH`` takes ``If-Match: "<version>"``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response, status

from api.deps import CallerDep, ExpectedVersionDep, NamePath, StoreDep
from api.paging import PageDep
from api.problems import problem_responses
from api.routes.common import Listing, changes_of, etag, read_versioned
from api.schemas.resources import ClusterCreate, ClusterPage, ClusterPublic, ClusterUpdate
from scheduler.core.paging import Sort
from scheduler.core.records import ClusterRecord
from scheduler.decisions.catalog import ClusterSpec, validate_cluster_name
from scheduler.store import catalog as catalog_store

router = APIRouter(prefix="/v1/clusters", tags=["clusters"])
_LISTING = Listing(
    Sort("name"), (str,), catalog_store.page_clusters, catalog_store.count_clusters, ClusterPage
)


@router.post(
    "",
    operation_id="create_cluster",
    summary="Register a cluster",
    description=(
        "Register a Spark cluster: its kind, URLs (which ones a kind needs is checked: 422), AZ, "
        "cloud and checkpoint storage root (unique among clusters: 409). The answer's `Location` "
        "names it."
    ),
    status_code=status.HTTP_201_CREATED,
    response_model=ClusterPublic,
    responses=problem_responses(409, 415),
)
def create_cluster(body: ClusterCreate, caller: CallerDep, response: Response) -> ClusterPublic:
    spec = ClusterSpec(**body.model_dump(exclude={"name", "artifact_roots"}))
    with caller.store.transaction() as session:
        cluster = catalog_store.create_cluster(session, body.name, spec)
        if body.artifact_roots:
            cluster = catalog_store.set_artifact_roots(session, cluster.name, body.artifact_roots)
        detail = body.model_dump(mode="json")
        caller.audit(session, "cluster.create", cluster.name, detail, after=_doc(cluster))
    response.headers["Location"] = f"/v1/clusters/{quote(cluster.name, safe='')}"
    etag(response, cluster.version)
    return ClusterPublic.of(cluster)


@router.get("", operation_id="list_clusters", summary="List clusters", response_model=ClusterPage)
def list_clusters(
    request: Request,
    response: Response,
    store: StoreDep,
    asked: PageDep,
) -> ClusterPage:
    """The Spark clusters, by name."""
    return _LISTING.read(request, response, store, asked, ClusterPublic.of)


@router.get(
    "/{name}",
    operation_id="get_cluster",
    summary="Read a cluster",
    description=(
        "The cluster's catalog fields and its current health state. The `ETag` header is its "
        "`version`, for `If-Match`."
    ),
    response_model=ClusterPublic,
    responses=problem_responses(404),
)
def get_cluster(name: NamePath, store: StoreDep, response: Response) -> ClusterPublic:
    key = validate_cluster_name(name)
    return read_versioned(store, response, catalog_store.get_cluster, key, ClusterPublic.of)


@router.patch(
    "/{name}",
    operation_id="update_cluster",
    summary="Change a cluster",
    description=(
        "Change the fields sent; fields left out keep their value. With `If-Match` the change "
        "applies only to that version (412 otherwise)."
    ),
    response_model=ClusterPublic,
    responses=problem_responses(404, 409, 412, 415),
)
def update_cluster(
    name: NamePath,
    body: ClusterUpdate,
    caller: CallerDep,
    expected_version: ExpectedVersionDep,
    response: Response,
) -> ClusterPublic:
    changes = changes_of(body, nullable=())
    roots = changes.pop("artifact_roots", None)
    with caller.store.transaction() as session:
        name = validate_cluster_name(name)
        before = catalog_store.get_cluster(session, name)
        cluster = before
        if changes:
            cluster = catalog_store.update_cluster(
                session, name, changes, expected_version=expected_version
            )
            expected_version = None if expected_version is None else cluster.version
        if roots is not None:
            cluster = catalog_store.set_artifact_roots(
                session, name, roots, expected_version=expected_version
            )
        caller.audit(
            session,
            "cluster.update",
            cluster.name,
            body.model_dump(mode="json", exclude_unset=True),
            before=_doc(before),
            after=_doc(cluster),
        )
    etag(response, cluster.version)
    return ClusterPublic.of(cluster)


def _doc(cluster: ClusterRecord) -> dict[str, Any]:
    """A cluster as the audit log keeps it (JSON)."""
    return ClusterPublic.of(cluster).model_dump(mode="json", exclude={"created_at", "updated_at"})
