// Groups: each scheduling group with its clusters, its live members and how many jobs it has.

import * as api from "../api.js";
import { h, num, replace } from "../dom.js";
import { liveIndicator, pageHeader, table } from "../components.js";
import { Poller } from "../poll.js";
import { keepLive } from "./live.js";

export async function render(root, ctx) {
  const live = liveIndicator();
  const body = h("div", {});
  const summary = h("span", {});
  replace(root, pageHeader("Groups", { subtitle: summary, actions: live }), body);

  async function refresh() {
    const page = await api.get("/v1/groups", { limit: 1000 });
    const groups = page.data || [];
    const details = await Promise.all(
      groups.map((g) =>
        Promise.all([
          api.get(`/v1/groups/${api.seg(g.name)}`).catch(() => g),
          api
            .get("/v1/jobs", { group: g.name, limit: 1, count: true })
            .then((p) => p.count)
            .catch(() => null),
        ]),
      ),
    );
    if (!ctx.current()) return;
    replace(summary, `${num(groups.length)} group${groups.length === 1 ? "" : "s"}`);
    const rows = details.map(([g, jobs]) => ({ ...g, jobs }));
    replace(
      body,
      table(
        [
          { label: "Name", class: "col-name", cell: (g) => h("a", { href: `#/groups/${api.seg(g.name)}`, dataset: { testid: "group-link" } }, g.name) },
          { label: "Primary cluster", cell: (g) => h("a", { href: `#/clusters/${api.seg(g.primary_cluster)}` }, g.primary_cluster) },
          { label: "Failover cluster", cell: (g) => (g.failover_cluster ? h("a", { href: `#/clusters/${api.seg(g.failover_cluster)}` }, g.failover_cluster) : h("span", { class: "muted" }, "none")) },
          { label: "Jobs", cell: (g) => (g.jobs === null ? "—" : h("a", { href: `#/jobs?group=${api.seg(g.name)}` }, num(g.jobs))) },
          { label: "Live members", cell: (g) => membersCell(g) },
          { label: "Pool (owners)", cell: (g) => (g.pool ? g.pool.join(", ") || "none" : h("span", { class: "muted" }, "not watched by this node")) },
          { label: "Epoch", cell: (g) => (g.epoch === null || g.epoch === undefined ? "—" : String(g.epoch)) },
        ],
        rows,
        { empty: "No groups.", rowAttrs: (g) => ({ dataset: { group: g.name } }) },
      ),
    );
    ctx.ready();
  }

  const poller = new Poller(refresh, { interval: 5000, onStatus: (st) => live.update(st) });
  return keepLive(ctx, poller, { live, errorEl: body });
}

function membersCell(g) {
  if (!g.members) return h("span", { class: "muted" }, "not watched by this node");
  const active = g.members.filter((m) => m.role === "active").length;
  const backup = g.members.length - active;
  return `${active} active, ${backup} backup`;
}
