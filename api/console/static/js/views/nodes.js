// Nodes: the live Drover nodes as the answering node sees them (its groups' members), with the
// answering node's own actors and reconcile loops; drain a node before its maintenance (its jobs
// go to the other members of its groups, re-attached, nothing restarts) and undrain it after.

import * as api from "../api.js";
import * as session from "../session.js";
import { h, num, replace, seconds, when } from "../dom.js";
import { button, confirm, errorNotice, liveIndicator, notice, pageHeader, section, table, toast } from "../components.js";
import { Poller } from "../poll.js";

export async function render(root, ctx) {
  const live = liveIndicator();
  const header = h("div", {});
  const nodesEl = h("div", {});
  const loopsEl = h("div", {});
  replace(root, header, section("Live nodes", nodesEl), section("This node's reconcile loops", loopsEl));
  const mayDrain = session.can("platform.admin");
  let busy = false;

  const draining = (n) => {
    const roles = Object.values(n.groups || {});
    return roles.length > 0 && roles.every((r) => r === "draining");
  };

  async function drain(n, undo) {
    const sure = await confirm({
      title: undo ? `Undrain ${n.node_id}?` : `Drain ${n.node_id}?`,
      body: undo
        ? "It registers again with its own role in every group and claims its share of the jobs again (re-attaching to their running applications)."
        : "It stays a live member but leaves every pool: the other members of its groups claim its jobs and re-attach to their running applications (nothing restarts). It lasts until you undrain it or the node restarts.",
      confirmLabel: undo ? "Undrain" : "Drain",
      danger: !undo,
    });
    if (!sure) return;
    busy = true;
    try {
      const state = await api.post(`/v1/nodes/${api.seg(n.node_id)}/${undo ? "undrain" : "drain"}`);
      toast(`${n.node_id} ${undo ? "undrained" : `draining: it owns ${num(state.jobs_owned)} job${state.jobs_owned === 1 ? "" : "s"} now`}`, "ok", 6000);
    } catch (err) {
      toast(`Refused: ${err.message}`, "error", 12000);
    } finally {
      busy = false;
    }
    poller.now();
  }

  async function refresh() {
    const answer = await api.get("/v1/nodes");
    if (!ctx.current()) return;
    replace(
      header,
      pageHeader("Nodes", {
        subtitle:
          answer.mode === "standalone"
            ? `answered by ${answer.this_node} · standalone: no ZooKeeper, this node is the only member of every group`
            : `${num(answer.count)} live · answered by ${answer.this_node} · membership ${answer.mode}, ZooKeeper ${answer.connection}`,
        actions: live,
      }),
      answer.mode === "degraded" ? notice("warn", "ZooKeeper is unreachable and this node runs in degraded mode: it acts on its last view of membership.") : null,
    );
    replace(
      nodesEl,
      table(
        [
          { label: "Node", cell: (n) => h("strong", {}, n.node_id, n.node_id === answer.this_node ? " (this node)" : "") },
          { label: "AZ", cell: (n) => n.az || "—" },
          { label: "Cloud", cell: (n) => n.cloud || "—" },
          {
            label: "Groups",
            class: "wrap",
            cell: (n) =>
              answer.mode === "standalone"
                ? h("span", { class: "muted" }, "every group")
                : Object.entries(n.groups || {}).map(([g, role]) => [h("a", { href: `#/groups/${api.seg(g)}` }, g), h("span", { class: `role-${role}` }, ` ${role}`), "  "]),
          },
          { label: "API", cell: (n) => (n.api_url ? h("code", {}, n.api_url) : "—") },
          { label: "Up since", cell: (n) => when(n.started_at) },
          {
            label: "",
            cell: (n) =>
              mayDrain
                ? draining(n)
                  ? button("Undrain", () => drain(n, true), { kind: "primary", disabled: busy, testid: "node-undrain" })
                  : button("Drain", () => drain(n, false), { kind: "danger", disabled: busy, testid: "node-drain" })
                : null,
          },
        ],
        answer.data,
        { empty: "No live nodes known here.", rowAttrs: (n) => ({ dataset: { node: n.node_id } }) },
      ),
    );
    const actors = answer.actors || {};
    const loops = Object.entries(actors.reconcilers || {});
    const membership = actors.membership || {};
    replace(
      loopsEl,
      table(
        [
          { label: "Group", cell: ([g]) => h("a", { href: `#/groups/${api.seg(g)}` }, g) },
          { label: "Loop", cell: ([, l]) => (l.alive ? h("span", { class: "vote-ok" }, "alive") : h("span", { class: "vote-fail" }, "down")) },
          { label: "Ticks", cell: ([, l]) => num(l.ticks) },
          { label: "Last tick", cell: ([, l]) => (l.last_tick && l.last_tick.at ? when(l.last_tick.at) : "—") },
          { label: "Owned jobs", cell: ([, l]) => num(l.last_tick ? l.last_tick.jobs : null) },
          { label: "Tick time", cell: ([, l]) => seconds(l.last_tick ? l.last_tick.seconds : null) },
          { label: "Paused", cell: ([, l]) => (l.last_tick && l.last_tick.paused ? "yes (no claim)" : "no") },
          { label: "Epoch", cell: ([, l]) => (l.last_tick && l.last_tick.epoch !== undefined && l.last_tick.epoch !== null ? String(l.last_tick.epoch) : "—") },
        ],
        loops,
        { empty: actors.error ? `The node's actors did not answer: ${actors.error}` : "No reconcile loops on this node." },
      ),
      membership.alive === false ? notice("error", "The membership actor of this node does not answer.") : null,
    );
    ctx.ready();
  }

  const poller = new Poller(refresh, { interval: 5000, onStatus: (st) => live.update(st) });
  try {
    await poller.prime();
  } catch (err) {
    replace(nodesEl, errorNotice(err));
    ctx.ready();
  }
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}
