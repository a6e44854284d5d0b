// One cluster: its health (state, reason, what the votes say now), each node's vote, the
// history of transitions with their evidence, its configuration and jobs; mark it abnormal or
// clear the mark, or start a failover from it.

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, h, num, replace, seconds, when } from "../dom.js";
import {
  button,
  confirm,
  facts,
  healthBadge,
  liveIndicator,
  notice,
  pageHeader,
  section,
  stateBadge,
  table,
  toast,
} from "../components.js";
import { Poller } from "../poll.js";
import { keepLive, notFoundPage } from "./live.js";

export async function render(root, ctx) {
  const name = ctx.params.name;
  const base = `/v1/clusters/${api.seg(name)}`;
  const live = liveIndicator();
  const header = h("div", {});
  const message = h("div", {});
  const healthEl = h("div", {});
  const votesEl = h("div", {});
  const historyEl = h("div", {});
  const configEl = h("div", {});
  const jobsEl = h("div", {});
  let cluster = null;
  let health = null;
  let busy = false;

  replace(
    root,
    header,
    message,
    h("div", { class: "cards" }, section("Health", healthEl), section("Jobs", jobsEl)),
    section("Votes (each node's latest probe)", votesEl),
    h("div", { class: "cards" }, section("History", historyEl), section("Configuration", configEl)),
  );

  async function mark() {
    const reason = await confirm({
      title: `Mark ${name} abnormal?`,
      body: "Nothing is started on the cluster until an operator clears the mark; its jobs wait in QUEUED saying why.",
      confirmLabel: "Mark abnormal",
      danger: true,
      input: "Reason (shown on its jobs and in the audit log)",
      required: true,
    });
    if (reason === null) return;
    await write(() => api.post(`${base}/mark-abnormal`, { reason }), "marked abnormal");
  }

  async function clearMark() {
    const reason = await confirm({ title: `Clear the manual mark of ${name}?`, confirmLabel: "Clear", input: "Reason (optional)" });
    if (reason === null) return;
    await write(() => api.post(`${base}/clear`, { reason }), "cleared");
  }

  async function write(fn, what) {
    busy = true;
    paintHeader();
    try {
      await fn();
      toast(`${name} ${what}`, "ok");
    } catch (err) {
      toast(`Refused: ${err.message}`, "error", 10000);
    } finally {
      busy = false;
    }
    poller.now();
  }

  async function paintHeader() {
    const state = health ? health.state : cluster.health;
    const marker = session.can("cluster.mark");
    const failover = session.can("failover.write");
    replace(
      header,
      pageHeader(name, {
        badge: healthBadge(state),
        subtitle: [`${cluster.kind} cluster`, cluster.az ? ` in ${cluster.az}` : "", cluster.cloud ? ` (${cluster.cloud})` : ""],
        actions: [
          live,
          marker && state !== "MANUAL_ABNORMAL" ? button("Mark abnormal", mark, { kind: "danger", disabled: busy, testid: "mark-abnormal" }) : null,
          marker && state === "MANUAL_ABNORMAL" ? button("Clear mark", clearMark, { kind: "primary", disabled: busy, testid: "clear-mark" }) : null,
          failover ? h("a", { class: "btn", href: `#/failovers?source=${api.seg(name)}`, dataset: { testid: "failover-from" } }, "Fail over…") : null,
        ],
      }),
    );
  }

  function paintHealth() {
    const a = health.assessment;
    replace(
      healthEl,
      state(health),
      facts([
        ["State", healthBadge(health.state)],
        ["Reason", health.reason || "—"],
        ["Since", health.since ? [datetime(health.since), " (", when(health.since), ")"] : "—"],
        ["The votes say now", [healthBadge(a.state), a.reason ? ` ${a.reason}` : ""]],
        ["Recent failed probes", num(a.recent_failures)],
        ["Last failed probe", a.last_failure ? when(a.last_failure) : "none"],
        a.normal_not_before ? ["Normal again at", datetime(a.normal_not_before)] : null,
        ["Live nodes", a.live_nodes === null ? "unknown on this node" : a.live_nodes.join(", ") || "none"],
      ]),
    );
    replace(
      votesEl,
      table(
        [
          { label: "Node", cell: (v) => v.node_id },
          { label: "Probe", cell: (v) => h("span", { class: v.ok ? "vote-ok" : "vote-fail" }, v.ok ? "ok" : "failed") },
          { label: "Latency", cell: (v) => seconds(v.latency_s) },
          { label: "At", cell: (v) => when(v.at) },
          { label: "Counted", cell: (v) => (v.counted ? "yes" : "no (not a live node)") },
          { label: "Detail", cell: (v) => v.detail || "", class: "wrap" },
        ],
        health.votes,
        { empty: "No recent votes: no node probes this cluster (is it used by a group?).", rowAttrs: (v) => ({ dataset: { vote: v.node_id } }) },
      ),
    );
    replace(
      historyEl,
      health.history.length
        ? h(
            "ol",
            { class: "timeline" },
            health.history.map((e) =>
              h(
                "li",
                { class: "transition" },
                h("span", { class: "at" }, datetime(e.at)),
                h(
                  "div",
                  { class: "what" },
                  h("span", {}, healthBadge(e.from_state), " → ", healthBadge(e.to_state)),
                  h("span", {}, e.reason || ""),
                  h("span", { class: "cause" }, `decided by ${e.decided_by}${e.actor ? ` · ${e.actor}` : ""}`),
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No transitions: the cluster has always been normal."),
    );
  }

  function state(hh) {
    if (hh.state === "NORMAL") return null;
    const kind = hh.state === "MANUAL_ABNORMAL" ? "warn" : "error";
    return notice(kind, `${hh.state}: ${hh.reason || "no reason given"}. Nothing new is started on this cluster; its jobs' alerts fold into the cluster's.`);
  }

  function paintConfig() {
    const c = cluster;
    const limit = (n) => (n ? num(n) : "unlimited");
    replace(
      configEl,
      facts([
        ["Kind", c.kind],
        ["Master", c.master_url ? h("code", {}, c.master_url) : "—"],
        ["REST", c.rest_url ? h("code", {}, c.rest_url) : "—"],
        ["Web UI", c.ui_url ? h("code", {}, c.ui_url) : "—"],
        ["AZ / cloud", `${c.az || "—"} / ${c.cloud || "—"}`],
        ["Storage root", h("code", {}, c.storage_root)],
        ["Concurrent submissions", limit(c.max_concurrent_submissions)],
        ["Running applications", limit(c.max_running_apps)],
        ["Cores", limit(c.max_cores)],
        ["Artifact roots", (c.artifact_roots || []).length ? c.artifact_roots.map((r) => h("code", {}, `${r} `)) : "the node's default"],
        ["Version", String(c.version)],
      ]),
    );
  }

  async function paintJobs() {
    const overview = await api.get("/v1/overview", { cluster: name });
    const counts = overview.jobs.by_state;
    const states = Object.keys(counts).filter((st) => counts[st] > 0);
    const all = overview.jobs.total;
    replace(
      jobsEl,
      h("p", {}, h("a", { href: `#/jobs?cluster=${api.seg(name)}`, dataset: { testid: "cluster-jobs" } }, `${num(all)} job${all === 1 ? "" : "s"}`), " on this cluster (that you may see)."),
      states.length
        ? facts(states.map((st) => [stateBadge(st), h("a", { href: `#/jobs?cluster=${api.seg(name)}&state=${st}` }, num(counts[st]))]))
        : null,
      overview.jobs.not_running_as_desired ? notice("warn", `${num(overview.jobs.not_running_as_desired)} should run but do not.`) : null,
    );
  }

  async function refresh() {
    [cluster, health] = await Promise.all([api.get(base), api.get(`${base}/health`, { history: 20 })]);
    if (!ctx.current()) return;
    await paintHeader();
    paintHealth();
    paintConfig();
    await paintJobs();
  }

  const poller = new Poller(refresh, { interval: 4000, onStatus: (st) => live.update(st) });
  return keepLive(ctx, poller, {
    live,
    errorEl: message,
    missing: notFoundPage(root, name, `No cluster named ${name}.`),
  });
}
