// One job: state and controls, progress with sparklines, spec, revisions (each one's diff, and
// rollback to it), runs with their driver logs and Spark UI pages, and the events timeline, all
// refreshed live (the state changes show without a reload).

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, h, num, rate, replace, seconds, when } from "../dom.js";
import {
  button,
  changesTable,
  confirm,
  desiredBadge,
  errorNotice,
  facts,
  liveIndicator,
  modal,
  notice,
  pageHeader,
  priorityBadge,
  section,
  sparkline,
  stateBadge,
  table,
  toast,
} from "../components.js";
import { Poller } from "../poll.js";
import { keepLive, notFoundPage } from "./live.js";
import { command } from "../commands.js";

export async function render(root, ctx) {
  const name = ctx.params.name;
  const base = `/v1/jobs/${api.seg(name)}`;
  const live = liveIndicator();
  const header = h("div", {});
  const message = h("div", {});
  const tiles = h("div", { class: "tiles" });
  const progressEl = h("div", {});
  const specEl = h("div", {});
  const revisionsEl = h("div", {});
  const runsEl = h("div", {});
  const eventsEl = h("div", {});
  let job = null;
  let seenVersion = null;
  const clusters = new Map(); // name -> cluster (its ui_url, kind)
  let busy = false;

  replace(
    root,
    header,
    message,
    tiles,
    h("div", { class: "cards" }, section("Progress", progressEl), section("Spec", specEl)),
    section("Runs", runsEl),
    section("Revisions", revisionsEl),
    section("Events", eventsEl),
  );

  function act(verb) {
    return async () => {
      if (verb !== "start") {
        const sure = await confirm({
          title: `${verb === "stop" ? "Stop" : "Restart"} ${name}?`,
          body:
            verb === "stop"
              ? "Drover kills the application and waits until the cluster confirms it is gone."
              : "Drover stops the current run and starts a new one from the job's checkpoint.",
          confirmLabel: verb === "stop" ? "Stop" : "Restart",
          danger: true,
        });
        if (!sure) return;
      }
      busy = true;
      paintHeader();
      try {
        job = await command(name, verb);
        toast(`${name}: ${verb} requested`, "ok");
      } catch (err) {
        toast(`${verb} refused: ${err.message}`, "error", 10000);
      } finally {
        busy = false;
      }
      paintHeader();
      poller.now();
    };
  }

  function paintHeader() {
    if (!job) return;
    const writable = session.can("job.write", job.team);
    const running = job.desired_state === "RUNNING";
    const actions = [
      live,
      writable && !running ? button("Start", act("start"), { kind: "primary", disabled: busy, testid: "job-start" }) : null,
      writable && running ? button("Stop", act("stop"), { kind: "danger", disabled: busy, testid: "job-stop" }) : null,
      writable && running ? button("Restart", act("restart"), { disabled: busy, testid: "job-restart" }) : null,
      h("a", { class: "btn", href: `#/jobs/${api.seg(name)}/log`, dataset: { testid: "job-log" } }, "Driver log"),
      writable ? h("a", { class: "btn", href: `#/jobs/${api.seg(name)}/edit`, dataset: { testid: "job-edit" } }, "Edit") : null,
    ];
    replace(
      header,
      pageHeader(name, {
        badge: stateBadge(job.state, job.state_reason),
        subtitle: [
          "desired ",
          desiredBadge(job.desired_state),
          job.state_reason ? ` · ${job.state_reason}` : "",
        ],
        actions,
      }),
    );
  }

  function paintTiles() {
    const run = job.current_run;
    const tile = (label, value, testid) =>
      h("div", { class: "tile", dataset: testid ? { testid } : undefined }, h("div", { class: "label" }, label), h("div", { class: "value" }, value));
    const fencing = job.self_fencing === true ? "yes" : job.self_fencing === false ? "no fence checks seen" : "—";
    replace(
      tiles,
      tile("State", stateBadge(job.state), "tile-state"),
      tile("Cluster", job.cluster ? h("a", { href: `#/clusters/${api.seg(job.cluster)}` }, job.cluster) : "—"),
      tile("Owner", job.owner || "—"),
      tile("Run", run ? `#${run.id} (attempt ${run.attempt})` : "none"),
      tile("Spark UI", run && run.app_id ? appLink(clusters.get(run.cluster), run.app_id, "application") : clusterUi(clusters.get(job.cluster)), "tile-spark"),
      tile("Self-fencing", fencing),
      tile("Updated", when(job.updated_at)),
    );
  }

  function paintSpec() {
    const labels = job.labels && Object.keys(job.labels).length ? job.labels : null;
    replace(
      specEl,
      facts([
        ["Entrypoint", h("code", {}, job.entrypoint)],
        ["Arguments", job.args.length ? h("code", {}, job.args.join(" ")) : "none"],
        ["Group", h("a", { href: `#/groups/${api.seg(job.group)}` }, job.group)],
        ["Team", job.team],
        ["Business", job.business],
        ["Priority", priorityBadge(job.priority)],
        ["Checkpoint", job.checkpoint_location ? h("code", {}, job.checkpoint_location) : "default (under the cluster's storage root)"],
        labels ? ["Labels", Object.entries(labels).map(([k, v]) => h("code", { class: "label" }, `${k}=${v} `))] : null,
        job.stall_after !== undefined ? ["Stall after", job.stall_after === null ? "default" : `${job.stall_after} s`] : null,
        ["Spec version", String(job.spec_version)],
        ["Created", datetime(job.created_at)],
      ]),
      Object.keys(job.conf).length
        ? table(
            [
              { label: "Spark property", cell: ([k]) => h("code", {}, k) },
              { label: "Value", cell: ([, v]) => h("code", {}, v), class: "wrap" },
            ],
            Object.entries(job.conf),
          )
        : h("p", { class: "muted" }, "No Spark properties set."),
    );
  }

  async function paintProgress() {
    const p = job.progress;
    const parts = [];
    if (p && p.status !== "no-reports") {
      if (p.status === "stalled") {
        parts.push(notice("error", `Stalled${p.stalled_since ? ` since ${datetime(p.stalled_since)}` : ""}: no committed batch for longer than ${job.stall_after ?? "its stall threshold"} s.`));
      }
      parts.push(
        facts([
          ["Status", h("span", { class: ["progress-status", `progress-${p.status}`], dataset: { testid: "progress-status" } }, p.status)],
          ["Batch", h("span", { dataset: { testid: "progress-batch" } }, num(p.batch_id))],
          ["Rows in (last batch)", h("span", { dataset: { testid: "progress-rows" } }, num(p.rows))],
          ["Input rate", `${rate(p.input_rate)} rows/s`],
          ["Processing rate", `${rate(p.processing_rate)} rows/s`],
          ["Batch duration", seconds(p.batch_duration_ms === null || p.batch_duration_ms === undefined ? null : p.batch_duration_ms / 1000)],
          ["Trigger interval", seconds(p.trigger_interval_ms === null || p.trigger_interval_ms === undefined ? null : p.trigger_interval_ms / 1000)],
          ["Reported", h("span", { dataset: { testid: "progress-reported" } }, when(p.reported_at))],
        ]),
      );
    } else if (p) {
      parts.push(notice("muted", "No progress reports: the pipeline does not report its batches (it does not use drover_runtime), so Drover cannot tell whether it makes progress."));
    } else {
      parts.push(h("p", { class: "muted" }, "Not running."));
    }
    try {
      const answer = await api.get(`${base}/progress`, { minutes: 60, limit: 120 });
      const points = answer.history || [];
      if (points.length) {
        const series = (key, scale = 1) => points.map((x) => (x[key] === null || x[key] === undefined ? null : x[key] * scale));
        parts.push(
          h(
            "div",
            { class: "spark-row", dataset: { testid: "sparklines" } },
            h("figure", {}, h("figcaption", {}, "input rows/s"), sparkline(series("input_rate"), { label: "input rows/s" })),
            h("figure", {}, h("figcaption", {}, "processed rows/s"), sparkline(series("processing_rate"), { label: "processed rows/s" })),
            h("figure", {}, h("figcaption", {}, "batch duration"), sparkline(series("batch_duration_ms", 0.001), { label: "batch duration", unit: " s" })),
          ),
        );
      }
    } catch (err) {
      parts.push(errorNotice(err));
    }
    replace(progressEl, parts);
  }

  async function paintRuns() {
    const page = await api.get(`${base}/runs`, { limit: 20, count: true });
    replace(
      runsEl,
      table(
        [
          { label: "Run", cell: (r) => `#${r.id}` },
          { label: "Attempt", cell: (r) => String(r.attempt) },
          { label: "State", cell: (r) => h("span", { class: ["badge", `state-${runClass(r.state)}`] }, r.state) },
          { label: "Cluster", cell: (r) => r.cluster },
          { label: "Node", cell: (r) => r.node },
          { label: "Application", cell: (r) => (r.app_id ? appLink(clusters.get(r.cluster), r.app_id, h("code", {}, r.app_id)) : h("span", { class: "muted" }, "—")) },
          { label: "Log", cell: (r) => (r.submission_id || r.app_id ? h("a", { href: `#/jobs/${api.seg(name)}/log?attempt=${r.attempt}`, dataset: { testid: "run-log" } }, "log") : "") },
          { label: "Started", cell: (r) => when(r.started_at || r.submitted_at || r.created_at) },
          { label: "Ended", cell: (r) => (r.ended_at ? when(r.ended_at) : h("span", { class: "muted" }, "—")) },
          { label: "Reason", cell: (r) => r.reason || "", class: "wrap" },
        ],
        page.data,
        { empty: "No runs yet: the job has never been started.", rowAttrs: (r) => ({ dataset: { run: r.id } }) },
      ),
      page.count > page.data.length ? h("p", { class: "muted" }, `The latest ${page.data.length} of ${num(page.count)} runs.`) : null,
    );
  }

  async function paintEvents() {
    const page = await api.get(`${base}/events`, { limit: 100, count: true });
    const items = page.data.map((e) =>
      h(
        "li",
        { class: e.to_state ? "transition" : "", dataset: { event: e.id } },
        h("span", { class: "at", title: e.at }, datetime(e.at)),
        h(
          "div",
          { class: "what" },
          h("span", {}, e.to_state ? [e.from_state ? stateBadge(e.from_state) : "", e.from_state ? " → " : "", stateBadge(e.to_state)] : "", e.message ? ` ${e.message}` : ""),
          h("span", { class: "cause" }, `${e.cause}${e.node ? ` · node ${e.node}` : ""}${e.run_id ? ` · run #${e.run_id}` : ""}`),
        ),
      ),
    );
    replace(
      eventsEl,
      items.length ? h("ol", { class: "timeline", dataset: { testid: "timeline" } }, items) : h("p", { class: "muted" }, "No events."),
      page.count > page.data.length ? h("p", { class: "muted" }, `The latest ${page.data.length} of ${num(page.count)} events.`) : null,
    );
  }

  async function paintRevisions() {
    const page = await api.get(`${base}/revisions`, { limit: 20 });
    const rows = page.data || [];
    const writable = session.can("job.write", job.team);
    replace(
      revisionsEl,
      table(
        [
          { label: "Revision", cell: (r) => h("strong", {}, String(r.revision), r.revision === job.spec_version ? h("span", { class: "muted" }, " (current)") : null) },
          { label: "Created", cell: (r) => when(r.created_at) },
          { label: "By", cell: (r) => r.cause },
          { label: "Change", cell: (r) => [r.message, r.rollback_of ? h("span", { class: "muted" }, ` (rollback to ${r.rollback_of})`) : null], class: "wrap" },
          {
            label: "",
            cell: (r) => [
              r.revision > 1 ? button("Diff", () => showDiff(r.revision), { kind: "ghost", testid: "revision-diff" }) : null,
              writable && r.revision !== job.spec_version ? button("Roll back", () => rollback(r.revision), { kind: "ghost", testid: "revision-rollback" }) : null,
            ],
          },
        ],
        rows,
        { empty: "No revisions.", rowAttrs: (r) => ({ dataset: { revision: r.revision } }) },
      ),
      page.next_cursor ? h("p", { class: "muted" }, `The latest ${rows.length} revisions.`) : null,
    );
  }

  /** What revision ``n`` changed (against the one before). */
  async function showDiff(n) {
    try {
      const d = await api.get(`${base}/revisions/${n}/diff`);
      await modal({
        title: `${name}: revision ${d.from_revision} → ${d.to_revision}`,
        wide: true,
        testid: "revision-diff",
        cancelLabel: "Close",
        body: [changesTable(d.changes), d.restarts ? notice("muted", "These changes replace a running job's application (an upgrade).") : null],
      });
    } catch (err) {
      toast(err.message, "error", 8000);
    }
  }

  /** Back to revision ``n``'s spec, as a new revision: the changes shown first. */
  async function rollback(n) {
    let rev;
    try {
      rev = await api.get(`${base}/revisions/${n}`, { against: job.spec_version });
    } catch (err) {
      toast(err.message, "error", 8000);
      return;
    }
    const from = job.spec_version;
    const key = api.newIdempotencyKey();
    const done = await modal({
      title: `Roll ${name} back to revision ${n}?`,
      wide: true,
      testid: "rollback",
      body: [
        h("p", {}, `These changes from the current spec (revision ${from}) make revision ${n}'s spec the job's again, as a new revision:`),
        changesTable(rev.changes || []),
        job.state === "RUNNING" ? notice("warn", "If they touch what the application was started with, the running application is stopped gracefully and started again from the same checkpoint.") : null,
      ],
      actions: [
        {
          label: "Roll back",
          kind: "danger",
          testid: "rollback-confirm",
          value: "done",
          disabled: !(rev.changes || []).length,
          busy: "Rolling back…",
          run: async () => {
            job = await api.post(`${base}/rollback`, { revision: n }, { ifMatch: from, idempotencyKey: key });
            return true;
          },
        },
      ],
    });
    if (done) {
      toast(`${name}: rolled back to revision ${n} (now revision ${job.spec_version})`, "ok");
      poller.now();
    }
  }

  async function refresh() {
    if (!clusters.size) {
      const page = await api.get("/v1/clusters", { limit: 1000 });
      for (const c of page.data || []) clusters.set(c.name, c);
    }
    job = await api.get(base);
    if (!ctx.current()) return;
    paintHeader();
    paintTiles();
    const changed = job.version !== seenVersion;
    if (changed) {
      seenVersion = job.version;
      paintSpec();
      await Promise.all([paintRuns(), paintEvents(), paintProgress(), paintRevisions().catch((e) => replace(revisionsEl, errorNotice(e)))]);
    } else if (job.progress) {
      await paintProgress();
    }
  }

  const poller = new Poller(refresh, { interval: 2000, onStatus: (st) => live.update(st) });
  return keepLive(ctx, poller, {
    live,
    errorEl: message,
    missing: notFoundPage(root, name, `No job named ${name}.`, h("p", {}, h("a", { href: "#/jobs" }, "Back to the jobs"))),
  });
}

/** Only http(s) addresses become links (a cluster's ui_url is configuration, not code). */
function webUrl(value) {
  try {
    const u = new URL(value);
    return u.protocol === "http:" || u.protocol === "https:" ? u : null;
  } catch {
    return null;
  }
}

/** The cluster's web UI (the Spark master's, YARN's ResourceManager's) as a link. */
export function clusterUi(cluster) {
  const u = cluster && webUrl(cluster.ui_url);
  if (!u) return h("span", { class: "muted" }, "—");
  return h("a", { href: u.href, target: "_blank", rel: "noopener noreferrer", class: "external" }, `${cluster.name} UI`);
}

/**
 * The application's page in its cluster's web UI: the Spark master's application page
 * (standalone), the ResourceManager's (YARN), else the cluster's UI itself.
 */
export function appLink(cluster, appId, label) {
  const u = cluster && webUrl(cluster.ui_url);
  if (!u) return typeof label === "string" ? h("code", {}, label) : label;
  const root = u.href.replace(/\/+$/, "");
  let href = root;
  if (cluster.kind === "standalone") href = `${root}/app/?appId=${encodeURIComponent(appId)}`;
  else if (cluster.kind === "yarn") href = `${root}/cluster/app/${encodeURIComponent(appId)}`;
  return h("a", { href, target: "_blank", rel: "noopener noreferrer", class: "external", title: `${appId} in ${cluster.name}'s web UI`, dataset: { testid: "app-link" } }, label);
}

/** A run's state as a badge class: live states like the job's, KILLED/LOST as stopped/failed. */
function runClass(state) {
  const map = { SUBMITTING: "submitting", STARTING: "starting", RUNNING: "running", STOPPING: "stopping", FINISHED: "finished", FAILED: "failed", KILLED: "stopped", LOST: "failed" };
  return map[state] || "unknown";
}
