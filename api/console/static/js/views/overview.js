// Overview: the fleet at a glance, with charts. Jobs by state over time (sampled here from
// /v1/overview every few seconds while the console is open: the node keeps no history of
// states), runs, restarts and failures per time bucket (/v1/overview/history), the failovers
// (/v1/failovers), and checkpoint replication lag (/v1/replication, sampled the same way).

import * as api from "../api.js";
import * as session from "../session.js";
import { h, keepInUrl, num, replace, seconds, when } from "../dom.js";
import { errorNotice, liveIndicator, pageHeader, section, table } from "../components.js";
import { Poller } from "../poll.js";
import { bars, hbars, legend, stackedArea, timeline } from "../charts.js";
import { operationState, target } from "./failover.js";
import { record } from "../samples.js";

/** the states stacked bottom to top: what runs, what is on its way, what needs a look, what rests */
const STACK = ["RUNNING", "STARTING", "SUBMITTING", "QUEUED", "STOPPING", "UNKNOWN", "FAILED", "FINISHED", "STOPPED"];
const RANGES = [
  ["1h", "last hour", 1, 12],
  ["24h", "last 24 hours", 24, 24],
  ["7d", "last 7 days", 168, 28],
];

export async function render(root, ctx) {
  const live = liveIndicator();
  let range = RANGES.find((r) => r[0] === ctx.query.get("range")) || RANGES[1];
  const tilesEl = h("div", { class: "tiles", dataset: { testid: "overview-tiles" } });
  const statesEl = h("div", {});
  const activityEl = h("div", {});
  const failoversEl = h("div", {});
  const lagEl = h("div", {});
  const rangeSelect = h("select", { "aria-label": "Time range", dataset: { testid: "overview-range" } }, RANGES.map(([key, label]) => h("option", { value: key, selected: key === range[0] }, label)));
  rangeSelect.addEventListener("change", () => {
    range = RANGES.find((r) => r[0] === rangeSelect.value);
    keepInUrl("/overview", { range: range[0] });
    history.now();
  });
  const seesFailovers = session.can("failover.read");

  replace(
    root,
    pageHeader("Overview", { subtitle: "the jobs and clusters you may see", actions: [live] }),
    tilesEl,
    h(
      "div",
      { class: "cards charts" },
      section("Jobs by state", statesEl),
      section("Runs, restarts and failures", h("div", { class: "toolbar" }, rangeSelect), activityEl),
      seesFailovers ? section("Failovers", failoversEl) : null,
      section("Checkpoint replication lag", lagEl),
    ),
  );

  // -- every few seconds: the counts, the replicas ------------------------------------------------
  async function sample() {
    const [o, firing, replicas] = await Promise.all([
      api.get("/v1/overview"),
      api.get("/v1/alerts", { status: "firing", limit: 1, count: true }).catch(() => null),
      api.get("/v1/replication", { limit: 500, count: true }).catch(() => null),
    ]);
    if (!ctx.current()) return;
    const now = Date.now();
    const samples = record("jobs-by-state", o.jobs.by_state, { t: now });
    const tile = (label, value, testid, cls, href) =>
      h("div", { class: ["tile", cls], dataset: { testid } }, h("div", { class: "label" }, label), h("div", { class: "value" }, href ? h("a", { href }, value) : value));
    const lagging = o.jobs.not_running_as_desired;
    replace(
      tilesEl,
      tile("Jobs", num(o.jobs.total), "tile-jobs", "", "#/jobs"),
      tile("Running", num(o.jobs.by_state.RUNNING || 0), "tile-running", "", "#/jobs?state=RUNNING"),
      tile("Should run, do not", num(lagging), "tile-lagging", lagging ? "tile-bad" : "", "#/jobs?desired_state=RUNNING"),
      tile("Failed", num(o.jobs.by_state.FAILED || 0), "tile-failed", o.jobs.by_state.FAILED ? "tile-bad" : "", "#/jobs?state=FAILED"),
      tile("Queued", num(o.jobs.by_state.QUEUED || 0), "tile-queued", "", "#/quotas"),
      tile("Abnormal clusters", o.clusters.abnormal.length ? o.clusters.abnormal.join(", ") : "none", "tile-abnormal", o.clusters.abnormal.length ? "tile-bad" : "", "#/clusters"),
      tile("Open alerts", firing ? num(firing.count) : "—", "tile-alerts", firing && firing.count ? "tile-bad" : "", "#/alerts"),
    );
    const shown = STACK.filter((st) => samples.some((p) => p.values[st]));
    replace(
      statesEl,
      stackedArea(samples, STACK, { label: `Jobs by state over the last ${Math.round((now - samples[0].t) / 60000)} min`, cls: (st) => `fill-${st.toLowerCase()}`, testid: "chart-states" }),
      legend(shown.map((st) => [`fill-${st.toLowerCase()}`, `${st} ${num(o.jobs.by_state[st] || 0)}`])),
      h("p", { class: "muted" }, `${num(samples.length)} samples taken while the console was open (every few seconds).`),
    );
    paintLag(replicas, now);
    ctx.ready();
  }

  function paintLag(page, now) {
    if (!page) {
      replace(lagEl, h("p", { class: "muted" }, "No replication figures."));
      return;
    }
    const rows = page.data || [];
    const max = rows.reduce((a, r) => Math.max(a, r.lag_seconds || 0), 0);
    const lagSamples = record("largest-lag", { max }, { t: now });
    const states = {};
    for (const r of rows) states[r.state] = (states[r.state] || 0) + 1;
    const worst = rows
      .filter((r) => r.lag_seconds > 0)
      .sort((a, b) => b.lag_seconds - a.lag_seconds)
      .slice(0, 8)
      .map((r) => ({ label: r.job, value: r.lag_seconds, cls: r.stale ? "fill-failed" : "fill-accent" }));
    replace(
      lagEl,
      h("p", {}, page.count ? `${num(page.count)} replica${page.count === 1 ? "" : "s"}: ` : "No job replicates its checkpoint. ", Object.entries(states).map(([st, n]) => `${n} ${st}`).join(", "), rows.length < (page.count || 0) ? ` (the first ${rows.length} by name)` : ""),
      worst.length ? hbars(worst, { label: "The largest replication lags", testid: "chart-lag", fmt: (v) => seconds(v), unit: "" }) : h("p", { class: "muted" }, "No replica lags behind its source."),
      lagSamples.length > 1 ? [h("p", { class: "muted" }, "Largest lag over time (s)"), stackedArea(lagSamples, ["max"], { label: "The largest replication lag over time", cls: () => "fill-accent", testid: "chart-lag-time" })] : null,
    );
  }

  // -- every minute: the activity per bucket, the failovers ---------------------------------------
  async function loadHistory() {
    const [, , hours, buckets] = range;
    const [hist, failovers] = await Promise.all([
      api.get("/v1/overview/history", { hours, buckets }),
      seesFailovers ? api.get("/v1/failovers", { limit: 50 }).catch(() => null) : null,
    ]);
    if (!ctx.current()) return;
    const series = [
      ["runs_started", "fill-starting", "runs started"],
      ["restarts", "fill-queued", "restarts"],
      ["failures", "fill-failed", "failed runs"],
    ];
    const data = hist.buckets.map((b) => ({ start: Date.parse(b.start), end: Date.parse(b.end), values: b }));
    const total = (k) => hist.buckets.reduce((a, b) => a + (b[k] || 0), 0);
    replace(
      activityEl,
      bars(data, series, { label: `Runs started, restarts and failed runs per ${seconds(hist.bucket_seconds)}, ${range[1]}`, testid: "chart-activity" }),
      legend(series.map(([k, cls, label]) => [cls, `${label} ${num(total(k))}`])),
      h("p", { class: "muted" }, "A restart is a run after a job's first (a restart command, a restart after a failure, a failover's move); failed runs count against the restart budget."),
    );
    if (seesFailovers) paintFailovers(failovers, hist);
  }

  function paintFailovers(page, hist) {
    const rows = page ? page.data || [] : [];
    const from = Date.parse(hist.since);
    const to = Date.parse(hist.until);
    const inRange = rows.filter((f) => Date.parse(f.created_at) >= from);
    const cls = (state) => ({ SUCCEEDED: "fill-running", FAILED: "fill-failed", CANCELLED: "fill-stopped" })[state] || "fill-starting";
    replace(
      failoversEl,
      timeline(
        inRange.map((f) => ({ t: Date.parse(f.created_at), cls: cls(f.state), title: `#${f.id} ${f.source} → ${target(f)}: ${f.state}` })),
        { from, to, label: `${inRange.length} failover${inRange.length === 1 ? "" : "s"}, ${range[1]}`, testid: "chart-failovers" },
      ),
      h("p", { class: "muted" }, `${num(hist.buckets.reduce((a, b) => a + (b.failovers || 0), 0))} begun ${range[1]}: green succeeded, red failed, grey cancelled, blue under way.`),
      table(
        [
          { label: "Failover", cell: (f) => h("a", { href: `#/failovers/${f.id}` }, `#${f.id}`) },
          { label: "State", cell: (f) => operationState(f.state) },
          { label: "From → to", cell: (f) => `${f.source} → ${target(f)}` },
          { label: "Jobs", cell: (f) => num(f.total) },
          { label: "Created", cell: (f) => when(f.created_at) },
        ],
        rows.slice(0, 5),
        { empty: "No failovers yet." },
      ),
    );
  }

  const poller = new Poller(sample, { interval: 5000, onStatus: (st) => live.update(st) });
  const history = new Poller(loadHistory, { interval: 60000 });
  try {
    await Promise.all([poller.prime(), history.prime().catch((err) => replace(activityEl, errorNotice(err)))]);
  } catch (err) {
    replace(tilesEl, errorNotice(err));
    ctx.ready();
  }
  poller.start();
  history.start();
  return () => {
    poller.stop();
    history.stop();
    live.dispose();
  };
}
