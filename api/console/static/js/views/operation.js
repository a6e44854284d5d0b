// One operation over many jobs, live: its state, each item's step and what it waits for, and
// cancel. A bulk start, stop or restart (#/operations/<id>) and a failover (#/failovers/<id>,
// failover.js: its items also say where each job's checkpoint went) share this page.

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
import { OPERATIONS, OVER } from "../commands.js";

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

/** Items finished / all, as a bar and numbers, from the operation's per-step counts. */
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

/** The columns every operation's items have, around the kind's own (``extra``). */
function itemColumns(extra) {
  return [
    { label: "#", cell: (i) => String(i.position + 1) },
    { label: "Job", cell: (i) => h("a", { href: `#/jobs/${api.seg(i.job)}` }, i.job) },
    { label: "Priority", cell: (i) => (i.priority ? priorityBadge(i.priority) : "") },
    { label: "Action", cell: (i) => actionBadge(i.action) },
    { label: "Step", cell: (i) => stepBadge(i.step) },
    { label: "Waiting for", cell: (i) => i.waiting || (FINAL_STEPS.has(i.step) ? "" : "—"), class: "wrap" },
    ...extra,
    { label: "Why / error", cell: (i) => (i.last_error ? h("span", { class: "vote-fail" }, i.last_error) : i.why), class: "wrap" },
  ];
}

/**
 * The page of one operation. ``kind``: how it is named and read: {route (its API), title(op),
 * subtitle(op), columns (its items' own), facts(op) (its own), mayCancel(op), cancelBody}.
 */
export async function renderOperation(root, ctx, kind) {
  const id = ctx.params.id;
  const base = `${kind.route}/${api.seg(id)}`;
  const live = liveIndicator();
  const header = h("div", {});
  const itemsEl = h("div", {});
  const factsEl = h("div", {});
  let busy = false;

  replace(root, header, section("Items, in the order they run", itemsEl), section("Operation", factsEl));

  async function cancel() {
    const ok = await confirm({ title: `Cancel ${kind.name} #${id}?`, body: kind.cancelBody, confirmLabel: `Cancel ${kind.name}`, danger: true });
    if (!ok) return;
    busy = true;
    try {
      await api.post(`${base}/cancel`, undefined, { idempotencyKey: api.newIdempotencyKey() });
      toast(`${kind.name} #${id}: cancel requested`, "ok");
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
    if (kind.elsewhere && kind.elsewhere(op)) {
      ctx.navigate(kind.elsewhere(op), {}, { replace: true });
      return;
    }
    const mayCancel = !OVER.has(op.state) && !op.cancel_requested_at && kind.mayCancel(op);
    replace(
      header,
      pageHeader(kind.title(op), {
        badge: operationState(op.state),
        subtitle: kind.subtitle(op),
        actions: [live, mayCancel ? button("Cancel", cancel, { kind: "danger", disabled: busy, testid: kind.cancelTestid }) : null],
      }),
      op.cancel_requested_at ? notice("warn", `Cancel requested by ${op.cancel_requested_by || "?"} ${datetime(op.cancel_requested_at)}: items stop at their next step.`) : null,
    );
    replace(
      itemsEl,
      table(itemColumns(kind.columns), op.items || [], { empty: "No items.", rowAttrs: (i) => ({ dataset: { item: i.job, step: i.step } }) }),
    );
    replace(
      factsEl,
      facts([
        ...kind.facts(op),
        ["Selector", h("code", {}, JSON.stringify(op.selector || {}))],
        ["Items", stepSummary(op.counts) || "none"],
        ["Created", [datetime(op.created_at), ` by ${op.created_by}`]],
        ["Executor", op.executor ? `${op.executor} (epoch ${op.executor_epoch})` : "not claimed yet"],
        ["Parallelism", op.parallelism ? num(op.parallelism) : "—"],
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
      replace(root, pageHeader(`${kind.name} #${id}`), notice("error", `No ${kind.name} #${id} (or not one you may see).`));
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

/** A bulk start, stop or restart. */
const BULK = {
  name: "operation",
  route: OPERATIONS,
  cancelTestid: "operation-cancel",
  cancelBody: "No item starts any more; items already commanded finish. Jobs it already commanded keep their new desired state.",
  elsewhere: (op) => (op.kind === "failover" ? `/failovers/${op.id}` : null),
  title: (op) => `Bulk ${op.kind} #${op.id}`,
  subtitle: (op) => [itemProgress(op), op.reason ? ` · ${op.reason}` : "", ` · by ${op.created_by}`],
  mayCancel: (op) => (op.team ? session.can("job.write", op.team) : session.can("failover.write")),
  columns: [
    { label: "Team", cell: (i) => i.team || "" },
    { label: "Updated", cell: (i) => when(i.updated_at) },
  ],
  facts: (op) => [
    ["Kind", op.kind],
    op.grace_seconds !== null && op.grace_seconds !== undefined ? ["Graceful stop", `${op.grace_seconds} s`] : null,
  ],
};

export function render(root, ctx) {
  return renderOperation(root, ctx, BULK);
}
