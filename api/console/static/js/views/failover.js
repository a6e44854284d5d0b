// One failover: its state, each item's live progress (its step, what it waits for, where its
// checkpoint went and the batch it resumes from), and cancel: the operation page
// (operation.js) with a failover's own columns and facts.

import * as api from "../api.js";
import * as session from "../session.js";
import { h, num, when } from "../dom.js";
import { itemProgress, renderOperation } from "./operation.js";

export { actionBadge, itemProgress, operationState } from "./operation.js";

export const ROUTE = "/v1/failovers";

export function target(op) {
  return op.target || "each group's other cluster";
}

const FAILOVER = {
  name: "failover",
  route: ROUTE,
  cancelTestid: "failover-cancel",
  cancelBody: "No item starts any more; an item under way finishes its current step, and a job not yet switched stays where it is.",
  title: (op) => `Failover #${op.id}`,
  subtitle: (op) => [`${op.source} → ${target(op)} · `, itemProgress(op), op.reason ? ` · ${op.reason}` : ""],
  mayCancel: () => session.can("failover.write"),
  columns: [
    { label: "To", cell: (i) => i.target_cluster || "—" },
    { label: "Resumes from", cell: (i) => (i.resume_batch !== null && i.resume_batch !== undefined ? `batch ${num(i.resume_batch)}` : i.step === "DONE" ? "afresh" : "—") },
    { label: "Attempts", cell: (i) => num(i.attempts) },
    { label: "Last step", cell: (i) => (i.history && i.history.length ? when(i.history[i.history.length - 1].at) : "—") },
  ],
  facts: (op) => [
    ["Source", h("a", { href: `#/clusters/${api.seg(op.source)}` }, op.source)],
    ["Target", op.target ? h("a", { href: `#/clusters/${api.seg(op.target)}` }, op.target) : target(op)],
    ["Source reachable at planning", op.source_reachable === null || op.source_reachable === undefined ? "—" : op.source_reachable ? "yes" : "no"],
    op.incident ? ["Automatic, incident", op.incident] : null,
  ],
};

export function render(root, ctx) {
  return renderOperation(root, ctx, FAILOVER);
}
