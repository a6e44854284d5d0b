"""``/v1/quotas``: per-business submission quotas (``scheduler/decisions/quotas.py``,
``scheduler/decisions/gate.py``).

A quota limits how fast a business's jobs are submitted (a token bucket shared by every node),
and may bind the business to a dedicated group. Per-cluster caps are the cluster's own
(``max_concurrent_submissions``, ``max_running_apps`` under ``/v1/clusters/{name}``). Anybody with
a role on some team reads quotas; platform admins change them (audited); a change takes
``If-Match: "<version>"`` (optional).
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request, Response, status

from api.deps import CallerDep, ExpectedVersionDep, NamePath, StoreDep
from api.paging import PageDep
from api.problems import problem_responses
from api.routes.common import Listing, etag, read_versioned
from api.schemas.quotas import QuotaPage, QuotaPublic, QuotaPut
from scheduler.core.clock import utcnow
from scheduler.core.paging import Sort
from scheduler.decisions.quotas import QuotaRecord, QuotaSpec, validate_business
from scheduler.store import quotas as quotas_store

router = APIRouter(prefix="/v1/quotas", tags=["quotas"])
_LISTING = Listing(
    Sort("business"), (str,), quotas_store.page_quotas, quotas_store.count_quotas, QuotaPage
)


def _doc(q: QuotaRecord) -> dict[str, object]:
    return {
        "rate": q.rate,
        "burst": q.burst,
        "dedicated_group": q.dedicated_group,
        "yarn_queue": q.yarn_queue,
    }


@router.get(
    "",
    response_model=QuotaPage,
    operation_id="list_quotas",
    summary="List the businesses' submission quotas",
)
def list_quotas(
    request: Request,
    response: Response,
    store: StoreDep,
    asked: PageDep,
) -> QuotaPage:
    """The quotas, by business (a business without one is not rate limited)."""
    now = utcnow()
    return _LISTING.read(request, response, store, asked, lambda q: QuotaPublic.of(q, now))


@router.get(
    "/{business}",
    response_model=QuotaPublic,
    responses=problem_responses(404),
    operation_id="get_quota",
    summary="A business's submission quota",
)
def get_quota(business: NamePath, store: StoreDep, response: Response) -> QuotaPublic:
    """The business's rate limit, its bucket now and its dedicated group (404: no quota)."""
    key, now = validate_business(business), utcnow()
    return read_versioned(
        store, response, quotas_store.get_quota, key, lambda q: QuotaPublic.of(q, now)
    )


@router.put(
    "/{business}",
    response_model=QuotaPublic,
    responses={
        201: {"description": "Created", "model": QuotaPublic},
        **problem_responses(404, 409, 412, 415),
    },
    operation_id="put_quota",
    summary="Set a business's submission quota",
)
def put_quota(
    business: NamePath,
    body: QuotaPut,
    caller: CallerDep,
    expected_version: ExpectedVersionDep,
    response: Response,
) -> QuotaPublic:
    """Create or replace the quota (201 when created). Binding a dedicated group is refused
    (409) while the business has jobs in other groups or the group has other businesses'
    jobs."""
    name = validate_business(business)
    spec = QuotaSpec(
        rate=None if body.rate is None else float(body.rate),
        burst=body.burst,
        dedicated_group=body.dedicated_group,
        yarn_queue=body.yarn_queue,
    )
    with caller.store.transaction() as session:
        before = quotas_store.find_quota(session, name)
        quota, created = quotas_store.put_quota(
            session, name, spec, by=caller.actor, expected_version=expected_version
        )
        caller.audit(
            session,
            "quota.create" if created else "quota.update",
            name,
            body.model_dump(mode="json"),
            before=_doc(before) if before is not None else None,
            after=_doc(quota),
        )
    if created:
        response.status_code = status.HTTP_201_CREATED
        response.headers["Location"] = f"/v1/quotas/{quote(name, safe='')}"
    etag(response, quota.version)
    return QuotaPublic.of(quota, utcnow())


@router.delete(
    "/{business}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=problem_responses(404, 412),
    operation_id="delete_quota",
    summary="Remove a business's submission quota",
)
def delete_quota(
    business: NamePath, caller: CallerDep, expected_version: ExpectedVersionDep
) -> Response:
    """The business is no longer rate limited nor bound to a dedicated group."""
    name = validate_business(business)
    with caller.store.transaction() as session:
        before = quotas_store.get_quota(session, name)
        quotas_store.delete_quota(session, name, expected_version=expected_version)
        caller.audit(session, "quota.delete", name, {}, before=_doc(before))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
