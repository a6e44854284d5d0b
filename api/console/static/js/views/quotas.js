// Quotas and queues: each business's submission quota (a rate shared by every node, a burst, a
// dedicated group) with its bucket now, the clusters' own caps, and the submission queue: the
// jobs the gate holds back (QUEUED), in the order it serves them, each with why.

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, h, num, replace, when } from "../dom.js";
import { button, confirm, errorNotice, liveIndicator, modal, notice, pageHeader, priorityBadge, section, table, toast } from "../components.js";
import { Poller } from "../poll.js";

export async function render(root, ctx) {
  const live = liveIndicator();
  const quotasEl = h("div", {});
  const queueEl = h("div", {});
  const capsEl = h("div", {});
  const admin = session.can("catalog.write");
  let quotas = [];

  replace(
    root,
    pageHeader("Quotas & queues", {
      subtitle: "How fast each business may submit, and what waits at the submission gate",
      actions: [live, admin ? button("Set a quota…", () => edit(null), { kind: "primary", testid: "quota-new" }) : null],
    }),
    section("Submission queue", queueEl),
    section("Business quotas", quotasEl),
    section("Cluster caps", capsEl),
  );

  async function edit(quota) {
    const business = h("input", { type: "text", name: "business", value: quota ? quota.business : "", disabled: Boolean(quota), dataset: { testid: "quota-business" } });
    const rate = h("input", { type: "number", name: "rate", min: "0.001", step: "any", value: quota && quota.rate !== null ? String(quota.rate) : "", placeholder: "no rate limit", dataset: { testid: "quota-rate" } });
    const burst = h("input", { type: "number", name: "burst", min: 1, step: 1, value: quota ? String(quota.burst) : "10", dataset: { testid: "quota-burst" } });
    const group = h("input", { type: "text", name: "dedicated_group", value: quota && quota.dedicated_group ? quota.dedicated_group : "", placeholder: "none" });
    const errors = h("div", {});
    await modal({
      title: quota ? `Quota of ${quota.business}` : "Set a business's quota",
      testid: "quota-form",
      body: [
        h("label", { class: "field" }, h("span", {}, "Business"), business),
        h("label", { class: "field" }, h("span", {}, "Rate (submissions per second, all nodes)"), rate),
        h("label", { class: "field" }, h("span", {}, "Burst (submissions at once)"), burst),
        h("label", { class: "field" }, h("span", {}, "Dedicated group"), group),
        errors,
      ],
      actions: [
        {
          label: "Save",
          kind: "primary",
          testid: "quota-save",
          submit: true,
          value: "saved",
          run: async () => {
            const name = business.value.trim();
            if (!name) {
              business.focus();
              return false;
            }
            const body = { rate: rate.value === "" ? null : Number(rate.value), burst: Number(burst.value), dedicated_group: group.value.trim() || null };
            try {
              await api.put(`/v1/quotas/${api.seg(name)}`, body, { ifMatch: quota ? quota.version : undefined });
            } catch (err) {
              const byField = err.fieldErrors ? err.fieldErrors() : new Map();
              replace(errors, errorNotice(byField.size ? { message: [...byField].map(([f, m]) => `${f}: ${m.join("; ")}`).join(" · ") } : err));
              return false;
            }
            toast(`Quota of ${name} saved`, "ok");
            return true;
          },
        },
      ],
    });
    poller.now();
  }

  async function remove(quota) {
    const ok = await confirm({ title: `Remove the quota of ${quota.business}?`, body: "Its jobs are then submitted without a rate limit (the clusters' caps still apply).", confirmLabel: "Remove", danger: true });
    if (!ok) return;
    try {
      await api.del(`/v1/quotas/${api.seg(quota.business)}`, { ifMatch: quota.version });
      toast(`Quota of ${quota.business} removed`, "ok");
    } catch (err) {
      toast(`Refused: ${err.message}`, "error", 10000);
    }
    poller.now();
  }

  async function refresh() {
    const [quotaPage, queued, clusters] = await Promise.all([
      api.get("/v1/quotas", { limit: 500, count: true }),
      api.get("/v1/jobs", { state: "QUEUED", limit: 200, count: true }),
      api.get("/v1/clusters", { limit: 1000 }),
    ]);
    if (!ctx.current()) return;
    quotas = quotaPage.data || [];
    const waiting = (queued.data || []).slice().sort((a, b) => (a.queue?.position ?? 1e9) - (b.queue?.position ?? 1e9) || a.name.localeCompare(b.name));
    replace(
      queueEl,
      h("p", { class: "muted" }, queued.count ? `${num(queued.count)} job${queued.count === 1 ? "" : "s"} QUEUED${queued.count > waiting.length ? ` (the first ${waiting.length} shown)` : ""}.` : "Nothing waits: every submission went through."),
      waiting.length
        ? table(
            [
              { label: "Place", cell: (j) => (j.queue ? num(j.queue.position) : "—") },
              { label: "Job", cell: (j) => h("a", { href: `#/jobs/${api.seg(j.name)}` }, j.name) },
              { label: "Business", cell: (j) => j.business || h("span", { class: "muted" }, "—") },
              { label: "Priority", cell: (j) => priorityBadge(j.priority) },
              { label: "Held by", cell: (j) => (j.queue ? (j.queue.kind === "rate" ? "the business's rate" : "a cluster cap") : "—") },
              { label: "Why", cell: (j) => (j.queue ? j.queue.reason : j.state_reason), class: "wrap" },
              { label: "Since", cell: (j) => (j.queue ? when(j.queue.since) : "—") },
              { label: "Cluster", cell: (j) => j.cluster || "—" },
            ],
            waiting,
            { rowAttrs: (j) => ({ dataset: { queued: j.name } }) },
          )
        : null,
    );
    replace(
      quotasEl,
      table(
        [
          { label: "Business", cell: (q) => h("strong", {}, q.business) },
          { label: "Rate", cell: (q) => (q.rate === null ? h("span", { class: "muted" }, "no limit") : `${q.rate}/s`) },
          { label: "Burst", cell: (q) => num(q.burst) },
          { label: "Bucket now", cell: (q) => (q.tokens === null ? "—" : bucket(q)) },
          { label: "Dedicated group", cell: (q) => (q.dedicated_group ? h("a", { href: `#/groups/${api.seg(q.dedicated_group)}` }, q.dedicated_group) : h("span", { class: "muted" }, "none")) },
          { label: "Changed", cell: (q) => h("span", { title: datetime(q.updated_at) }, when(q.updated_at), ` by ${q.updated_by}`) },
          {
            label: "",
            cell: (q) =>
              admin
                ? [button("Edit", () => edit(q), { kind: "ghost", testid: "quota-edit" }), button("Remove", () => remove(q), { kind: "ghost", testid: "quota-remove" })]
                : "",
          },
        ],
        quotas,
        { empty: "No quotas: no business is rate limited (the clusters' caps still apply).", rowAttrs: (q) => ({ dataset: { quota: q.business } }) },
      ),
    );
    const limit = (n) => (n ? num(n) : h("span", { class: "muted" }, "unlimited"));
    replace(
      capsEl,
      table(
        [
          { label: "Cluster", cell: (c) => h("a", { href: `#/clusters/${api.seg(c.name)}` }, c.name) },
          { label: "Submissions in flight", cell: (c) => limit(c.max_concurrent_submissions) },
          { label: "Running applications", cell: (c) => limit(c.max_running_apps) },
          { label: "Cores", cell: (c) => limit(c.max_cores) },
        ],
        clusters.data || [],
        { empty: "No clusters." },
      ),
      admin ? null : notice("muted", "Quotas and caps are changed by platform admins."),
    );
    ctx.ready();
  }

  const poller = new Poller(refresh, { interval: 4000, onStatus: (st) => live.update(st) });
  try {
    await poller.prime();
  } catch (err) {
    replace(quotasEl, errorNotice(err));
    ctx.ready();
  }
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}

/** The bucket as a small gauge: submissions the business may make at once now, of its burst. */
function bucket(q) {
  return h("span", { class: "gauge", title: `${q.tokens} of ${q.burst}` }, h("meter", { min: 0, max: q.burst || 1, value: q.tokens }), ` ${q.tokens.toFixed(1)}`);
}
