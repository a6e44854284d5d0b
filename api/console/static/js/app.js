// The console's entry point: sign-in state, navigation, and the page router.
//
// Pages live in the URL's fragment (#/jobs, #/jobs/<name>, #/clusters/<name>, ...), so the node
// serves one index.html for all of them and a reload or a shared link opens the same page.
// Each page module exports ``render(root, ctx)`` and may return a function that stops what it
// started (its Poller); the router calls it when the page changes.

import * as api from "./api.js";
import * as session from "./session.js";
import * as samples from "./samples.js";
import { h, replace } from "./dom.js";
import { clearToasts, errorNotice } from "./components.js";
import * as signin from "./views/signin.js";
import * as jobs from "./views/jobs.js";
import * as job from "./views/job.js";
import * as clusters from "./views/clusters.js";
import * as cluster from "./views/cluster.js";
import * as groups from "./views/groups.js";
import * as group from "./views/group.js";
import * as failovers from "./views/failovers.js";
import * as failover from "./views/failover.js";
import * as nodes from "./views/nodes.js";
import * as overview from "./views/overview.js";
import * as jobform from "./views/jobform.js";
import * as joblog from "./views/joblog.js";
import * as operation from "./views/operation.js";
import * as audit from "./views/audit.js";
import * as alerts from "./views/alerts.js";
import * as access from "./views/access.js";
import * as quotas from "./views/quotas.js";

const ROUTES = [
  { pattern: /^\/signin$/, view: signin, page: "signin", public: true },
  { pattern: /^\/overview$/, view: overview, page: "overview", nav: "overview" },
  { pattern: /^\/jobs$/, view: jobs, page: "jobs", nav: "jobs" },
  { pattern: /^\/create-job$/, view: jobform, page: "job-new", nav: "jobs" },
  { pattern: /^\/jobs\/([^/]+)$/, view: job, page: "job", nav: "jobs", params: ["name"] },
  { pattern: /^\/jobs\/([^/]+)\/edit$/, view: jobform, page: "job-edit", nav: "jobs", params: ["name"] },
  { pattern: /^\/jobs\/([^/]+)\/log$/, view: joblog, page: "job-log", nav: "jobs", params: ["name"] },
  { pattern: /^\/operations\/([^/]+)$/, view: operation, page: "operation", nav: "jobs", params: ["id"] },
  { pattern: /^\/clusters$/, view: clusters, page: "clusters", nav: "clusters" },
  { pattern: /^\/clusters\/([^/]+)$/, view: cluster, page: "cluster", nav: "clusters", params: ["name"] },
  { pattern: /^\/groups$/, view: groups, page: "groups", nav: "groups" },
  { pattern: /^\/groups\/([^/]+)$/, view: group, page: "group", nav: "groups", params: ["name"] },
  { pattern: /^\/failovers$/, view: failovers, page: "failovers", nav: "failovers" },
  { pattern: /^\/failovers\/([^/]+)$/, view: failover, page: "failover", nav: "failovers", params: ["id"] },
  { pattern: /^\/nodes$/, view: nodes, page: "nodes", nav: "nodes" },
  { pattern: /^\/quotas$/, view: quotas, page: "quotas", nav: "quotas" },
  { pattern: /^\/alerts$/, view: alerts, page: "alerts", nav: "alerts" },
  { pattern: /^\/audit$/, view: audit, page: "audit", nav: "audit" },
  { pattern: /^\/access$/, view: access, page: "access", nav: "access" },
];

const NAV = [
  ["overview", "Overview"],
  ["jobs", "Jobs"],
  ["clusters", "Clusters"],
  ["groups", "Groups"],
  ["failovers", "Failovers"],
  ["nodes", "Nodes"],
  ["quotas", "Queues"],
  ["alerts", "Alerts"],
  ["audit", "Audit", "audit.read"],
  ["access", "Teams"],
];

const main = document.getElementById("view");
const navEl = document.getElementById("nav");
const whoEl = document.getElementById("who");
let dispose = null;
let generation = 0;

/** The current location: path and query of the fragment. */
export function location() {
  const raw = window.location.hash.replace(/^#/, "") || "/jobs";
  const [path, search = ""] = raw.split("?");
  return { path, query: new URLSearchParams(search) };
}

/** Go to ``path`` with ``query`` (an object; empty values dropped). */
export function navigate(path, query = {}, { replace: replaceEntry = false } = {}) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== null && v !== undefined && v !== "") params.set(k, v);
  }
  const search = params.toString();
  const target = `#${path}${search ? `?${search}` : ""}`;
  if (replaceEntry) {
    window.history.replaceState(null, "", target);
  } else if (window.location.hash !== target) {
    window.location.hash = target;
    return; // hashchange renders
  }
  render();
}

function paintChrome(active) {
  const me = session.whoami();
  replace(
    navEl,
    me
      ? NAV.filter(([, , action]) => !action || session.can(action)).map(([key, label]) =>
          h("a", { href: `#/${key}`, class: key === active ? "active" : "", "aria-current": key === active ? "page" : null }, label),
        )
      : [],
  );
  replace(
    whoEl,
    me
      ? [
          h("span", { class: "subject", title: roleSummary(me) }, me.subject),
          h("span", { class: "roles" }, roleSummary(me)),
          h("button", { type: "button", class: "btn btn-ghost", dataset: { testid: "signout" }, onclick: () => session.signOut("signed out") }, "Sign out"),
        ]
      : [],
  );
}

function roleSummary(me) {
  const roles = Object.entries(me.roles || {}).map(([team, role]) => `${role} on ${team === "*" ? "every team" : team}`);
  const readOnly = (me.scopes || []).includes("write") ? "" : " (read-only token)";
  return (roles.join(", ") || "no roles") + readOnly;
}

async function render() {
  const mine = ++generation;
  if (dispose) {
    try {
      dispose();
    } catch (err) {
      console.error(err);
    }
    dispose = null;
  }
  const { path, query } = location();
  let route = ROUTES.find((r) => r.pattern.test(path));
  if (!route) {
    navigate("/jobs", {}, { replace: true });
    return;
  }
  if (!route.public && !session.whoami()) {
    if (!session.token()) {
      navigate("/signin", { next: path === "/signin" ? "" : `${path}?${query}` }, { replace: true });
      return;
    }
    try {
      session.setWhoami(await api.get("/v1/whoami"));
    } catch (err) {
      if (mine !== generation) return;
      if (!session.token()) return; // a 401 signed us out: the sign-out listener navigates
      replace(main, errorNotice(err));
      return;
    }
    if (mine !== generation) return;
  }
  const match = path.match(route.pattern);
  const params = {};
  (route.params || []).forEach((name, i) => {
    params[name] = decodeURIComponent(match[i + 1]);
  });
  paintChrome(route.nav);
  clearToasts();
  document.body.dataset.page = route.page;
  main.dataset.page = route.page;
  main.dataset.ready = "false";
  replace(main, h("div", { class: "loading" }, "Loading…"));
  const ctx = {
    params,
    query,
    navigate,
    /** the page has drawn its data (what the browser tests time) */
    ready() {
      if (mine !== generation || main.dataset.ready === "true") return;
      main.dataset.ready = "true";
      // the time from navigation to the page's data on screen (what the browser tests print)
      performance.mark(`drover:ready:${route.page}`);
    },
    /** still the page on screen? (after an await) */
    current() {
      return mine === generation;
    },
  };
  try {
    const result = await route.view.render(main, ctx);
    if (mine !== generation) {
      if (typeof result === "function") result();
      return;
    }
    dispose = typeof result === "function" ? result : null;
  } catch (err) {
    console.error(err);
    if (mine === generation) {
      replace(main, errorNotice(err));
      main.dataset.ready = "error";
    }
  }
}

session.onSignOut((reason) => {
  samples.forget();
  paintChrome(null);
  navigate("/signin", reason ? { reason } : {}, { replace: true });
});
window.addEventListener("hashchange", render);
render();
