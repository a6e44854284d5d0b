// One bulk operation (start, stop or restart of many jobs): its state, each item's live step and
// what it waits for, and cancel. A failover has its own page (#/failovers/<id>).

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
import { FINAL_STEPS, actionBadge, itemProgress, operationState, stepBadge, stepSummary } from "./failover.js";

export async function render(root, ctx) {
  const id = ctx.params.id;
  const base = `${OPERATIONS}/${api.seg(id)}`;
  const live = liveIndicator();
  const header = h("div", {});
  const itemsEl = h("div", {});
  const factsEl = h("div", {});
  let busy = false;
  let op = null;

  replace(root, header, section("Items, in the order they run", itemsEl), section("Operation", factsEl));

  async function cancel() {
    const ok = await confirm({
      title: `Cancel operation #${id}?`,
      body: "No item starts any more; items already commanded finish. Jobs it already commanded keep their new desired state.",
      confirmLabel: "Cancel operation",
      danger: true,
    });
    if (!ok) return;
    busy = true;
    try {
      await api.post(`${base}/cancel`, undefined, { idempotencyKey: api.newIdempotencyKey() });
      toast(`Operation #${id}: cancel requested`, "ok");
    } catch (err) {
      toast(`Refused: ${err.message}`, "error", 10000);
    } finally {
      busy = false;
    }
    poller.now();
  }

  async function refresh() {
    op = await api.get(base);
    if (!ctx.current()) return;
    if (op.kind === "failover") {
      ctx.navigate(`/failovers/${op.id}`, {}, { replace: true });
      return;
    }
    const mayCancel = !OVER.has(op.state) && !op.cancel_requested && (op.team ? session.can("job.write", op.team) : session.can("failover.write"));
    replace(
      header,
      pageHeader(`Bulk ${op.kind} #${id}`, {
        badge: operationState(op.state),
        subtitle: [itemProgress(op), op.reason ? ` · ${op.reason}` : "", ` · by ${op.created_by}`],
        actions: [live, mayCancel ? button("Cancel", cancel, { kind: "danger", disabled: busy, testid: "operation-cancel" }) : null],
      }),
      op.cancel_requested ? notice("warn", `Cancel requested by ${op.cancel_requested_by || "?"} ${datetime(op.cancel_requested_at)}.`) : null,
    );
    replace(
      itemsEl,
      table(
        [
          { label: "#", cell: (i) => String(i.position + 1) },
          { label: "Job", cell: (i) => h("a", { href: `#/jobs/${api.seg(i.job)}` }, i.job) },
          { label: "Team", cell: (i) => i.team || "" },
          { label: "Priority", cell: (i) => (i.priority ? priorityBadge(i.priority) : "") },
          { label: "Action", cell: (i) => actionBadge(i.action) },
          { label: "Step", cell: (i) => stepBadge(i.step) },
          { label: "Waiting for", cell: (i) => i.waiting || (FINAL_STEPS.has(i.step) ? "" : "—"), class: "wrap" },
          { label: "Updated", cell: (i) => when(i.updated_at) },
          { label: "Why / error", cell: (i) => (i.last_error ? h("span", { class: "vote-fail" }, i.last_error) : i.why), class: "wrap" },
        ],
        op.items || [],
        { empty: "No items.", rowAttrs: (i) => ({ dataset: { item: i.job, step: i.step } }) },
      ),
    );
    replace(
      factsEl,
      facts([
        ["Kind", op.kind],
        ["Selector", h("code", {}, JSON.stringify(op.selector || {}))],
        ["Items", stepSummary(op.counts) || "none"],
        ["Created", [datetime(op.created_at), ` by ${op.created_by}`]],
        ["Executor", op.executor ? `${op.executor} (epoch ${op.executor_epoch})` : "not claimed yet"],
        ["Parallelism", op.parallelism ? num(op.parallelism) : "—"],
        op.grace_seconds !== null && op.grace_seconds !== undefined ? ["Graceful stop", `${op.grace_seconds} s`] : null,
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
      replace(root, pageHeader(`Operation #${id}`), notice("error", `No operation #${id} (or not one you may see).`));
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
