"""The ops console in a real browser, and how fast its pages load: headless Debian Chromium
driven by Playwright against one Drover node process (SQLite, no ZooKeeper) whose groups run on
two simulated standalone clusters (``harness/simcluster.py``, whose drivers' logs grow a line a
second), with 10,000 more jobs in the store. One node and one browser for the whole module; each
test opens its own tab (its own session storage: it signs in).

- An operator signs in with a token, finds a job by search, stops and starts it and sees its
  state change without a reload, opens a cluster and a group page, and stops two jobs at once
  through a bulk operation (the plan shown, then executed); a viewer sees no button it cannot
  use.
- A running job's driver log appears and follows; a job is created in the form (an invalid
  entrypoint is shown on its field), edited (the diff shown first, saved as a new revision) and
  rolled back; the audit, alerts, teams and tokens (a token's secret shown once, then revoked),
  quotas and queue, nodes (drain) and overview pages show what the API says.
- A failover dry run, executed, followed item by item.
- Each page's load time with 10,000 jobs in the store: from navigation to the page's data on
  screen (the console's ``drover:ready:<page>`` performance mark), printed, never asserted.

A screenshot of each page at 1,280x800 goes to ``var/screenshots/`` (``docs/screenshots/`` holds
a copy); the test's temporary directory and the checkout's path are shown as neutral paths in
them (:func:`shot`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from api.routes.fence import PROGRESS_HEADER
from harness import http
from harness.fleet import seed_fleet
from harness.simcluster import SimCluster
from scheduler.decisions import catalog
from scheduler.decisions.identity import FENCING_TOKEN_HEADER
from scheduler.store import catalog as catalog_store
from scheduler.store.db import Store
from tests.conftest import wait_until
from tests.support.browser import browser_context
from tests.support.nodes import DROVER, NodeProcess

# the Playwright page and context are untyped here (Any): playwright ships no stubs mypy checks

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=2)]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "screenshots"
PIPELINE = str(ROOT / "pipelines" / "windowed_counts.py")
FLEET = 10_000
TEAM = "checkout"
GROUP = "checkout-g"
#: a state the browser must see change, within this many seconds
STATE_DEADLINE = 45.0
#: how the screenshots show the machine's paths (the checkout, the test's temporary directory)
SHOWN_ROOT = "/opt/drover"
SHOWN_TMP = "/var/lib/drover"


@dataclass
class Stack:
    node: NodeProcess
    store: Store
    url: str
    admin: str
    operator: str
    viewer: str
    jobs: list[str]
    tag: str
    tmp: Path
    #: the simulated cluster the jobs run on (it knows the fencing token each driver holds)
    sim: SimCluster


def api(stack: Stack, method: str, path: str, token: str, body: Any = None) -> Any:
    response = http.request(
        method,
        f"{stack.url}{path}",
        json=body,
        headers={"Authorization": f"Bearer {token}", "X-Drover-Client": "tests"},
        timeout=10,
    )
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("console")
    # the drivers' logs grow a line a second while they run (the log viewer follows them)
    sim_a = SimCluster(app_start_delay=0.5, log_every=1.0).start()
    sim_b = SimCluster(app_start_delay=0.5, log_every=1.0).start()
    url = f"sqlite:///{tmp / 'drover.db'}"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "DROVER_DATABASE_URL": url,
        "DROVER_DATA_DIR": str(tmp / "data"),
        "DROVER_RECONCILE_INTERVAL": "1",
        "DROVER_HEALTH_PROBE_INTERVAL": "1",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    }
    subprocess.run([DROVER, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=120)
    store = Store(url)
    with store.transaction() as session:
        for name, sim, az in (("sim-a", sim_a, "az-a"), ("sim-b", sim_b, "az-b")):
            (tmp / "storage" / name).mkdir(parents=True)
            catalog_store.create_cluster(
                session,
                name,
                catalog.ClusterSpec(
                    kind="standalone",
                    storage_root=(tmp / "storage" / name).as_uri(),
                    master_url=sim.master_url,
                    rest_url=sim.rest_url,
                    ui_url=sim.ui_url,
                    az=az,
                    cloud="sim",
                ),
            )
        catalog_store.create_group(
            session, GROUP, primary_cluster="sim-a", failover_cluster="sim-b"
        )
        catalog_store.create_group(
            session, "fleet", primary_cluster="sim-a", failover_cluster="sim-b"
        )
    started = time.monotonic()
    seed_fleet(store, FLEET, group="fleet", entrypoint=PIPELINE, cluster="sim-a")
    print(f"\n{FLEET:,} jobs seeded in {time.monotonic() - started:.1f} s")
    node = NodeProcess("console-1", {**env, "DROVER_AZ": "az-a"}, tmp / "node.log")
    try:
        node.start()
        node.wait_ready()
        admin = node.headers()["Authorization"].removeprefix("Bearer ")
        stack = Stack(node, store, node.url, admin, "", "", [], uuid.uuid4().hex[:6], tmp, sim_a)
        api(stack, "POST", "/v1/teams", admin, {"name": TEAM})
        for who, role in (("olga", "operator"), ("victor", "viewer")):
            api(stack, "PUT", f"/v1/teams/{TEAM}/members/{who}", admin, {"role": role})
        stack.operator = api(stack, "POST", "/v1/tokens", admin, {"identity": "olga"})["token"]
        stack.viewer = api(stack, "POST", "/v1/tokens", admin, {"identity": "victor"})["token"]
        for name, priority in (("enrich", "high"), ("sessions", "high"), ("fraud", "normal")):
            job = f"checkout-{name}-{stack.tag}"
            api(
                stack,
                "POST",
                "/v1/jobs",
                admin,
                {
                    "name": job,
                    "entrypoint": PIPELINE,
                    "group": GROUP,
                    "team": TEAM,
                    "business": "checkout-bu",
                    "priority": priority,
                    "args": ["--rows-per-second", "50"],
                    "desired_state": "RUNNING",
                },
            )
            stack.jobs.append(job)
        for job in stack.jobs:
            wait_until(
                lambda job=job: api(stack, "GET", f"/v1/jobs/{job}", admin)["state"] == "RUNNING",
                timeout=60,
                what=f"{job} RUNNING on the simulated cluster",
            )
        yield stack
    finally:
        if node.alive:
            node.stop()
        store.dispose()
        sim_a.stop()
        sim_b.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (each test opens its own tab)."""
    with browser_context() as context:
        yield context


@dataclass
class Tab:
    """A browser tab and the errors its page reported (console errors, uncaught exceptions)."""

    page: Any
    errors: list[str]
    stack: Stack
    #: every URL the tab requested
    requests: list[str]

    def expect_errors(self) -> None:
        """Forget the errors so far: the browser logs an HTTP error it was meant to get (a
        refused token's 401, an invalid form's 422)."""
        self.errors.clear()


@pytest.fixture
def tab(browser: Any, stack: Stack) -> Iterator[Tab]:
    page = browser.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("dialog", lambda dialog: dialog.dismiss())  # never a native alert/confirm
    try:
        yield Tab(page, errors, stack, requests)
    finally:
        page.close()


def ready(page: Any, name: str, timeout: float = 15_000) -> None:
    page.wait_for_selector(f"main[data-page='{name}'][data-ready='true']", timeout=timeout)


def shot(page: Any, name: str, stack: Stack | None = None) -> Path:
    """A screenshot of the tab, with this machine's paths shown as neutral ones (text on the
    page only: what the node answered is unchanged)."""
    if stack is not None:
        page.evaluate(
            """([pairs]) => {
              const fix = (t) => pairs.reduce((acc, [a, b]) => acc.split(a).join(b), t);
              const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
              for (let n = walk.nextNode(); n; n = walk.nextNode()) {
                if (pairs.some(([a]) => n.nodeValue.includes(a))) n.nodeValue = fix(n.nodeValue);
              }
              for (const el of document.querySelectorAll("input, textarea")) {
                if (pairs.some(([a]) => el.value.includes(a))) el.value = fix(el.value);
              }
            }""",
            [[[str(stack.tmp), SHOWN_TMP], [str(ROOT), SHOWN_ROOT]]],
        )
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def sign_in(page: Any, stack: Stack, token: str, screenshot: str | None = None) -> None:
    page.goto(f"{stack.url}/ui/")
    ready(page, "signin")
    if screenshot:
        shot(page, screenshot)
    page.fill("#token", token)
    page.click("form.signin button[type=submit]")
    ready(page, "jobs")


def badge_of(page: Any) -> str:
    return str(page.inner_text("[data-testid=tile-state] .badge"))


def rows_by(page: Any, rows: str, key: str, value: str) -> dict[str | None, str | None]:
    """The table rows matched by ``rows``, as their attribute ``key`` -> their attribute
    ``value``."""
    return {row.get_attribute(key): row.get_attribute(value) for row in page.locator(rows).all()}


def test_operator_finds_stops_and_starts_a_job_and_visits_every_page(tab: Tab) -> None:
    page, stack = tab.page, tab.stack
    # sign in
    page.goto(f"{stack.url}/ui/#/signin")
    ready(page, "signin")
    page.fill("#token", "drv_not-a-token")
    page.click("form.signin button[type=submit]")
    page.wait_for_selector(".signin .notice-error")
    tab.expect_errors()  # the refused token's 401 is logged by the browser
    page.fill("#token", stack.operator)
    page.click("form.signin button[type=submit]")
    ready(page, "jobs")
    assert "user:olga" in page.inner_text("#who")
    shot(page, "01-jobs", stack)

    # find a job by search: only matching rows remain
    target = stack.jobs[0]
    page.fill("[data-testid=search]", f"enrich-{stack.tag}")
    page.wait_for_function(
        "([name]) => { const rows = document.querySelectorAll('tr[data-job]');"
        " return rows.length === 1 && rows[0].dataset.job === name; }",
        arg=[target],
    )
    # the state strip counts what the search finds; a chip filters by its state
    page.wait_for_selector("[data-chip=RUNNING]")
    assert page.inner_text("[data-chip=RUNNING] .chip-count") == "1"
    page.click("[data-chip=RUNNING]")
    page.wait_for_selector("[data-chip=RUNNING][aria-pressed=true]")
    assert page.input_value("select[name=state]") == "RUNNING"
    assert page.locator("tr[data-job]").count() == 1
    shot(page, "02-jobs-search", stack)

    # the job page, then stop and start it: the state changes without a reload
    page.click(f"tr[data-job='{target}'] [data-testid=job-link]")
    ready(page, "job")
    page.wait_for_function("() => !!document.querySelector('[data-testid=job-stop]')")
    assert badge_of(page) == "RUNNING"
    # the application's page in the Spark UI of its cluster
    page.wait_for_selector("[data-testid=tile-spark] a")
    spark = page.get_attribute("[data-testid=tile-spark] a", "href")
    run = api(stack, "GET", f"/v1/jobs/{target}", stack.admin)["current_run"]
    assert spark is not None and spark.endswith(f"/app/?appId={run['app_id']}"), spark
    # the run's pipeline reports a micro-batch (as drover_runtime does with its fence check):
    # the page shows its rows and when it was reported
    report_progress(
        stack,
        target,
        run["app_name"],
        {
            "v": 1,
            "batch": 12,
            "id": 11,
            "rows": 500,
            "in": 48.5,
            "proc": 52.0,
            "dur": 820,
            "gap": 10000,
        },
    )
    page.wait_for_function(
        "() => document.querySelector('[data-testid=progress-rows]')?.textContent === '500'",
        timeout=STATE_DEADLINE * 1000,
    )
    assert page.inner_text("[data-testid=progress-reported]").endswith("ago")
    page.evaluate("window.__sameDocument = 'yes'")
    shot(page, "03-job-running", stack)
    page.click("[data-testid=job-stop]")
    page.click("dialog [data-testid=confirm]")
    seen = watch_states(page, "STOPPED")
    print(f"\nstates seen after stop: {' -> '.join(seen)}")
    shot(page, "04-job-stopped", stack)
    page.click("[data-testid=job-start]")
    seen = watch_states(page, "RUNNING")
    print(f"states seen after start: {' -> '.join(seen)}")
    assert page.evaluate("window.__sameDocument") == "yes", "the page was reloaded"
    assert page.locator("ol.timeline li").count() >= 4  # the events timeline grew
    shot(page, "05-job-restarted", stack)

    # a cluster page: health, votes of this node, history
    page.click(".tiles a[href^='#/clusters/']")
    ready(page, "cluster")
    page.wait_for_selector("tr[data-vote='console-1']", timeout=20_000)
    assert page.inner_text("h1 .badge") == "Normal"
    shot(page, "06-cluster", stack)

    # the group page: its live member, role, AZ and jobs owned
    page.goto(f"{stack.url}/ui/#/groups/{GROUP}")
    ready(page, "group")
    member = page.locator("tr[data-member='console-1']")
    assert member.get_attribute("data-role") == "active"
    assert "az-a" in member.inner_text()
    shot(page, "07-group", stack)
    page.goto(f"{stack.url}/ui/#/groups")
    ready(page, "groups")
    shot(page, "08-groups", stack)
    page.goto(f"{stack.url}/ui/#/clusters")
    ready(page, "clusters")
    shot(page, "09-clusters", stack)

    # bulk: select the other two jobs and stop them as one operation: the plan, then its run
    page.goto(f"{stack.url}/ui/#/jobs?q={stack.tag}")
    ready(page, "jobs")
    page.wait_for_selector("tr[data-job]")
    others = stack.jobs[1:]
    for name in others:
        page.check(f"tr[data-job='{name}'] input[type=checkbox]")
    page.wait_for_selector("[data-testid=bulk-bar]:not([hidden])")
    shot(page, "11-jobs-bulk-select", stack)
    page.click("[data-testid=bulk-stop]")
    page.wait_for_selector("dialog[data-testid=bulk-plan]")
    planned = rows_by(page, "dialog tr[data-item]", "data-item", "data-action")
    assert planned == dict.fromkeys(others, "stop"), planned
    page.fill("[data-testid=bulk-reason]", "browser test: maintenance")
    shot(page, "12-bulk-plan", stack)
    page.click("[data-testid=bulk-execute]")
    page.wait_for_selector(
        "[data-testid=operation-line][data-state=SUCCEEDED]", timeout=STATE_DEADLINE * 1000
    )
    for name in others:
        page.wait_for_selector(
            f"tr[data-job='{name}'][data-state='STOPPED']", timeout=STATE_DEADLINE * 1000
        )
    # one operation of the node did it (not one POST per job), its plan as reviewed
    ops = api(stack, "GET", "/v1/operations?kind=stop", stack.admin)["data"]
    op = next(o for o in ops if o["reason"] == "browser test: maintenance")
    assert op["state"] == "SUCCEEDED" and op["total"] == 2 and op["created_by"] == "user:olga"
    page.click("[data-testid=operation-link]")
    ready(page, "operation")
    assert {r.get_attribute("data-item") for r in page.locator("tr[data-item]").all()} == set(
        others
    )
    shot(page, "12-bulk-operation", stack)
    assert not tab.errors, tab.errors
    # every request went to the node, and none of them fetched its 1 MB OpenAPI document
    elsewhere = {u for u in tab.requests if not u.startswith((stack.url, "data:", "about:"))}
    assert not elsewhere, elsewhere
    assert not [u for u in tab.requests if "/openapi.json" in u]
    print(f"{len(tab.requests)} requests, all to the node, none for /openapi.json")


def report_progress(stack: Stack, job: str, app_name: str, report: dict[str, Any]) -> None:
    """What a run's pipeline sends with its fence check: its progress, with its own token (the
    one its driver holds; the store keeps only a digest)."""
    secret = stack.sim.fencing_token(app_name)
    assert secret, f"no driver of {app_name} on the simulated cluster"
    answer = http.get(
        f"{stack.url}/v1/jobs/{job}/fence",
        headers={
            "Authorization": f"Bearer {stack.admin}",
            FENCING_TOKEN_HEADER: secret,
            PROGRESS_HEADER: json.dumps(report),
        },
        timeout=10,
    )
    assert answer.status_code == 200 and answer.json()["fencing_token"] == secret, answer.text


def watch_states(page: Any, final: str) -> list[str]:
    """The job page's state badge, polled until it reads ``final``: the states it went through."""
    seen: list[str] = []
    deadline = time.monotonic() + STATE_DEADLINE
    while time.monotonic() < deadline:
        state = badge_of(page)
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == final:
            return seen
        page.wait_for_timeout(100)  # the browser's own clock: lets the page poll meanwhile
    pytest.fail(f"the job page never showed {final} (saw {seen})")


def test_a_viewer_sees_no_button_it_cannot_use(tab: Tab) -> None:
    page, stack = tab.page, tab.stack
    sign_in(page, stack, stack.viewer, screenshot="00-sign-in")
    assert "viewer on checkout" in page.inner_text("#who")
    page.wait_for_selector("tr[data-job]")
    assert page.locator("tr[data-job] input[type=checkbox]:enabled").count() == 0
    assert page.locator("[data-testid=new-job]").count() == 0
    assert page.locator("#nav a[href='#/audit']").count() == 0  # team admins and up
    page.goto(f"{stack.url}/ui/#/jobs/{stack.jobs[0]}")
    ready(page, "job")
    for testid in ("job-start", "job-stop", "job-restart", "job-edit", "revision-rollback"):
        assert page.locator(f"[data-testid={testid}]").count() == 0
    assert page.locator("[data-testid=job-log]").count() == 1  # a viewer reads the log
    shot(page, "13-job-as-viewer", stack)
    page.goto(f"{stack.url}/ui/#/clusters/sim-a")
    ready(page, "cluster")
    assert page.locator("[data-testid=mark-abnormal]").count() == 0
    page.goto(f"{stack.url}/ui/#/nodes")
    ready(page, "nodes")
    assert page.locator("[data-testid=node-drain]").count() == 0
    page.goto(f"{stack.url}/ui/#/quotas")
    ready(page, "quotas")
    assert page.locator("[data-testid=quota-new]").count() == 0
    # signing out forgets the token
    page.click("[data-testid=signout]")
    ready(page, "signin")
    assert page.evaluate("window.sessionStorage.length") == 0
    assert not tab.errors, tab.errors


def test_the_driver_log_of_a_running_job_appears_and_follows(tab: Tab) -> None:
    """The tail of a running driver's log, read from its (simulated) worker through the API,
    then followed: lines the driver logs later appear without a reload."""
    page, stack = tab.page, tab.stack
    job = stack.jobs[0]
    wait_until(
        lambda: api(stack, "GET", f"/v1/jobs/{job}", stack.admin)["state"] == "RUNNING",
        timeout=STATE_DEADLINE,
        what=f"{job} RUNNING",
    )
    sign_in(page, stack, stack.operator)
    page.goto(f"{stack.url}/ui/#/jobs/{job}")
    ready(page, "job")
    page.click("[data-testid=job-log]")
    ready(page, "job-log")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=log]').textContent"
        ".includes('Connected to Spark cluster with app ID')"
    )
    first = int(page.get_attribute("[data-testid=log]", "data-lines") or 0)
    started = time.monotonic()
    page.wait_for_function(
        f"() => Number(document.querySelector('[data-testid=log]').dataset.lines) >= {first + 3}",
        timeout=15_000,
    )
    print(
        f"\ndriver log: {first} lines at first, 3 more followed in "
        f"{time.monotonic() - started:.1f} s ({page.inner_text('[data-testid=log-info]')})"
    )
    assert "following" in page.inner_text("[data-testid=log-info]")
    # the newest line is in view (the viewer sticks to the end while following)
    assert page.evaluate(
        "(() => { const p = document.querySelector('[data-testid=log]');"
        " return p.scrollHeight - p.scrollTop - p.clientHeight < 40; })()"
    )
    run = api(stack, "GET", f"/v1/jobs/{job}", stack.admin)["current_run"]
    links = [a.get_attribute("href") for a in page.locator(".log-links a").all()]
    assert any(h and h.endswith(f"appId={run['app_id']}") for h in links), links
    # the filter keeps only the lines containing its text
    page.fill("[data-testid=log-filter]", "Committed batch")
    assert all(
        "Committed batch" in line for line in page.inner_text("[data-testid=log]").split("\n")
    )
    page.fill("[data-testid=log-filter]", "")
    shot(page, "16-driver-log", stack)
    assert not tab.errors, tab.errors


def test_a_job_is_created_and_edited_in_the_form(tab: Tab) -> None:
    """The form: an invalid entrypoint is shown on its field (the API's 422 problem document
    says which field); the job is created; an edit shows its diff first and is saved as a new
    revision (If-Match); a rollback is one more revision; its label filters the list."""
    page, stack = tab.page, tab.stack
    name = f"forms-orders-{stack.tag}"
    sign_in(page, stack, stack.admin)
    page.click("[data-testid=new-job]")
    ready(page, "job-new")
    page.wait_for_selector(f"[data-testid=field-group] option[value={GROUP}]", state="attached")
    page.fill("[data-testid=field-name]", name)
    page.select_option("[data-testid=field-group]", GROUP)
    page.fill("input[name=team]", "forms")
    page.fill("[data-testid=field-entrypoint]", PIPELINE.replace(".py", ".txt"))
    page.fill("[data-testid=field-args]", "--rows-per-second\n10")
    page.fill("[data-testid=field-labels]", f"env=prod\nsuite={stack.tag}")
    page.click("[data-testid=form-save]")
    error = page.wait_for_selector("[data-testid=error-entrypoint]:not(:empty)")
    assert "Python file" in error.inner_text()
    assert page.get_attribute("[data-testid=field-entrypoint]", "aria-invalid") == "true"
    assert page.inner_text("[data-testid=error-name]") == ""  # only the field at fault
    shot(page, "17-job-form-invalid", stack)
    tab.expect_errors()  # the browser logs the 422 it was meant to get
    page.fill("[data-testid=field-entrypoint]", PIPELINE)
    page.click("[data-testid=form-save]")
    ready(page, "job")
    assert page.inner_text("h1").startswith(name)
    page.wait_for_selector("tr[data-revision='1']")

    # edit: the diff is shown before saving; saved, it is revision 2
    page.click("[data-testid=job-edit]")
    ready(page, "job-edit")
    page.fill("[data-testid=field-args]", "--rows-per-second\n20")
    page.fill("[data-testid=field-conf]", "spark.sql.shuffle.partitions=4")
    page.click("[data-testid=form-save]")
    page.wait_for_selector("dialog[data-testid=review]")
    changes = rows_by(page, "dialog tr[data-change]", "data-change", "data-kind")
    assert changes == {"args": "changed", "conf.spark.sql.shuffle.partitions": "added"}, changes
    shot(page, "18-job-edit-diff", stack)
    page.click("[data-testid=review-save]")
    ready(page, "job")
    page.wait_for_selector("tr[data-revision='2']")
    job = api(stack, "GET", f"/v1/jobs/{name}", stack.admin)
    assert job["spec_version"] == 2 and job["args"] == ["--rows-per-second", "20"]
    revision = api(stack, "GET", f"/v1/jobs/{name}/revisions/2", stack.admin)
    assert revision["cause"] == "api:update by user:harness", revision["cause"]

    # roll back to revision 1: the changes shown, then a third revision equal to the first
    page.click("tr[data-revision='1'] [data-testid=revision-rollback]")
    page.wait_for_selector("dialog[data-testid=rollback] tr[data-change='args']")
    page.click("[data-testid=rollback-confirm]")
    page.wait_for_selector("tr[data-revision='3']")
    job = api(stack, "GET", f"/v1/jobs/{name}", stack.admin)
    assert job["spec_version"] == 3 and job["args"] == ["--rows-per-second", "10"]
    shot(page, "19-job-revisions", stack)

    # its label filters the list (a chip adds it to the filter)
    page.goto(f"{stack.url}/ui/#/jobs?label=suite%3D{stack.tag}")
    ready(page, "jobs")
    page.wait_for_selector(f"tr[data-job='{name}']")
    assert page.locator("tr[data-job]").count() == 1
    page.click(f"tr[data-job='{name}'] [data-label='env=prod']")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=filter-label]').value.includes('env=prod')"
    )
    assert not tab.errors, tab.errors


def test_the_audit_alerts_teams_and_quotas_pages(tab: Tab) -> None:
    """What the API keeps, shown: the audit log (filtered, with before and after), alerts (a
    cluster marked abnormal fires one), a team's alert channel, a token created (its secret
    once) and revoked, a quota set and the submission queue it makes, a drain refused."""
    page, stack = tab.page, tab.stack
    # a cluster no group uses, marked abnormal: its alert fires
    api(stack, "POST", "/v1/clusters", stack.admin, {
        "name": "sim-c", "kind": "standalone", "master_url": "spark://sim-c:7077",
        "rest_url": "http://127.0.0.1:9", "ui_url": "http://127.0.0.1:9",
        "storage_root": (stack.tmp / "storage" / "sim-c").as_uri(),
    })  # fmt: skip
    api(stack, "POST", "/v1/clusters/sim-c/mark-abnormal", stack.admin, {"reason": "AZ c drill"})
    api(stack, "POST", f"/v1/teams/{TEAM}/alert-channels", stack.admin, {
        "name": "checkout-oncall", "kind": "slack",
        "url": "https://hooks.slack.invalid/services/T0000/B0000/XXXXXXXXXXXXXXXX",
    })  # fmt: skip
    sign_in(page, stack, stack.admin)

    # audit: every change, newest first; filtered by target; a change's before and after
    page.goto(f"{stack.url}/ui/#/audit")
    ready(page, "audit")
    assert page.locator("tr[data-audit]").count() > 1
    shot(page, "20-audit", stack)
    job = stack.jobs[0]
    page.goto(f"{stack.url}/ui/#/audit?target_name={job}")
    ready(page, "audit")
    actions = [r.get_attribute("data-action") for r in page.locator("tr[data-audit]").all()]
    assert "job.create" in actions, actions
    assert set(actions) <= {"job.create", "job.stop", "job.start", "job.restart", "job.update"}
    page.fill("[data-testid=audit-action]", "job.create")
    page.press("[data-testid=audit-action]", "Enter")
    page.wait_for_function(
        "() => location.hash.includes('action=job.create')"
        " && document.querySelectorAll('tr[data-audit]').length === 1"
    )
    page.click("tr[data-audit] [data-testid=audit-change]")
    page.wait_for_selector("dialog tr[data-change='entrypoint'][data-kind='added']")
    shot(page, "20-audit-change", stack)
    page.click("dialog [data-testid=cancel]")

    # alerts: the cluster's fires; the team's channel as the API shows it
    page.goto(f"{stack.url}/ui/#/alerts")
    ready(page, "alerts")
    page.wait_for_selector("tr[data-kind=cluster_abnormal][data-status=firing]", timeout=20_000)
    channel = page.locator("tr[data-channel=checkout-oncall] [data-testid=channel-url]")
    shown = api(stack, "GET", f"/v1/teams/{TEAM}/alert-channels", stack.admin)[0]["url"]
    assert channel.inner_text() == shown  # whatever the API masks stays masked
    shot(page, "21-alerts", stack)
    channel.scroll_into_view_if_needed()
    shot(page, "21-alert-channels", stack)
    api(stack, "POST", "/v1/clusters/sim-c/clear", stack.admin, {"reason": "drill over"})
    page.click("[data-testid=alerts-resolved]")
    page.wait_for_selector("tr[data-kind=cluster_abnormal][data-status=resolved]", timeout=20_000)

    # teams and tokens: a token for olga, its secret shown once, then revoked
    page.goto(f"{stack.url}/ui/#/access")
    ready(page, "access")
    assert page.locator(f"tr[data-team={TEAM}]").count() == 1
    page.fill("[data-testid=token-identity]", "olga")
    page.fill("[data-testid=token-description]", "browser test")
    # a new token may not outlive the one minting it (the harness's expires in two days)
    page.select_option("select[name=expires_in_seconds]", "86400")
    page.click("[data-testid=token-create]")
    secret = page.input_value("[data-testid=token-secret]")
    assert secret.startswith("drv_")
    who = http.get(
        f"{stack.url}/v1/whoami",
        headers={"Authorization": f"Bearer {secret}"},
        timeout=10,
    )
    assert who.json()["subject"] == "user:olga"
    shot(page, "22-token-created", stack)
    page.click("[data-testid=token-secret-done]")
    assert secret not in page.inner_text("main")  # gone from the page
    made = max(t["id"] for t in api(stack, "GET", "/v1/tokens?limit=100", stack.admin)["data"])
    page.click(f"tr[data-token='{made}'] [data-testid=token-revoke]")
    page.click("dialog [data-testid=confirm]")
    page.wait_for_selector(f"tr[data-token='{made}'][data-state=revoked]")
    refused = http.get(
        f"{stack.url}/v1/whoami",
        headers={"Authorization": f"Bearer {secret}"},
        timeout=10,
    )
    assert refused.status_code == 401
    tab.expect_errors()

    # quotas and the queue: a quota set in the page holds the second of two jobs back
    page.goto(f"{stack.url}/ui/#/quotas")
    ready(page, "quotas")
    page.click("[data-testid=quota-new]")
    page.fill("[data-testid=quota-business]", "queue-bu")
    page.fill("[data-testid=quota-rate]", "0.001")
    page.fill("[data-testid=quota-burst]", "1")
    page.click("[data-testid=quota-save]")
    page.wait_for_selector("tr[data-quota=queue-bu]")
    queued = [f"queue-{i}-{stack.tag}" for i in (1, 2)]
    for name in queued:
        api(stack, "POST", "/v1/jobs", stack.admin, {
            "name": name, "entrypoint": PIPELINE, "group": GROUP, "team": "queues",
            "business": "queue-bu", "desired_state": "RUNNING",
        })  # fmt: skip
    page.wait_for_selector("tr[data-queued]", timeout=STATE_DEADLINE * 1000)
    row = page.locator("tr[data-queued]").first
    assert row.get_attribute("data-queued") in queued
    assert "queue-bu" in row.inner_text()
    shot(page, "23-quotas-queue", stack)
    for name in queued:
        api(stack, "POST", f"/v1/jobs/{name}/stop", stack.admin)

    # nodes: a drain is asked first, and this node without ZooKeeper refuses it (nobody else)
    page.goto(f"{stack.url}/ui/#/nodes")
    ready(page, "nodes")
    page.click("tr[data-node='console-1'] [data-testid=node-drain]")
    page.wait_for_selector("dialog [data-testid=confirm]")
    page.click("dialog [data-testid=confirm]")
    page.wait_for_selector(".toast-error:has-text('without ZooKeeper')")
    shot(page, "10-nodes", stack)
    tab.expect_errors()  # the 409 of the refused drain

    # the overview: the counts, the charts
    page.goto(f"{stack.url}/ui/#/overview")
    ready(page, "overview")
    assert page.inner_text("[data-testid=tile-jobs] .value") != ""
    # the runs started in the last day, as bars
    page.wait_for_selector("[data-testid=chart-activity] rect", state="attached")
    # two samples of the counts make the first areas (the console samples every few seconds)
    page.wait_for_selector("[data-testid=chart-states] polygon", state="attached", timeout=20_000)
    shot(page, "24-overview", stack)
    assert not tab.errors, tab.errors


def test_failover_dry_run_then_its_live_progress(tab: Tab) -> None:
    """A platform admin plans a failover of the team's jobs from sim-a to sim-b (dry run: each
    item with its action and why), executes that plan and watches each item's step."""
    page, stack = tab.page, tab.stack
    sign_in(page, stack, stack.admin)
    page.goto(f"{stack.url}/ui/#/clusters/sim-a")
    ready(page, "cluster")
    page.click("[data-testid=failover-from]")
    ready(page, "failovers")
    page.wait_for_selector("[data-testid=failover-source] option[value=sim-a]", state="attached")
    assert page.input_value("[data-testid=failover-source]") == "sim-a"
    page.fill("input[name=teams]", TEAM)
    page.fill("input[name=reason]", "browser test: AZ a maintenance")
    page.click("[data-testid=failover-plan]")
    page.wait_for_selector("[data-testid=plan]")
    planned = rows_by(page, "tr[data-item]", "data-item", "data-action")
    print(f"\nfailover dry run: {planned}")
    assert set(planned) == set(stack.jobs)
    shot(page, "14-failover-dry-run", stack)
    page.click("[data-testid=failover-execute]")
    page.click("dialog [data-testid=confirm]")
    ready(page, "failover")
    started = time.monotonic()
    steps: list[str] = []
    while time.monotonic() - started < 90:
        seen = sorted(
            f"{r.get_attribute('data-item')}:{r.get_attribute('data-step')}"
            for r in page.locator("tr[data-item]").all()
        )
        if not steps or steps[-1] != " ".join(seen):
            steps.append(" ".join(seen))
        if page.locator(".page-header [data-state=SUCCEEDED]").count():
            break
        page.wait_for_timeout(200)
    print("failover item steps seen:\n  " + "\n  ".join(steps))
    shot(page, "15-failover-done", stack)
    assert page.locator(".page-header [data-state=SUCCEEDED]").count() == 1
    enrich = api(stack, "GET", f"/v1/jobs/{stack.jobs[0]}", stack.admin)
    assert enrich["cluster"] == "sim-b"
    assert not tab.errors, tab.errors


def test_page_load_times_with_10000_jobs(browser: Any, stack: Stack) -> None:
    """Page load times: printed, not asserted (a shared 2-core machine)."""
    job = stack.jobs[0]
    pages = [
        ("jobs", "jobs", "#/jobs"),
        ("jobs, search", "jobs", "#/jobs?q=fleet-0999"),
        ("jobs, state filter", "jobs", "#/jobs?state=FAILED&limit=200"),
        ("job", "job", f"#/jobs/{job}"),
        ("fleet job", "job", "#/jobs/fleet-04321"),
        ("clusters", "clusters", "#/clusters"),
        ("cluster", "cluster", "#/clusters/sim-a"),
        ("groups", "groups", "#/groups"),
        ("group", "group", "#/groups/fleet"),
        ("failovers", "failovers", "#/failovers"),
        ("nodes", "nodes", "#/nodes"),
        ("overview", "overview", "#/overview"),
        ("job form", "job-edit", f"#/jobs/{job}/edit"),
        ("driver log", "job-log", f"#/jobs/{job}/log"),
        ("audit", "audit", "#/audit"),
        ("alerts", "alerts", "#/alerts"),
        ("teams & tokens", "access", "#/access"),
        ("quotas & queue", "quotas", "#/quotas"),
    ]
    page = browser.new_page()
    try:
        sign_in(page, stack, stack.admin)
        count = page.inner_text(".page-header .subtitle")
        print(f"\njobs page says: {count}")
        results: list[tuple[str, float, float]] = []
        for label, name, fragment in pages:
            times = []
            for _ in range(3):
                page.goto("about:blank")
                page.goto(f"{stack.url}/ui/{fragment}")
                ready(page, name)
                mark = page.evaluate(
                    f"performance.getEntriesByName('drover:ready:{name}')[0].startTime"
                )
                times.append(float(mark))
            results.append((label, statistics.median(times), max(times)))
        # the next page of the 10,000 (a click, no reload)
        page.goto(f"{stack.url}/ui/#/jobs")
        ready(page, "jobs")
        started = time.monotonic()
        first = page.get_attribute("tr[data-job]:first-child", "data-job")
        page.click("[data-testid=next]")
        page.wait_for_function(
            "([before]) => { const r = document.querySelector('tr[data-job]');"
            " return r && r.dataset.job !== before; }",
            arg=[first],
        )
        next_ms = (time.monotonic() - started) * 1000
    finally:
        page.close()
    print(f"console page loads with {FLEET:,} jobs in the store (navigation -> data on screen):")
    for label, median, worst in results:
        print(f"  {label:<20} median {median:6.0f} ms   worst of 3 {worst:6.0f} ms")
    print(f"  {'jobs, next page':<20} {next_ms:6.0f} ms (in-page)")
