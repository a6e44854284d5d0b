// Failovers: plan one (the dry run shows exactly the items an execution runs, in that order,
// each with its action and why), execute that plan, and the failovers with their progress.

import * as api from "../api.js";
import * as session from "../session.js";
import { h, num, replace, when } from "../dom.js";
import {
  button,
  confirm,
  errorNotice,
  liveIndicator,
  notice,
  pageHeader,
  priorityBadge,
  section,
  table,
  toast,
} from "../components.js";
import { Poller } from "../poll.js";
import { ROUTE, actionBadge, itemProgress, operationState, target } from "./failover.js";

export async function render(root, ctx) {
  const live = liveIndicator();
  const planEl = h("div", {});
  const listEl = h("div", {});
  const mayRun = session.can("failover.write");
  replace(
    root,
    pageHeader("Failovers", {
      subtitle: "Move a cluster's jobs with their checkpoints to another cluster, never running one twice.",
      actions: live,
    }),
    mayRun
      ? section("Plan a failover", planForm(ctx, planEl))
      : notice("muted", "Planning and running failovers needs the operator role on every team (a platform operator)."),
    planEl,
    section("Failovers, newest first", listEl),
  );

  async function refresh() {
    const page = await api.get(ROUTE, { limit: 50 });
    if (!ctx.current()) return;
    replace(
      listEl,
      table(
        [
          { label: "Failover", cell: (f) => h("a", { href: `#/failovers/${f.id}`, dataset: { testid: "failover-link" } }, `#${f.id}`) },
          { label: "State", cell: (f) => operationState(f.state) },
          { label: "From → to", cell: (f) => `${f.source} → ${target(f)}` },
          { label: "Progress", cell: (f) => itemProgress(f) },
          { label: "Reason", cell: (f) => f.reason || (f.incident ? `automatic (${f.incident})` : ""), class: "wrap" },
          { label: "By", cell: (f) => f.created_by },
          { label: "Created", cell: (f) => when(f.created_at) },
        ],
        page.data || [],
        { empty: "No failovers yet.", rowAttrs: (f) => ({ dataset: { failover: f.id, state: f.state } }) },
      ),
      page.next_cursor ? h("p", { class: "muted" }, `The latest ${page.data.length} failovers.`) : null,
    );
    ctx.ready();
  }

  const poller = new Poller(refresh, { interval: 3000, onStatus: (st) => live.update(st) });
  try {
    await poller.prime();
  } catch (err) {
    replace(listEl, errorNotice(err));
    ctx.ready();
  }
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}

/** The form: source, target, selector, reason, force -> dry run -> the plan -> execute it. */
function planForm(ctx, planEl) {
  const wanted = ctx.query.get("source") || "";
  const source = h("select", { name: "source", required: true, dataset: { testid: "failover-source" } }, h("option", { value: "" }, "choose a cluster…"));
  const targetSel = h("select", { name: "target", dataset: { testid: "failover-target" } }, h("option", { value: "" }, "each group's other cluster"));
  const prio = ["high", "normal", "low"].map((p) => h("input", { type: "checkbox", name: "priorities", value: p }));
  const teams = h("input", { type: "text", name: "teams", placeholder: "comma separated; empty: any" });
  const groups = h("input", { type: "text", name: "groups", placeholder: "comma separated; empty: any" });
  const jobs = h("input", { type: "text", name: "jobs", placeholder: "comma separated; empty: any" });
  const reason = h("input", { type: "text", name: "reason", placeholder: "e.g. AZ a network outage" });
  const force = h("input", { type: "checkbox", name: "force" });
  const acknowledgement = h("textarea", {
    name: "acknowledgement",
    rows: 2,
    placeholder: "What you know that makes it safe, e.g. 'the machines of AZ a are powered off'",
    disabled: true,
  });
  force.addEventListener("change", () => {
    acknowledgement.disabled = !force.checked;
  });
  const planButton = button("Plan (dry run)", null, { kind: "primary", type: "submit", testid: "failover-plan" });

  api
    .get("/v1/clusters", { limit: 1000 })
    .then((page) => {
      for (const c of page.data || []) {
        const label = `${c.name}${c.az ? ` (${c.az})` : ""}${c.health !== "NORMAL" ? ` — ${c.health}` : ""}`;
        source.appendChild(h("option", { value: c.name, selected: c.name === wanted }, label));
        targetSel.appendChild(h("option", { value: c.name }, label));
      }
    })
    .catch((err) => replace(planEl, errorNotice(err)));

  const list = (input) =>
    input.value
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean);

  function request(dryRun) {
    const selector = {};
    const priorities = prio.filter((p) => p.checked).map((p) => p.value);
    if (priorities.length) selector.priorities = priorities;
    if (list(teams).length) selector.teams = list(teams);
    if (list(groups).length) selector.groups = list(groups);
    if (list(jobs).length) selector.jobs = list(jobs);
    if (Object.keys(selector).length === 0) selector.all = true;
    const body = { source: source.value, selector, dry_run: dryRun };
    if (targetSel.value) body.target = targetSel.value;
    if (reason.value.trim()) body.reason = reason.value.trim();
    if (force.checked) body.force = { jobs: ["*"], acknowledgement: acknowledgement.value.trim() };
    return body;
  }

  const form = h(
    "form",
    { class: "failover-form", "aria-label": "Plan a failover" },
    h(
      "div",
      { class: "form-grid" },
      h("label", { class: "field" }, h("span", {}, "Source cluster"), source),
      h("label", { class: "field" }, h("span", {}, "Target cluster"), targetSel),
      h("label", { class: "field" }, h("span", {}, "Reason"), reason),
      h("label", { class: "field" }, h("span", {}, "Teams"), teams),
      h("label", { class: "field" }, h("span", {}, "Groups"), groups),
      h("label", { class: "field" }, h("span", {}, "Jobs"), jobs),
    ),
    h("div", { class: "field" }, h("span", {}, "Priorities (none ticked: every priority)"), h("div", { class: "checks" }, prio.map((p) => h("label", {}, p, p.value)))),
    h(
      "div",
      { class: "field" },
      h("label", { class: "checks" }, force, "Force: fail over jobs whose pipeline does not fence itself although the source cannot be reached (their drivers may still run there)"),
      acknowledgement,
    ),
    h("div", { class: "form-actions" }, planButton),
  );

  async function dryRun() {
    planButton.disabled = true;
    replace(planEl, h("p", { class: "muted" }, "Planning…"));
    try {
      showPlan(await api.post(ROUTE, request(true)));
    } catch (err) {
      replace(planEl, errorNotice(err));
    } finally {
      planButton.disabled = false;
    }
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!source.value) {
      source.focus();
      return;
    }
    if (force.checked && !acknowledgement.value.trim()) {
      acknowledgement.focus();
      return;
    }
    dryRun();
  });

  function showPlan(plan) {
    const items = plan.items || [];
    const moving = items.filter((i) => ["kill", "fence", "move"].includes(i.action)).length;
    const execute = button(
      `Execute this plan (${moving} job${moving === 1 ? "" : "s"} move)`,
      async () => {
        const ok = await confirm({
          title: `Fail over ${moving} job${moving === 1 ? "" : "s"} from ${plan.source}?`,
          body: "Each job is stopped on the source (or fenced when the source cannot be reached), its checkpoint made available on the target, and started there from it, in the order shown. The execution is refused if the plan changed since this dry run.",
          confirmLabel: "Execute",
          danger: true,
        });
        if (!ok) return;
        execute.disabled = true;
        try {
          const started = await api.post(ROUTE, { ...request(false), expected_plan: plan.plan_digest });
          toast(`Failover #${started.id} started`, "ok");
          ctx.navigate(`/failovers/${started.id}`);
        } catch (err) {
          execute.disabled = false;
          if (err.status === 409) {
            toast("The plan changed since this dry run: here is the new one; review it again.", "error", 10000);
            dryRun();
          } else {
            toast(`Refused: ${err.message}`, "error", 10000);
          }
        }
      },
      { kind: "danger", disabled: moving === 0 || !session.can("failover.write"), testid: "failover-execute" },
    );
    const counts = Object.entries(plan.counts || {})
      .map(([action, n]) => `${n} ${action}`)
      .join(", ");
    replace(
      planEl,
      section(
        `Dry run: ${plan.source} → ${target(plan)}, ${num(items.length)} item${items.length === 1 ? "" : "s"}${counts ? ` (${counts})` : ""}`,
        plan.source_reachable === false ? notice("warn", `${plan.source} does not answer now: its jobs can only be fenced (self-fencing pipelines) or forced.`) : null,
        items.length === 0 ? notice("muted", "No job on the source matches the selector.") : null,
        table(
          [
            { label: "#", cell: (i) => String(i.position + 1) },
            { label: "Job", cell: (i) => h("a", { href: `#/jobs/${api.seg(i.job)}` }, i.job) },
            { label: "Group", cell: (i) => i.group },
            { label: "Priority", cell: (i) => (i.priority ? priorityBadge(i.priority) : "") },
            { label: "Action", cell: (i) => actionBadge(i.action) },
            { label: "To", cell: (i) => i.target_cluster || "—" },
            { label: "Why", cell: (i) => i.why, class: "wrap" },
          ],
          items,
          { rowAttrs: (i) => ({ dataset: { item: i.job, action: i.action } }) },
        ),
        h("div", { class: "form-actions", dataset: { testid: "plan", digest: plan.plan_digest } }, execute),
      ),
    );
  }

  return form;
}
