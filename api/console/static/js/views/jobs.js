// Jobs: the table an operator starts from. Filters, label selectors and search (kept in the
// URL), state colours, progress, paging (cursor when the node's API pages by cursor, else
// offset), bulk start / stop / restart of a selection or of every job the filters match (one
// bulk operation of the node: plan shown, then executed), and live refresh.

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, debounce, h, keepInUrl, num, rate, replace, when } from "../dom.js";
import {
  button,
  desiredBadge,
  errorNotice,
  liveIndicator,
  notice,
  pageHeader,
  priorityBadge,
  stateBadge,
  table,
  toast,
} from "../components.js";
import { Poller } from "../poll.js";
import { OVER, bulkOperation, operationLine } from "../commands.js";
import { record } from "../samples.js";

const STATES = ["STOPPED", "QUEUED", "SUBMITTING", "STARTING", "RUNNING", "STOPPING", "FINISHED", "FAILED", "UNKNOWN"];
const PAGE_SIZES = [25, 50, 100, 200];
const FILTERS = ["q", "state", "desired_state", "team", "group", "cluster", "priority", "label"];
/** the strip's order: what runs, what is on its way, what needs a look, what rests */
const STRIP_ORDER = ["RUNNING", "STARTING", "SUBMITTING", "QUEUED", "STOPPING", "UNKNOWN", "FAILED", "FINISHED", "STOPPED"];
/** Progress as the table shows it: last batch and input rate, STALLED, or why there is none. */
export function progressCell(job) {
  const p = job.progress;
  if (p && p.status !== "no-reports") {
    const stalled = p.status === "stalled";
    return h(
      "span",
      { class: ["progress", stalled && "stalled"], title: p.reported_at ? `reported ${datetime(p.reported_at)}` : p.status },
      stalled ? h("span", { class: "badge state-stalled" }, "STALLED") : null,
      p.batch_id !== null && p.batch_id !== undefined ? ` batch ${num(p.batch_id)}` : ` ${p.status}`,
      p.input_rate !== null && p.input_rate !== undefined ? ` · ${rate(p.input_rate)} rows/s` : "",
    );
  }
  if (p) return h("span", { class: "muted" }, "no progress reports");
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

  const live = liveIndicator();
  const countEl = h("span", { class: "count" }, "");
  const tableEl = h("div", { class: "jobs-table" });
  const pagerEl = h("div", { class: "pager" });
  const bulkEl = h("div", { class: "bulk", hidden: true, dataset: { testid: "bulk-bar" } });
  const messageEl = h("div", {});
  const stripEl = h("div", { class: "strip", dataset: { testid: "state-strip" } });
  const matchEl = h("span", {});
  const operationEl = h("div", { dataset: { testid: "operation-status" } });
  let following = null; // the bulk operation followed in operationEl

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
  const labelInput = h("input", {
    type: "text",
    name: "label",
    placeholder: "Labels: env=prod, !canary",
    value: filters.label,
    "aria-label": "Label selector",
    title: "Label requirements, all of which a job meets: key=value, key!=value, key (has it), !key (lacks it); separated by commas",
    size: 22,
    dataset: { testid: "filter-label" },
  });
  labelInput.addEventListener("change", () => {
    filters.label = labelInput.value.trim();
    resetPaging();
    refresh();
  });
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
    labelInput.value = "";
    for (const el of [stateSelect, desiredSelect, groupSelect, clusterSelect, prioritySelect]) el.value = "";
    resetPaging();
    refresh();
  }, { kind: "ghost" });
  const stateSelect = select("state", "State", STATES);
  const desiredSelect = select("desired_state", "Desired", ["RUNNING", "STOPPED"]);
  const prioritySelect = select("priority", "Priority", ["high", "normal", "low"]);

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
    labelInput,
    prioritySelect,
    sizeSelect,
    clearFilters,
  );

  replace(
    root,
    pageHeader("Jobs", {
      subtitle: countEl,
      actions: [
        live,
        matchEl,
        canWriteSomewhere ? h("a", { class: "btn btn-primary", href: "#/create-job", dataset: { testid: "new-job" } }, "New job") : null,
      ],
    }),
    operationEl,
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
      if (filters[key]) q[key] = key === "label" ? labelRequirements(filters.label) : filters[key];
    }
    if (cursorMode) {
      const cursor = cursors[cursors.length - 1];
      if (cursor) q.cursor = cursor;
    } else if (offset) {
      q.offset = offset;
    }
    return q;
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
    if (overview && !Object.keys(around).length) record("jobs-by-state", overview.jobs.by_state);
    paintStrip(overview);
    paint();
    keepInUrl("/jobs", { ...filters, limit: limit !== 50 ? limit : "", offset: cursorMode ? "" : offset || "" });
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
      {
        label: "Name",
        class: "col-name",
        cell: (j) => [
          h("a", { href: `#/jobs/${api.seg(j.name)}`, dataset: { testid: "job-link" } }, j.name),
          labelChips(j.labels, (requirement) => {
            const have = labelRequirements(filters.label);
            if (!have.includes(requirement)) have.push(requirement);
            filters.label = have.join(", ");
            labelInput.value = filters.label;
            resetPaging();
            refresh();
          }),
        ],
      },
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
    paintMatch();
    if (!canWriteSomewhere || selected.size === 0) {
      bulkEl.hidden = true;
      replace(bulkEl);
      return;
    }
    bulkEl.hidden = false;
    const act = (kind) => () => bulk(kind, { jobs: [...selected.keys()] }, `${num(selected.size)} selected`);
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

  /**
   * "Act on all N matching": the filters as a bulk selector (every filter but the name search,
   * which a selector cannot express; a name prefix can), offered when some filter is set.
   */
  function matchSelector() {
    if (filters.q) return null;
    const selector = {};
    if (filters.team) selector.teams = [filters.team];
    if (filters.group) selector.groups = [filters.group];
    if (filters.cluster) selector.clusters = [filters.cluster];
    if (filters.state) selector.states = [filters.state];
    if (filters.priority) selector.priorities = [filters.priority];
    if (filters.label) selector.labels = labelRequirements(filters.label);
    if (filters.desired_state) return null; // not a selector field
    return Object.keys(selector).length ? selector : null;
  }

  function paintMatch() {
    const selector = canWriteSomewhere && page && page.count ? matchSelector() : null;
    if (!selector) {
      replace(matchEl);
      return;
    }
    const choose = h(
      "select",
      { "aria-label": "Act on every job these filters match", dataset: { testid: "bulk-match" }, disabled: busy },
      h("option", { value: "" }, `Act on all ${num(page.count)} matching…`),
      ["start", "stop", "restart"].map((k) => h("option", { value: k }, k[0].toUpperCase() + k.slice(1))),
    );
    choose.addEventListener("change", () => {
      const kind = choose.value;
      choose.value = "";
      if (kind) bulk(kind, selector, "every job these filters match");
    });
    replace(matchEl, choose);
  }

  async function bulk(kind, selector, what) {
    busy = true;
    paintBulk();
    let op = null;
    try {
      op = await bulkOperation(kind, selector, { what });
    } catch (err) {
      toast(`${kind}: ${err.message}`, "error", 10000);
    } finally {
      busy = false;
    }
    if (op) {
      if (selector.jobs) for (const name of selector.jobs) selected.delete(name);
      follow(op);
    }
    paint();
    poller.now();
  }

  /** Follow a bulk operation's progress above the table until it ends. */
  function follow(op) {
    if (following) following.stop();
    const line = h("span", { dataset: { testid: "operation-line", state: op.state } }, operationLine(op));
    replace(operationEl, notice("ok", line, " · ", h("a", { href: `#/operations/${op.id}`, dataset: { testid: "operation-link" } }, "each job's progress")));
    following = new Poller(
      async () => {
        const now = await api.get(`/v1/operations/${op.id}`, { items: false });
        if (!ctx.current()) return;
        replace(line, operationLine(now));
        line.dataset.state = now.state;
        if (OVER.has(now.state)) {
          following.stop();
          toast(operationLine(now), now.state === "SUCCEEDED" ? "ok" : "error", 8000);
          poller.now();
        }
      },
      { interval: 1500 },
    ).start({ immediately: true });
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
    if (following) following.stop();
    live.dispose();
  };
}

/** "env=prod, !canary" -> ["env=prod", "!canary"] */
export function labelRequirements(text) {
  return (text || "")
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
}

/** A job's labels as small chips; a click filters by that label. */
function labelChips(labels, onPick) {
  const entries = Object.entries(labels || {});
  if (!entries.length) return null;
  return h(
    "span",
    { class: "label-chips" },
    entries.map(([k, v]) => {
      const requirement = v === "" ? k : `${k}=${v}`;
      return h("button", { type: "button", class: "label-chip", title: `Show only jobs with ${requirement}`, dataset: { label: requirement }, onclick: () => onPick(requirement) }, requirement);
    }),
  );
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
