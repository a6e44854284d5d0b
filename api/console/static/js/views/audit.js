// The audit log: who changed what and when, newest first, with the target before and after the
// change; filtered by actor, action, target and time (kept in the URL), a page at a time (the
// API's cursors: a page stays the same page while new entries arrive).

import * as api from "../api.js";
import { datetime, h, keepInUrl, num, replace, when } from "../dom.js";
import { button, changesTable, errorNotice, modal, pageHeader, table } from "../components.js";

const FILTERS = ["actor", "action", "target_kind", "target_name", "since", "until"];
const PAGE_SIZES = [25, 50, 100];

export async function render(root, ctx) {
  const filters = {};
  for (const key of FILTERS) filters[key] = ctx.query.get(key) || "";
  let limit = Number(ctx.query.get("limit")) || 50;
  if (!PAGE_SIZES.includes(limit)) limit = 50;
  let cursors = [null]; // the cursor of each page shown so far
  let page = null;

  const countEl = h("span", {});
  const tableEl = h("div", {});
  const pagerEl = h("div", { class: "pager" });
  const messageEl = h("div", {});

  const input = (key, label, attrs = {}) => {
    const el = h("input", { type: "text", name: key, placeholder: label, "aria-label": label, value: filters[key], size: 14, dataset: { testid: `audit-${key}` }, ...attrs });
    const apply = () => {
      if (filters[key] === el.value.trim()) return;
      filters[key] = el.value.trim();
      cursors = [null];
      refresh();
    };
    el.addEventListener("change", apply);
    el.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") apply();
    });
    return el;
  };
  // times: the browser's local time in the picker, sent as UTC
  const instant = (key, label) => {
    const el = h("input", { type: "datetime-local", name: key, "aria-label": label, title: label, value: localValue(filters[key]) });
    el.addEventListener("change", () => {
      filters[key] = el.value ? new Date(el.value).toISOString() : "";
      cursors = [null];
      refresh();
    });
    return el;
  };
  const kinds = h(
    "select",
    { name: "target_kind", "aria-label": "Target kind", dataset: { testid: "audit-target_kind" } },
    h("option", { value: "" }, "Target: any"),
    ["job", "cluster", "group", "team", "token", "quota", "operation", "alert_channel", "node"].map((k) => h("option", { value: k, selected: filters.target_kind === k }, k)),
  );
  kinds.addEventListener("change", () => {
    filters.target_kind = kinds.value;
    cursors = [null];
    refresh();
  });
  const sizeSelect = h("select", { name: "limit", "aria-label": "Entries per page" }, PAGE_SIZES.map((n) => h("option", { value: n, selected: n === limit }, `${n} / page`)));
  sizeSelect.addEventListener("change", () => {
    limit = Number(sizeSelect.value);
    cursors = [null];
    refresh();
  });
  const fields = [input("actor", "Actor (user:alice)"), input("action", "Action (job.update)"), kinds, input("target_name", "Target name"), instant("since", "Since"), instant("until", "Until")];
  const clear = button("Clear filters", () => {
    for (const key of FILTERS) filters[key] = "";
    for (const el of fields) el.value = "";
    cursors = [null];
    refresh();
  }, { kind: "ghost" });

  replace(
    root,
    pageHeader("Audit log", { subtitle: countEl }),
    h("div", { class: "toolbar" }, fields, h("span", { class: "muted" }, "since / until"), sizeSelect, clear),
    messageEl,
    tableEl,
    pagerEl,
  );


  async function load() {
    const q = { limit };
    for (const key of FILTERS) if (filters[key]) q[key] = filters[key];
    const cursor = cursors[cursors.length - 1];
    if (cursor) q.cursor = cursor;
    page = await api.get("/v1/audit", q);
    if (!ctx.current()) return;
    paint();
    keepInUrl("/audit", { ...filters, limit: limit !== 50 ? limit : "" });
  }

  async function refresh() {
    try {
      await load();
      replace(messageEl);
    } catch (err) {
      replace(messageEl, errorNotice(err));
    }
    ctx.ready();
  }

  function paint() {
    const rows = page.data || [];
    const first = (cursors.length - 1) * limit;
    replace(countEl, rows.length ? `entries ${num(first + 1)}–${num(first + rows.length)}, newest first` : "no entries");
    replace(
      tableEl,
      table(
        [
          { label: "When", cell: (e) => h("span", { title: datetime(e.at) }, when(e.at)) },
          { label: "Actor", cell: (e) => e.actor },
          { label: "Action", cell: (e) => h("code", {}, e.action) },
          { label: "Target", cell: (e) => target(e) },
          { label: "Team", cell: (e) => e.team || h("span", { class: "muted" }, "—") },
          { label: "Node", cell: (e) => e.node || h("span", { class: "muted" }, "—") },
          { label: "Detail", cell: (e) => (Object.keys(e.detail || {}).length ? h("code", { class: "clip" }, JSON.stringify(e.detail)) : ""), class: "wrap" },
          { label: "", cell: (e) => (e.before || e.after ? button("Before / after", () => showChange(e), { kind: "ghost", testid: "audit-change" }) : "") },
        ],
        rows,
        { empty: Object.values(filters).some(Boolean) ? "No entry matches these filters." : "No entries.", rowAttrs: (e) => ({ dataset: { audit: e.id, action: e.action } }) },
      ),
    );
    const prev = button("‹ Newer", () => {
      cursors.pop();
      refresh();
    }, { disabled: cursors.length <= 1, testid: "prev" });
    const next = button("Older ›", () => {
      cursors.push(page.next_cursor);
      refresh();
    }, { disabled: !page.next_cursor, testid: "next" });
    replace(pagerEl, prev, next);
  }

  await refresh();
  return null;
}

function target(e) {
  const name = e.target_name;
  const links = { job: `#/jobs/${api.seg(name)}`, cluster: `#/clusters/${api.seg(name)}`, group: `#/groups/${api.seg(name)}`, operation: `#/operations/${api.seg(name)}`, failover: `#/failovers/${api.seg(name)}` };
  return [h("span", { class: "muted" }, `${e.target_kind} `), links[e.target_kind] ? h("a", { href: links[e.target_kind] }, name) : name];
}

/** The entry's target before and after, as field changes. */
function showChange(e) {
  const before = e.before || {};
  const after = e.after || {};
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const changes = [];
  for (const k of keys) {
    const b = before[k];
    const a = after[k];
    if (JSON.stringify(b) === JSON.stringify(a)) continue;
    changes.push({ path: k, kind: b === undefined ? "added" : a === undefined ? "removed" : "changed", before: b ?? null, after: a ?? null });
  }
  return modal({
    title: `${e.action} on ${e.target_kind} ${e.target_name}`,
    wide: true,
    cancelLabel: "Close",
    body: [h("p", { class: "muted" }, `${datetime(e.at)} by ${e.actor}`), changesTable(changes, { empty: e.before ? "Nothing changed." : "Created." })],
  });
}

/** An ISO time as a datetime-local input's value (the browser's local time). */
function localValue(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
