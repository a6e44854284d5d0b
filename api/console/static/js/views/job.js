// One job: state and controls, progress with sparklines, spec, revisions, runs and the events
// timeline, all refreshed live (the state changes show without a reload).

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, h, num, rate, replace, seconds, when } from "../dom.js";
import {
  button,
  confirm,
  desiredBadge,
  errorNotice,
  facts,
  liveIndicator,
  notice,
  pageHeader,
  priorityBadge,
  section,
  sparkline,
  stateBadge,
  table,
  toast,
  unavailable,
} from "../components.js";
import { Poller } from "../poll.js";
import { command } from "../commands.js";

/** the progress history route, as the node names it (the first found) */
const HISTORY_ROUTES = ["/v1/jobs/{name}/progress", "/v1/jobs/{name}/progress/history"];
const REVISION_ROUTES = ["/v1/jobs/{name}/revisions"];

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
  let busy = false;

  replace(
    root,
    header,
    message,
    tiles,
    h("div", { class: "cards" }, section("Progress", progressEl), section("Spec", specEl)),
    section("Runs", runsEl),
    h("div", { class: "cards" }, section("Events", eventsEl), section("Revisions", revisionsEl)),
  );

  const historyRoute = api.first("GET", ...HISTORY_ROUTES);
  const revisionRoute = api.first("GET", ...REVISION_ROUTES);

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
    if (p && typeof p === "object" && Object.keys(p).length) {
      const stalled = job.stalled === true || p.stalled === true;
      if (stalled) parts.push(notice("error", `Stalled: no committed batch for longer than ${job.stall_after ?? "its stall_after"} s.`));
      parts.push(
        facts([
          ["Batch", num(p.batch_id ?? p.last_batch_id)],
          ["Rows in (last batch)", num(p.rows_in ?? p.num_input_rows)],
          ["Input rate", `${rate(p.input_rows_per_second ?? p.input_rate)} rows/s`],
          ["Processing rate", `${rate(p.processed_rows_per_second ?? p.processing_rate)} rows/s`],
          ["Batch duration", seconds(p.batch_duration_s ?? (p.batch_duration_ms !== undefined ? p.batch_duration_ms / 1000 : undefined))],
          ["Reported", p.at ? when(p.at) : "—"],
        ]),
      );
    } else if (job.state === "RUNNING") {
      parts.push(notice("muted", "No progress reports: the pipeline does not report its batches (it does not use drover_runtime), so Drover cannot tell whether it makes progress."));
    } else {
      parts.push(h("p", { class: "muted" }, "Not running."));
    }
    const route = await historyRoute;
    if (!route) {
      if (!("progress" in job)) parts.push(unavailable("Progress history", "progress reports"));
    } else {
      try {
        const history = await api.get(route.replace("{name}", api.seg(name)), { limit: 60 });
        const points = (history.data || history.history || []).slice().sort((a, b) => (a.batch_id ?? 0) - (b.batch_id ?? 0));
        const series = (key, alt) => points.map((x) => x[key] ?? x[alt]);
        parts.push(
          h(
            "div",
            { class: "spark-row", dataset: { testid: "sparklines" } },
            h("figure", {}, h("figcaption", {}, "input rows/s"), sparkline(series("input_rows_per_second", "input_rate"), { label: "input rows/s" })),
            h("figure", {}, h("figcaption", {}, "processed rows/s"), sparkline(series("processed_rows_per_second", "processing_rate"), { label: "processed rows/s" })),
            h("figure", {}, h("figcaption", {}, "batch duration"), sparkline(points.map((x) => x.batch_duration_s ?? (x.batch_duration_ms ?? 0) / 1000), { label: "batch duration", unit: " s" })),
          ),
        );
      } catch (err) {
        parts.push(errorNotice(err));
      }
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
          { label: "Application", cell: (r) => (r.app_id ? h("code", {}, r.app_id) : h("span", { class: "muted" }, "—")) },
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
    const route = await revisionRoute;
    if (!route) {
      replace(revisionsEl, unavailable("Revisions", "revision history"));
      return;
    }
    const page = await api.get(route.replace("{name}", api.seg(name)), { limit: 20 });
    const rows = page.data || [];
    replace(
      revisionsEl,
      table(
        [
          { label: "Revision", cell: (r) => String(r.revision ?? r.spec_version ?? r.id) },
          { label: "Created", cell: (r) => when(r.created_at || r.at) },
          { label: "By", cell: (r) => r.created_by || r.actor || "" },
          { label: "Change", cell: (r) => r.summary || r.reason || r.cause || "", class: "wrap" },
        ],
        rows,
        { empty: "No revisions." },
      ),
    );
  }

  async function refresh() {
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
  try {
    await poller.prime();
  } catch (err) {
    if (err.status === 404) {
      replace(root, pageHeader(name), notice("error", `No job named ${name}.`), h("p", {}, h("a", { href: "#/jobs" }, "Back to the jobs")));
      ctx.ready();
      return null;
    }
    replace(message, errorNotice(err));
  }
  ctx.ready();
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}

/** A run's state as a badge class: live states like the job's, KILLED/LOST as stopped/failed. */
function runClass(state) {
  const map = { SUBMITTING: "submitting", STARTING: "starting", RUNNING: "running", STOPPING: "stopping", FINISHED: "finished", FAILED: "failed", KILLED: "stopped", LOST: "failed" };
  return map[state] || "unknown";
}
