// Jobs: the table an operator starts from. Filters and search (kept in the URL), state colours,
// progress, paging (cursor when the node's API pages by cursor, else offset), bulk select with
// start / stop / restart, and live refresh.

import * as api from "../api.js";
import * as session from "../session.js";
import { debounce, h, num, rate, replace, when } from "../dom.js";
import {
  button,
  confirm,
  desiredBadge,
  errorNotice,
  liveIndicator,
  pageHeader,
  priorityBadge,
  stateBadge,
  table,
  toast,
} from "../components.js";
import { Poller } from "../poll.js";
import { runCommands } from "../commands.js";

const STATES = ["STOPPED", "QUEUED", "SUBMITTING", "STARTING", "RUNNING", "STOPPING", "FINISHED", "FAILED", "UNKNOWN"];
const PAGE_SIZES = [25, 50, 100, 200];
const FILTERS = ["q", "state", "desired_state", "team", "group", "cluster", "priority"];
/** the strip's order: what runs, what is on its way, what needs a look, what rests */
const STRIP_ORDER = ["RUNNING", "STARTING", "SUBMITTING", "QUEUED", "STOPPING", "UNKNOWN", "FAILED", "FINISHED", "STOPPED"];
/** the list's query parameter each optional filter is sent as, first one the node takes */
const OPTIONAL = { q: ["q", "name_prefix"], priority: ["priority"] };

/** Which optional filters this node's GET /v1/jobs takes: filter -> parameter (or null). */
async function optionalFilters() {
  const out = {};
  for (const [filter, candidates] of Object.entries(OPTIONAL)) {
    out[filter] = null;
    for (const name of candidates) {
      if (await api.accepts("GET", "/v1/jobs", name)) {
        out[filter] = name;
        break;
      }
    }
  }
  return out;
}

/** Progress as the table shows it: last batch and input rate, or why there is none. */
export function progressCell(job) {
  const p = job.progress;
  if (p && typeof p === "object" && Object.keys(p).length > 0) {
    const batch = p.batch_id ?? p.last_batch_id;
    const inRate = p.input_rows_per_second ?? p.input_rate;
    const stalled = job.stalled === true || p.stalled === true;
    return h(
      "span",
      { class: ["progress", stalled && "stalled"], title: p.at ? `reported ${p.at}` : "" },
      stalled ? h("span", { class: "badge state-stalled" }, "STALLED") : null,
      batch !== undefined && batch !== null ? ` batch ${num(batch)}` : "",
      inRate !== undefined && inRate !== null ? ` · ${rate(inRate)} rows/s` : "",
    );
  }
  if (job.state === "RUNNING") return h("span", { class: "muted" }, "no progress reports");
  return h("span", { class: "muted" }, "—");
}

export async function render(root, ctx) {
  const filters = {};
  for (const key of FILTERS) filters[key] = ctx.query.get(key) || "";
  let limit = Number(ctx.query.get("limit")) || 50;
  if (!PAGE_SIZES.includes(limit)) limit = 50;
  let offset = Math.max(0, Number(ctx.query.get("offset")) || 0);
  // cursor paging: the cursor of each page shown so far (index 0: the first page, no cursor)
  let cursors = [null];
  let cursorMode = false;
  let nextCursor = null;
  const selected = new Map(); // name -> team (kept across refreshes and pages)
  let page = null;
  let busy = false;
  const canWriteSomewhere = session.can("job.write");
  const params = await optionalFilters();

  const live = liveIndicator();
  const countEl = h("span", { class: "count" }, "");
  const tableEl = h("div", { class: "jobs-table" });
  const pagerEl = h("div", { class: "pager" });
  const bulkEl = h("div", { class: "bulk", hidden: true, dataset: { testid: "bulk-bar" } });
  const messageEl = h("div", {});
  const stripEl = h("div", { class: "strip", dataset: { testid: "state-strip" } });

  // -- filters --------------------------------------------------------------------------------
  const search = h("input", {
    type: "search",
    name: "q",
    placeholder: "Search job names…",
    value: filters.q,
    "aria-label": "Search job names",
    dataset: { testid: "search" },
  });
  const onSearch = debounce(() => {
    filters.q = search.value.trim();
    resetPaging();
    refresh();
  }, 250);
  search.addEventListener("input", onSearch);
  search.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault();
      filters.q = search.value.trim();
      resetPaging();
      refresh();
    }
  });

  const select = (name, label, options) => {
    const el = h(
      "select",
      { name, "aria-label": label, dataset: { testid: `filter-${name}` } },
      h("option", { value: "" }, `${label}: any`),
      options.map((o) => h("option", { value: o, selected: filters[name] === o }, o)),
    );
    el.addEventListener("change", () => {
      filters[name] = el.value;
      resetPaging();
      refresh();
    });
    return el;
  };
  const groupSelect = select("group", "Group", filters.group ? [filters.group] : []);
  const clusterSelect = select("cluster", "Cluster", filters.cluster ? [filters.cluster] : []);
  const teamInput = h("input", {
    type: "text",
    name: "team",
    placeholder: "Team",
    value: filters.team,
    list: "team-list",
    "aria-label": "Team",
    size: 10,
  });
  const teamList = h("datalist", { id: "team-list" });
  teamInput.addEventListener(
    "change",
    () => {
      filters.team = teamInput.value.trim();
      resetPaging();
      refresh();
    },
  );
  const sizeSelect = h(
    "select",
    { name: "limit", "aria-label": "Rows per page" },
    PAGE_SIZES.map((n) => h("option", { value: n, selected: n === limit }, `${n} / page`)),
  );
  sizeSelect.addEventListener("change", () => {
    limit = Number(sizeSelect.value);
    resetPaging();
    refresh();
  });
  const clearFilters = button("Clear filters", () => {
    for (const key of FILTERS) filters[key] = "";
    search.value = "";
    teamInput.value = "";
    for (const el of [stateSelect, desiredSelect, groupSelect, clusterSelect, prioritySelect]) el.value = "";
    resetPaging();
    refresh();
  }, { kind: "ghost" });
  const stateSelect = select("state", "State", STATES);
  const desiredSelect = select("desired_state", "Desired", ["RUNNING", "STOPPED"]);
  const prioritySelect = select("priority", "Priority", ["high", "normal", "low"]);
  // filters this node's API does not take are not offered
  search.hidden = !params.q;
  if (params.q === "name_prefix") search.placeholder = "Job names beginning with…";
  prioritySelect.hidden = !params.priority;

  const toolbar = h(
    "div",
    { class: "toolbar" },
    search,
    stateSelect,
    desiredSelect,
    groupSelect,
    clusterSelect,
    teamInput,
    teamList,
    prioritySelect,
    sizeSelect,
    clearFilters,
  );

  replace(
    root,
    pageHeader("Jobs", { subtitle: countEl, actions: live }),
    stripEl,
    toolbar,
    bulkEl,
    messageEl,
    tableEl,
    pagerEl,
  );

  // the filter menus' choices: loaded beside the first page, never in its way
  fillChoices(groupSelect, "/v1/groups", filters.group);
  fillChoices(clusterSelect, "/v1/clusters", filters.cluster);
  api
    .get("/v1/teams")
    .then((teams) => replace(teamList, (teams.data || []).map((t) => h("option", { value: t.name }))))
    .catch(() => {});

  function resetPaging() {
    offset = 0;
    cursors = [null];
    nextCursor = null;
  }

  function query() {
    const q = { limit, count: true };
    for (const key of FILTERS) {
      if (!filters[key]) continue;
      if (key in params) {
        if (params[key]) q[params[key]] = filters[key];
      } else {
        q[key] = filters[key];
      }
    }
    if (cursorMode) {
      const cursor = cursors[cursors.length - 1];
      if (cursor) q.cursor = cursor;
    } else if (offset) {
      q.offset = offset;
    }
    return q;
  }

  function keepInUrl() {
    const q = {};
    for (const key of FILTERS) if (filters[key]) q[key] = filters[key];
    if (limit !== 50) q.limit = limit;
    if (!cursorMode && offset) q.offset = offset;
    const encoded = new URLSearchParams(q).toString();
    window.history.replaceState(null, "", `#/jobs${encoded ? `?${encoded}` : ""}`);
  }

  async function load() {
    const q = query();
    // the strip counts every state under the other filters (the state filter picks a chip)
    const around = {};
    for (const key of ["team", "group", "cluster", "q"]) if (filters[key]) around[key] = filters[key];
    const [answer, overview] = await Promise.all([
      api.get("/v1/jobs", q),
      api.get("/v1/overview", around).catch(() => null),
    ]);
    if (!ctx.current()) return;
    page = answer;
    cursorMode = "next_cursor" in answer;
    nextCursor = answer.next_cursor || null;
    paintStrip(overview);
    paint();
    keepInUrl();
    ctx.ready();
  }

  async function refresh() {
    try {
      await load();
      replace(messageEl);
    } catch (err) {
      replace(messageEl, errorNotice(err));
      if (err.status === 422 || err.status === 400) ctx.ready();
    }
  }

  function paint() {
    const rows = page.data || [];
    const first = cursorMode ? (cursors.length - 1) * limit : offset;
    replace(countEl, page.count === undefined ? `${rows.length} shown` : `${num(page.count)} job${page.count === 1 ? "" : "s"}${anyFilter() ? " match" : ""}`);
    const writableRows = rows.filter((j) => session.can("job.write", j.team));
    const allBox = h("input", {
      type: "checkbox",
      "aria-label": "Select every job on this page",
      dataset: { testid: "select-page" },
      disabled: writableRows.length === 0,
    });
    const paintAllBox = () => {
      const picked = writableRows.filter((j) => selected.has(j.name)).length;
      allBox.checked = picked > 0 && picked === writableRows.length;
      allBox.indeterminate = picked > 0 && picked < writableRows.length;
    };
    paintAllBox();
    allBox.addEventListener("change", () => {
      for (const j of writableRows) {
        if (allBox.checked) selected.set(j.name, j.team);
        else selected.delete(j.name);
      }
      paint();
    });
    const columns = [
      {
        label: allBox,
        class: "col-check",
        cell: (j) => {
          const writable = session.can("job.write", j.team);
          const box = h("input", {
            type: "checkbox",
            "aria-label": `Select ${j.name}`,
            checked: selected.has(j.name),
            disabled: !writable,
            title: writable ? "" : "You may not act on this team's jobs",
          });
          box.addEventListener("change", () => {
            if (box.checked) selected.set(j.name, j.team);
            else selected.delete(j.name);
            paintBulk();
            paintAllBox();
            box.closest("tr").classList.toggle("selected", box.checked);
          });
          return box;
        },
      },
      { label: "Name", class: "col-name", cell: (j) => h("a", { href: `#/jobs/${api.seg(j.name)}`, dataset: { testid: "job-link" } }, j.name) },
      { label: "State", cell: (j) => stateBadge(j.state, j.state_reason) },
      { label: "Desired", cell: (j) => desiredBadge(j.desired_state) },
      { label: "Progress", cell: progressCell },
      { label: "Priority", cell: (j) => priorityBadge(j.priority) },
      { label: "Team", cell: (j) => j.team || h("span", { class: "muted" }, "—") },
      { label: "Group", cell: (j) => h("a", { href: `#/groups/${api.seg(j.group)}` }, j.group) },
      { label: "Cluster", cell: (j) => (j.cluster ? h("a", { href: `#/clusters/${api.seg(j.cluster)}` }, j.cluster) : h("span", { class: "muted" }, "—")) },
      { label: "Owner", cell: (j) => j.owner || h("span", { class: "muted" }, "—") },
      { label: "Updated", cell: (j) => when(j.updated_at) },
    ];
    replace(
      tableEl,
      table(columns, rows, {
        empty: anyFilter() ? "No job matches these filters." : "No jobs yet.",
        rowAttrs: (j) => ({ dataset: { job: j.name, state: j.state }, class: selected.has(j.name) ? "selected" : "" }),
      }),
    );
    const hasPrev = cursorMode ? cursors.length > 1 : offset > 0;
    const hasNext = cursorMode ? Boolean(nextCursor) : page.count !== undefined && offset + rows.length < page.count;
    const prev = button("‹ Previous", () => {
      if (cursorMode) cursors.pop();
      else offset = Math.max(0, offset - limit);
      refresh();
    }, { disabled: !hasPrev, testid: "prev" });
    const next = button("Next ›", () => {
      if (cursorMode) cursors.push(nextCursor);
      else offset += limit;
      refresh();
    }, { disabled: !hasNext, testid: "next" });
    const range = rows.length ? `${num(first + 1)}–${num(first + rows.length)}` : "0";
    replace(pagerEl, h("span", {}, `${range}${page.count !== undefined ? ` of ${num(page.count)}` : ""}`), prev, next);
    paintBulk();
  }

  /** One chip per state that has jobs (RUNNING and FAILED always): a click filters by it. */
  function paintStrip(overview) {
    if (!overview) {
      replace(stripEl);
      return;
    }
    const counts = overview.jobs.by_state;
    const chip = (state) => {
      const active = filters.state === state;
      return h(
        "button",
        {
          type: "button",
          class: ["chip", `state-${state.toLowerCase()}`, active && "active"],
          "aria-pressed": active ? "true" : "false",
          title: active ? "Show every state" : `Show only ${state} jobs`,
          dataset: { chip: state },
          onclick: () => {
            filters.state = active ? "" : state;
            stateSelect.value = filters.state;
            resetPaging();
            refresh();
          },
        },
        h("span", { class: "chip-count" }, num(counts[state] || 0)),
        h("span", { class: "chip-label" }, state),
      );
    };
    const shown = STRIP_ORDER.filter((st) => counts[st] > 0 || st === "RUNNING" || st === "FAILED");
    const lagging = overview.jobs.not_running_as_desired;
    const abnormal = overview.clusters.abnormal;
    replace(
      stripEl,
      shown.map(chip),
      lagging
        ? h("span", { class: "strip-note", title: "desired RUNNING, observed otherwise" }, `${num(lagging)} should run but do not`)
        : h("span", { class: "strip-note ok" }, "every job that should run runs"),
      abnormal.length
        ? h("span", { class: "strip-note bad" }, "abnormal: ", abnormal.map((c, i) => [i ? ", " : "", h("a", { href: `#/clusters/${api.seg(c)}` }, c)]))
        : null,
    );
  }

  function anyFilter() {
    return FILTERS.some((k) => filters[k]);
  }

  function paintBulk() {
    if (!canWriteSomewhere || selected.size === 0) {
      bulkEl.hidden = true;
      replace(bulkEl);
      return;
    }
    bulkEl.hidden = false;
    const act = (command) => () => bulk(command);
    replace(
      bulkEl,
      h("strong", {}, `${num(selected.size)} selected`),
      button("Start", act("start"), { kind: "primary", disabled: busy, testid: "bulk-start" }),
      button("Stop", act("stop"), { kind: "danger", disabled: busy, testid: "bulk-stop" }),
      button("Restart", act("restart"), { disabled: busy, testid: "bulk-restart" }),
      button("Clear selection", () => {
        selected.clear();
        paint();
      }, { kind: "ghost", disabled: busy }),
    );
  }

  async function bulk(command) {
    const names = [...selected.keys()];
    const ok = await confirm({
      title: `${command[0].toUpperCase()}${command.slice(1)} ${names.length} job${names.length === 1 ? "" : "s"}?`,
      body: h("p", {}, names.slice(0, 8).join(", "), names.length > 8 ? ` and ${names.length - 8} more` : ""),
      confirmLabel: command[0].toUpperCase() + command.slice(1),
      danger: command !== "start",
    });
    if (!ok) return;
    busy = true;
    paintBulk();
    const progress = h("span", { class: "bulk-progress", role: "status" }, `0 / ${names.length}…`);
    bulkEl.appendChild(progress);
    const result = await runCommands(command, names, (done, total) => replace(progress, `${command}: ${done} / ${total}…`));
    busy = false;
    for (const name of result.ok) selected.delete(name);
    const failed = result.failed.length;
    toast(
      `${command}: ${result.ok.length} accepted${failed ? `, ${failed} refused (${result.failed[0].name}: ${result.failed[0].error.message})` : ""}`,
      failed ? "error" : "ok",
      failed ? 10000 : 4000,
    );
    poller.now();
  }

  const poller = new Poller(load, { interval: 3000, onStatus: (st) => live.update(st) });
  try {
    await poller.prime();
  } catch (err) {
    replace(messageEl, errorNotice(err));
    ctx.ready();
  }
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}

async function fillChoices(selectEl, path, current) {
  try {
    const page = await api.get(path, { limit: 1000 });
    const names = (page.data || []).map((x) => x.name).filter((n) => n !== current);
    for (const name of names) selectEl.appendChild(h("option", { value: name }, name));
  } catch {
    // the menu keeps "any" (and the current choice): the table still works
  }
}
