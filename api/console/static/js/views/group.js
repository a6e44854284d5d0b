// One group: its clusters (with their health), its live members with role, AZ and how many of
// the group's jobs each owns, the ownership pool and the membership epoch.

import * as api from "../api.js";
import { datetime, h, num, replace, when } from "../dom.js";
import { facts, healthBadge, liveIndicator, notice, pageHeader, section, table } from "../components.js";
import { Poller } from "../poll.js";
import { keepLive, notFoundPage } from "./live.js";

export async function render(root, ctx) {
  const name = ctx.params.name;
  const live = liveIndicator();
  const header = h("div", {});
  const message = h("div", {});
  const factsEl = h("div", {});
  const membersEl = h("div", {});

  replace(root, header, message, section("Members", membersEl), section("Group", factsEl));

  async function refresh() {
    const group = await api.get(`/v1/groups/${api.seg(name)}`);
    const clusterNames = [group.primary_cluster, group.failover_cluster].filter(Boolean);
    const [jobs, ...clusters] = await Promise.all([
      api.get("/v1/jobs", { group: name, limit: 1, count: true }).catch(() => null),
      ...clusterNames.map((c) => api.get(`/v1/clusters/${api.seg(c)}`).catch(() => null)),
    ]);
    if (!ctx.current()) return;
    const health = Object.fromEntries(clusterNames.map((c, i) => [c, clusters[i] ? clusters[i].health : null]));
    const total = jobs ? jobs.count : null;
    const members = group.members || [];
    const owned = members.reduce((sum, m) => sum + (m.jobs || 0), 0);
    replace(
      header,
      pageHeader(name, {
        subtitle: [
          `${members.length} live member${members.length === 1 ? "" : "s"} · `,
          total === null ? "" : h("a", { href: `#/jobs?group=${api.seg(name)}` }, `${num(total)} job${total === 1 ? "" : "s"}`),
        ],
        actions: live,
      }),
    );
    const clusterCell = (c) =>
      c ? [h("a", { href: `#/clusters/${api.seg(c)}` }, c), " ", health[c] ? healthBadge(health[c]) : null] : h("span", { class: "muted" }, "none");
    replace(
      factsEl,
      facts([
        ["Primary cluster", clusterCell(group.primary_cluster)],
        ["Failover cluster", clusterCell(group.failover_cluster)],
        ["Pool (ownership order)", group.pool ? group.pool.join(", ") || "empty: no live member" : "—"],
        ["Epoch", group.epoch === null || group.epoch === undefined ? "—" : `${group.epoch} (generation ${group.epoch_generation})`],
        ["Jobs", total === null ? "—" : num(total)],
        ["Version", String(group.version)],
        ["Created", datetime(group.created_at)],
      ]),
    );
    if (group.members === null || group.members === undefined) {
      replace(membersEl, notice("muted", "This node is not a member of the group, so it does not watch its membership. Open the console on one of the group's nodes to see its members."));
    } else {
      const unowned = total === null ? null : Math.max(0, total - owned);
      replace(
        membersEl,
        table(
          [
            { label: "Node", cell: (m) => h("strong", {}, m.node_id) },
            { label: "Role", cell: (m) => h("span", { class: `role-${m.role}` }, m.role) },
            { label: "In pool", cell: (m) => (group.pool && group.pool.includes(m.node_id) ? "yes" : "no (standby)") },
            { label: "AZ", cell: (m) => m.az || "—" },
            { label: "Cloud", cell: (m) => m.cloud || "—" },
            { label: "Jobs owned", cell: (m) => (m.jobs === null || m.jobs === undefined ? "—" : num(m.jobs)) },
            { label: "API", cell: (m) => (m.api_url ? h("code", {}, m.api_url) : "—") },
            { label: "Up since", cell: (m) => (m.started_at ? when(m.started_at) : "—") },
          ],
          members,
          { empty: "No live member: nobody manages this group's jobs now.", rowAttrs: (m) => ({ dataset: { member: m.node_id, role: m.role } }) },
        ),
        unowned ? h("p", { class: "muted" }, `${num(unowned)} job${unowned === 1 ? "" : "s"} not (yet) owned by a live member.`) : null,
      );
    }
    ctx.ready();
  }

  const poller = new Poller(refresh, { interval: 4000, onStatus: (st) => live.update(st) });
  return keepLive(ctx, poller, {
    live,
    errorEl: message,
    missing: notFoundPage(root, name, `No group named ${name}.`),
  });
}
