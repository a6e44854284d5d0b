// Alerts: what fires now (open), what was folded into a cluster's alert while that cluster was
// abnormal, what resolved, each with its deliveries; and the channels alerts go to (the
// platform's, and each of the caller's teams'). A channel's address is shown as the API gives
// it: the API masks the parts of it that are credentials, and never shows a signing secret.

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, h, keepInUrl, num, replace, when } from "../dom.js";
import { button, errorNotice, liveIndicator, notice, pageHeader, section, table, toast } from "../components.js";
import { Poller } from "../poll.js";

const VIEWS = [
  ["firing", "Open"],
  ["resolved", "Resolved"],
  ["", "All"],
];
const KINDS = ["job_failed", "job_given_up", "job_stalled", "cluster_abnormal", "test"];

export async function render(root, ctx) {
  let status = ctx.query.has("status") ? ctx.query.get("status").replace("all", "") : "firing";
  let kind = ctx.query.get("kind") || "";
  let cursors = [null];
  let page = null;
  const live = liveIndicator();
  const tabsEl = h("div", { class: "tabs", role: "tablist" });
  const listEl = h("div", {});
  const pagerEl = h("div", { class: "pager" });
  const channelsEl = h("div", {});
  const kindSelect = h(
    "select",
    { name: "kind", "aria-label": "Alert kind", dataset: { testid: "alert-kind" } },
    h("option", { value: "" }, "Kind: any"),
    KINDS.map((k) => h("option", { value: k, selected: k === kind }, k)),
  );
  kindSelect.addEventListener("change", () => {
    kind = kindSelect.value;
    cursors = [null];
    poller.now();
  });

  replace(
    root,
    pageHeader("Alerts", { subtitle: "Job and cluster alerts and where they are sent", actions: live }),
    h("div", { class: "toolbar" }, tabsEl, kindSelect),
    listEl,
    pagerEl,
    section("Channels", channelsEl),
  );

  function paintTabs() {
    replace(
      tabsEl,
      VIEWS.map(([value, label]) =>
        h(
          "button",
          {
            type: "button",
            role: "tab",
            class: ["tab", value === status && "active"],
            "aria-selected": value === status ? "true" : "false",
            dataset: { testid: `alerts-${label.toLowerCase()}` },
            onclick: () => {
              status = value;
              cursors = [null];
              paintTabs();
              poller.now();
            },
          },
          label,
        ),
      ),
    );
  }
  paintTabs();

  async function load() {
    const q = { limit: 50, count: true };
    if (status) q.status = status;
    if (kind) q.kind = kind;
    const cursor = cursors[cursors.length - 1];
    if (cursor) q.cursor = cursor;
    page = await api.get("/v1/alerts", q);
    if (!ctx.current()) return;
    keepInUrl("/alerts", { status: status || "all", kind });
    paintList();
    ctx.ready();
  }

  function paintList() {
    const rows = page.data || [];
    replace(
      listEl,
      h("p", { class: "muted" }, page.count === null || page.count === undefined ? "" : `${num(page.count)} alert${page.count === 1 ? "" : "s"}`),
      table(
        [
          { label: "Severity", cell: (a) => h("span", { class: ["badge", `sev-${a.severity}`] }, a.severity) },
          { label: "Status", cell: (a) => h("span", { class: ["badge", a.status === "firing" ? "state-failed" : "state-stopped"] }, a.status) },
          { label: "Kind", cell: (a) => h("code", {}, a.kind) },
          { label: "Subject", cell: subject },
          { label: "Summary", cell: (a) => [a.summary, a.resolution ? h("div", { class: "muted" }, a.resolution) : null], class: "wrap" },
          { label: "Folded", cell: folded },
          { label: "Started", cell: (a) => h("span", { title: datetime(a.started_at) }, when(a.started_at)) },
          { label: "Resolved", cell: (a) => (a.resolved_at ? when(a.resolved_at) : h("span", { class: "muted" }, "—")) },
          { label: "Deliveries", cell: deliveries, class: "wrap" },
        ],
        rows,
        { empty: status === "firing" ? "Nothing fires now." : "No alerts.", rowAttrs: (a) => ({ dataset: { alert: a.id, kind: a.kind, status: a.status, folded: a.folded_into ? "into" : a.folded ? "folds" : "" } }) },
      ),
    );
    replace(
      pagerEl,
      button("‹ Newer", () => {
        cursors.pop();
        poller.now();
      }, { disabled: cursors.length <= 1 }),
      button("Older ›", () => {
        cursors.push(page.next_cursor);
        poller.now();
      }, { disabled: !page.next_cursor }),
    );
  }

  async function loadChannels() {
    const me = session.whoami();
    const teams = Object.keys(me.roles || {}).filter((t) => t !== "*");
    const parts = [];
    const rows = [];
    if (session.can("platform.admin")) {
      try {
        rows.push(...(await api.get("/v1/alert-channels")));
      } catch (err) {
        parts.push(errorNotice(err));
      }
    } else {
      for (const team of teams) {
        try {
          rows.push(...(await api.get(`/v1/teams/${api.seg(team)}/alert-channels`)));
        } catch (err) {
          parts.push(errorNotice(err));
        }
      }
    }
    const mayTest = (c) => (c.team === "*" ? session.can("platform.admin") : session.can("team.admin", c.team));
    const test = async (c) => {
      const path = c.team === "*" ? `/v1/alert-channels/${api.seg(c.name)}/test` : `/v1/teams/${api.seg(c.team)}/alert-channels/${api.seg(c.name)}/test`;
      try {
        await api.post(path);
        toast(`A test message to ${c.name} is queued: its delivery shows under Resolved, kind test`, "ok", 8000);
      } catch (err) {
        toast(`Refused: ${err.message}`, "error", 10000);
      }
    };
    parts.push(
      table(
        [
          { label: "Channel", cell: (c) => h("strong", {}, c.name) },
          { label: "Team", cell: (c) => (c.team === "*" ? "platform (every team)" : c.team) },
          { label: "Kind", cell: (c) => c.kind },
          { label: "Address", cell: (c) => h("code", { class: "clip", dataset: { testid: "channel-url" } }, c.url), class: "wrap" },
          { label: "Alerts", cell: (c) => `${(c.kinds || []).length ? c.kinds.join(", ") : "all kinds"}, ${c.min_severity} and up` },
          { label: "Signed", cell: (c) => (c.signed ? "yes" : "no") },
          { label: "Enabled", cell: (c) => (c.enabled ? "yes" : h("span", { class: "muted" }, "no")) },
          { label: "", cell: (c) => (mayTest(c) ? button("Send test", () => test(c), { kind: "ghost", testid: "channel-test" }) : "") },
        ],
        rows,
        { empty: "No channels: alerts are only shown here and in /metrics.", rowAttrs: (c) => ({ dataset: { channel: c.name } }) },
      ),
    );
    if (!session.can("platform.admin") && !teams.length) parts.unshift(notice("muted", "You belong to no team: no team channels to show."));
    replace(channelsEl, parts);
  }

  const poller = new Poller(load, { interval: 5000, onStatus: (st) => live.update(st) });
  try {
    await Promise.all([poller.prime(), loadChannels()]);
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

function subject(a) {
  if (a.kind === "cluster_abnormal") return h("a", { href: `#/clusters/${api.seg(a.subject)}` }, a.subject);
  if (a.kind.startsWith("job_")) return h("a", { href: `#/jobs/${api.seg(a.subject)}` }, a.subject);
  return a.subject;
}

function folded(a) {
  if (a.folded_into) return h("span", { class: "muted", title: "not sent on its own while its cluster's alert fired" }, `into #${a.folded_into}`);
  if (a.folded) return h("span", { title: "job alerts folded into this cluster alert" }, `${num(a.folded)} job alert${a.folded === 1 ? "" : "s"}`);
  return h("span", { class: "muted" }, "—");
}

function deliveries(a) {
  const list = a.deliveries || [];
  if (!list.length) return h("span", { class: "muted" }, a.folded_into ? "folded: not sent" : "none");
  return list.map((d) =>
    h(
      "div",
      { class: d.delivered_at ? "vote-ok" : d.failed_at ? "vote-fail" : "muted", title: d.last_error || "" },
      `${d.channel} (${d.event}): `,
      d.delivered_at ? `sent ${datetime(d.delivered_at)}` : d.failed_at ? `gave up after ${d.attempts} attempts` : `pending, attempt ${d.attempts}`,
    ),
  );
}
