// Job commands: start, stop, restart of one job, and the same for many jobs at once as one bulk
// operation of the node (POST /v1/operations): the plan is shown first (a dry run: each job with
// what will happen and why, in the order it runs), then exactly that plan is executed
// (``expected_plan``) under an Idempotency-Key, so a retry after a lost answer starts nothing
// twice. The operation is persisted and runs item by item through the submission gate; its
// progress is one GET away (#/operations/<id>).

import * as api from "./api.js";
import { h, num, replace } from "./dom.js";
import { modal, notice, priorityBadge, table } from "./components.js";

export const OPERATIONS = "/v1/operations";
/** the states an operation ends in */
export const OVER = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

export async function command(name, verb) {
  return api.post(`/v1/jobs/${api.seg(name)}/${verb}`);
}

const title = (kind) => kind[0].toUpperCase() + kind.slice(1);

/** What a bulk ``kind`` over ``selector`` would do (nothing is stored). */
export function planBulk(kind, selector) {
  return api.post(OPERATIONS, { kind, selector, dry_run: true });
}

/** The plan's items as a table: position, job, team, priority, action and why. */
export function planTable(items) {
  return table(
    [
      { label: "#", cell: (i) => String(i.position + 1) },
      { label: "Job", cell: (i) => i.job },
      { label: "Team", cell: (i) => i.team || "" },
      { label: "Priority", cell: (i) => (i.priority ? priorityBadge(i.priority) : "") },
      { label: "Action", cell: (i) => h("span", { class: ["badge", `step-${i.action === "skip" ? "skipped" : i.action === "refuse" ? "refused" : "active"}`] }, i.action) },
      { label: "Why", cell: (i) => i.why, class: "wrap" },
    ],
    items,
    { empty: "No job matches.", rowAttrs: (i) => ({ dataset: { item: i.job, action: i.action } }) },
  );
}

/**
 * Plan ``kind`` over ``selector``, show the plan, and on confirmation execute exactly that plan.
 * Resolves to the stored operation, or null when cancelled (or nothing to do).
 */
export async function bulkOperation(kind, selector, { what } = {}) {
  let plan = await planBulk(kind, selector);
  const key = api.newIdempotencyKey(); // one per reviewed intent: a retry reuses it
  const reason = h("input", { type: "text", name: "reason", placeholder: "e.g. CHG-1234 (audited)", dataset: { testid: "bulk-reason" } });
  const planEl = h("div", { class: "plan-wrap" });
  const summary = h("p", {});
  const paint = () => {
    const acting = (plan.items || []).filter((i) => !["skip", "refuse"].includes(i.action)).length;
    const counts = {};
    for (const i of plan.items || []) counts[i.action] = (counts[i.action] || 0) + 1;
    replace(
      summary,
      `${num(plan.items.length)} job${plan.items.length === 1 ? "" : "s"}${what ? ` (${what})` : ""}: `,
      Object.entries(counts)
        .map(([a, n]) => `${n} ${a}`)
        .join(", ") || "nothing",
      `. In this order, ${num(plan.parallelism || 1)} at a time; plan `,
      h("code", { dataset: { testid: "plan-digest" } }, plan.plan_digest),
      ".",
    );
    replace(planEl, planTable(plan.items || []));
    return acting;
  };
  const acting = paint();
  let started = null;
  const chosen = await modal({
    title: `${title(kind)} ${num(plan.items.length)} job${plan.items.length === 1 ? "" : "s"}?`,
    wide: true,
    testid: "bulk-plan",
    body: [
      summary,
      acting === 0 ? notice("muted", "Nothing to do: every selected job is already there (or refused).") : null,
      planEl,
      h("label", { class: "field" }, h("span", {}, "Reason"), reason),
    ],
    actions: [
      {
        label: `${title(kind)} as planned`,
        kind: kind === "start" ? "primary" : "danger",
        testid: "bulk-execute",
        value: "execute",
        disabled: acting === 0,
        busy: "Starting the operation…",
        run: async (status) => {
          try {
            started = await api.post(
              OPERATIONS,
              { kind, selector, expected_plan: plan.plan_digest, reason: reason.value.trim() },
              { idempotencyKey: key },
            );
            return true;
          } catch (err) {
            if (err.status === 409 && err.problem.plan_digest) {
              plan = await planBulk(kind, selector);
              paint();
              replace(status, notice("warn", "The plan changed since it was shown (jobs moved on): here is the new one; review it again."));
              return false;
            }
            throw err;
          }
        },
      },
    ],
  });
  return chosen === "execute" ? started : null;
}

/** An operation's progress in words: "stop #12: 2 / 3 done". */
export function operationLine(op) {
  const total = op.total ?? Object.values(op.counts || {}).reduce((a, b) => a + b, 0);
  return `${op.kind} #${op.id}: ${num(op.finished ?? 0)} / ${num(total)} done${OVER.has(op.state) ? ` · ${op.state}` : ""}`;
}
