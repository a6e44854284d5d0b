// One failover: its state, each item's live progress (its step, what it waits for, where its
// checkpoint went and the batch it resumes from), and cancel.

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, h, num, replace, when } from "../dom.js";
import {
  button,
  confirm,
  errorNotice,
  facts,
  liveIndicator,
  notice,
  pageHeader,
  priorityBadge,
  section,
  table,
  toast,
} from "../components.js";
import { Poller } from "../poll.js";

export const ROUTE = "/v1/failovers";
/** the steps that end an item */
export const FINAL_STEPS = new Set(["DONE", "SKIPPED", "REFUSED", "CANCELLED", "FAILED"]);
const STEP_CLASS = {
  DONE: "done",
  SKIPPED: "skipped",
  REFUSED: "refused",
  CANCELLED: "cancelled",
  FAILED: "failed",
  PENDING: "pending",
};
const STATE_CLASS = { SUCCEEDED: "done", FAILED: "failed", CANCELLED: "cancelled", PENDING: "pending", RUNNING: "active" };

export function stepBadge(step) {
  const name = (step || "PENDING").toUpperCase();
  return h("span", { class: ["badge", `step-${STEP_CLASS[name] || "active"}`], dataset: { step: name } }, name);
}

export function actionBadge(action) {
  const cls = { skip: "skipped", refuse: "refused" }[action] || "active";
  return h("span", { class: ["badge", `step-${cls}`], dataset: { action } }, action || "?");
}

export function operationState(state) {
  const name = (state || "").toUpperCase();
  return h("span", { class: ["badge", `step-${STATE_CLASS[name] || "active"}`], dataset: { state: name } }, name || "?");
}

/** Items finished / all, as a bar and numbers, from the failover's per-step counts. */
export function itemProgress(op) {
  const counts = op.counts || {};
  const total = Object.values(counts).reduce((a, b) => a + b, 0) || (op.items || []).length;
  const done = Object.entries(counts)
    .filter(([step]) => FINAL_STEPS.has(step))
    .reduce((a, [, n]) => a + n, 0);
  return h("span", { class: "op-progress", title: stepSummary(counts) }, h("progress", { max: total || 1, value: done }), ` ${num(done)} / ${num(total)} done`);
}

export function stepSummary(counts) {
  return Object.entries(counts || {})
    .map(([step, n]) => `${n} ${step}`)
    .join(", ");
}

export function target(op) {
  return op.target || "each group's other cluster";
}

export async function render(root, ctx) {
  const id = ctx.params.id;
  const base = `${ROUTE}/${api.seg(id)}`;
  const live = liveIndicator();
  const header = h("div", {});
  const factsEl = h("div", {});
  const itemsEl = h("div", {});
  let busy = false;

  replace(root, header, section("Items, in the order they run", itemsEl), section("Failover", factsEl));

  async function cancel() {
    const ok = await confirm({
      title: `Cancel failover #${id}?`,
      body: "No item starts any more; an item under way finishes its current step, and a job not yet switched stays where it is.",
      confirmLabel: "Cancel failover",
      danger: true,
    });
    if (!ok) return;
    busy = true;
    try {
      await api.post(`${base}/cancel`);
      toast(`Failover #${id}: cancel requested`, "ok");
    } catch (err) {
      toast(`Refused: ${err.message}`, "error", 10000);
    } finally {
      busy = false;
    }
    poller.now();
  }

  async function refresh() {
    const op = await api.get(base);
    if (!ctx.current()) return;
    const over = ["SUCCEEDED", "FAILED", "CANCELLED"].includes(op.state);
    const mayCancel = !over && !op.cancel_requested_at && session.can("failover.write");
    replace(
      header,
      pageHeader(`Failover #${id}`, {
        badge: operationState(op.state),
        subtitle: [`${op.source} → ${target(op)} · `, itemProgress(op), op.reason ? ` · ${op.reason}` : ""],
        actions: [live, mayCancel ? button("Cancel", cancel, { kind: "danger", disabled: busy, testid: "failover-cancel" }) : null],
      }),
      op.cancel_requested_at ? notice("warn", `Cancel requested by ${op.cancel_requested_by || "?"} ${datetime(op.cancel_requested_at)}: items stop at their next step.`) : null,
    );
    replace(
      itemsEl,
      table(
        [
          { label: "#", cell: (i) => String(i.position + 1) },
          { label: "Job", cell: (i) => h("a", { href: `#/jobs/${api.seg(i.job)}` }, i.job) },
          { label: "Priority", cell: (i) => (i.priority ? priorityBadge(i.priority) : "") },
          { label: "Action", cell: (i) => actionBadge(i.action) },
          { label: "Step", cell: (i) => stepBadge(i.step) },
          { label: "Waiting for", cell: (i) => i.waiting || (FINAL_STEPS.has(i.step) ? "" : "—"), class: "wrap" },
          { label: "To", cell: (i) => i.target_cluster || "—" },
          { label: "Resumes from", cell: (i) => (i.resume_batch !== null && i.resume_batch !== undefined ? `batch ${num(i.resume_batch)}` : i.step === "DONE" ? "afresh" : "—") },
          { label: "Attempts", cell: (i) => num(i.attempts) },
          { label: "Last step", cell: (i) => (i.history && i.history.length ? when(i.history[i.history.length - 1].at) : "—") },
          { label: "Why / error", cell: (i) => (i.last_error ? h("span", { class: "vote-fail" }, i.last_error) : i.why), class: "wrap" },
        ],
        op.items || [],
        { empty: "No items.", rowAttrs: (i) => ({ dataset: { item: i.job, step: i.step } }) },
      ),
    );
    replace(
      factsEl,
      facts([
        ["Source", h("a", { href: `#/clusters/${api.seg(op.source)}` }, op.source)],
        ["Target", op.target ? h("a", { href: `#/clusters/${api.seg(op.target)}` }, op.target) : target(op)],
        ["Selector", h("code", {}, JSON.stringify(op.selector || {}))],
        ["Source reachable at planning", op.source_reachable === null ? "—" : op.source_reachable ? "yes" : "no"],
        ["Items", stepSummary(op.counts) || "none"],
        ["Created", [datetime(op.created_at), ` by ${op.created_by}`]],
        op.incident ? ["Automatic, incident", op.incident] : null,
        ["Executor", op.executor ? `${op.executor} (epoch ${op.executor_epoch})` : "not claimed yet"],
        ["Parallelism", op.parallelism ? String(op.parallelism) : "—"],
        op.started_at ? ["Started", datetime(op.started_at)] : null,
        op.finished_at ? ["Finished", datetime(op.finished_at)] : null,
        ["Plan digest", h("code", {}, op.plan_digest)],
      ]),
    );
    ctx.ready();
  }

  const poller = new Poller(refresh, { interval: 2000, onStatus: (st) => live.update(st) });
  try {
    await poller.prime();
  } catch (err) {
    if (err.status === 404 || err.status === 422) {
      replace(root, pageHeader(`Failover #${id}`), notice("error", `No failover #${id}.`));
      ctx.ready();
      return null;
    }
    replace(itemsEl, errorNotice(err));
    ctx.ready();
  }
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}
