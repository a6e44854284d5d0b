// Clusters: every Spark cluster with its health, zone and how many jobs it carries.

import * as api from "../api.js";
import { h, num, replace, when } from "../dom.js";
import { healthBadge, liveIndicator, pageHeader, table } from "../components.js";
import { Poller } from "../poll.js";
import { keepLive } from "./live.js";

export async function render(root, ctx) {
  const live = liveIndicator();
  const body = h("div", {});
  const summary = h("span", {});
  replace(root, pageHeader("Clusters", { subtitle: summary, actions: live }), body);

  async function refresh() {
    const page = await api.get("/v1/clusters", { limit: 1000 });
    const clusters = page.data || [];
    // jobs per cluster: the count of a one-row page (cheap: an indexed COUNT per cluster)
    const counts = await Promise.all(
      clusters.map((c) =>
        api
          .get("/v1/jobs", { cluster: c.name, limit: 1, count: true })
          .then((p) => p.count)
          .catch(() => null),
      ),
    );
    if (!ctx.current()) return;
    const abnormal = clusters.filter((c) => c.health !== "NORMAL").length;
    replace(summary, `${num(clusters.length)} cluster${clusters.length === 1 ? "" : "s"}`, abnormal ? ` · ${abnormal} abnormal` : " · all normal");
    const rows = clusters.map((c, i) => ({ ...c, jobs: counts[i] }));
    replace(
      body,
      table(
        [
          { label: "Name", class: "col-name", cell: (c) => h("a", { href: `#/clusters/${api.seg(c.name)}`, dataset: { testid: "cluster-link" } }, c.name) },
          { label: "Health", cell: (c) => healthBadge(c.health) },
          { label: "Kind", cell: (c) => c.kind },
          { label: "AZ", cell: (c) => c.az || "—" },
          { label: "Cloud", cell: (c) => c.cloud || "—" },
          { label: "Jobs", cell: (c) => (c.jobs === null ? "—" : h("a", { href: `#/jobs?cluster=${api.seg(c.name)}` }, num(c.jobs))) },
          { label: "Master", cell: (c) => (c.master_url ? h("code", {}, c.master_url) : "—") },
          { label: "Storage root", cell: (c) => h("code", {}, c.storage_root) },
          { label: "Changed", cell: (c) => when(c.updated_at) },
        ],
        rows,
        { empty: "No clusters.", rowAttrs: (c) => ({ dataset: { cluster: c.name, health: c.health } }) },
      ),
    );
    ctx.ready();
  }

  const poller = new Poller(refresh, { interval: 5000, onStatus: (st) => live.update(st) });
  return keepLive(ctx, poller, { live, errorEl: body });
}
