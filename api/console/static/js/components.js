// The console's building blocks: badges, tables, sections, dialogs, notices, a sparkline.

import { h, replace, s, ago } from "./dom.js";

// -- states ---------------------------------------------------------------------------------------

/** A job's observed state, coloured by what it means for an operator (css: .state-<name>). */
export function stateBadge(state, extra) {
  const name = state || "UNKNOWN";
  return h(
    "span",
    { class: ["badge", `state-${name.toLowerCase()}`], title: extra || name, dataset: { state: name } },
    name,
  );
}

export function desiredBadge(desired) {
  return h("span", { class: ["desired", `desired-${(desired || "").toLowerCase()}`] }, desired);
}

const HEALTH_LABEL = {
  NORMAL: "Normal",
  VOTE_ABNORMAL: "Vote abnormal",
  THRESHOLD_ABNORMAL: "Threshold abnormal",
  MANUAL_ABNORMAL: "Manual abnormal",
};

export function healthBadge(health) {
  const name = health || "UNKNOWN";
  return h(
    "span",
    { class: ["badge", `health-${name.toLowerCase()}`], dataset: { health: name }, title: name },
    HEALTH_LABEL[name] || name,
  );
}

export function priorityBadge(priority) {
  return h("span", { class: ["prio", `prio-${priority}`] }, priority);
}

// -- layout ---------------------------------------------------------------------------------------

export function pageHeader(title, { subtitle, actions, badge } = {}) {
  return h(
    "header",
    { class: "page-header" },
    h("div", { class: "titles" }, h("h1", {}, title, badge ? " " : null, badge || null), subtitle ? h("p", { class: "subtitle" }, subtitle) : null),
    actions ? h("div", { class: "actions" }, actions) : null,
  );
}

export function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

/** A definition list from [label, value] pairs (values: text or elements; null rows skipped). */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v === "" || v === null || v === undefined ? "—" : v)]),
  );
}

/**
 * A table. columns: [{label, cell: (row) => node|text, class?, title?}]; rows: array.
 * ``rowAttrs(row)`` adds attributes to each <tr> (data-* for tests and styling).
 */
export function table(columns, rows, { empty = "Nothing here.", rowAttrs, caption } = {}) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.class, title: c.title, scope: "col" }, c.label))));
  const body = h(
    "tbody",
    {},
    rows.length === 0
      ? h("tr", { class: "empty" }, h("td", { colspan: columns.length }, empty))
      : rows.map((row) => h("tr", rowAttrs ? rowAttrs(row) : {}, columns.map((c) => h("td", { class: c.class }, c.cell(row))))),
  );
  return h("div", { class: "table-wrap" }, h("table", { class: "grid" }, caption ? h("caption", {}, caption) : null, head, body));
}

export function button(label, onclick, { kind = "", title, disabled, testid, type = "button" } = {}) {
  return h(
    "button",
    { type, class: ["btn", kind && `btn-${kind}`], onclick, title, disabled, dataset: testid ? { testid } : undefined },
    label,
  );
}

export function link(href, text, attrs = {}) {
  return h("a", { href, ...attrs }, text);
}

// -- feedback -------------------------------------------------------------------------------------

export function notice(kind, ...text) {
  return h("div", { class: ["notice", `notice-${kind}`], role: kind === "error" ? "alert" : "status" }, ...text);
}

export function errorNotice(error) {
  const status = error && error.status ? ` (HTTP ${error.status})` : "";
  return notice("error", `${error && error.message ? error.message : error}${status}`);
}

let toastRoot = null;

/** Remove the toasts of the previous page (the router calls this on every page change). */
export function clearToasts() {
  if (toastRoot) replace(toastRoot);
}

/** A short message in the corner (an action's outcome). */
export function toast(message, kind = "info", ms = 5000) {
  if (!toastRoot) {
    toastRoot = h("div", { class: "toasts", "aria-live": "polite" });
    document.body.appendChild(toastRoot);
  }
  const el = h("div", { class: ["toast", `toast-${kind}`], role: kind === "error" ? "alert" : "status" }, message);
  toastRoot.appendChild(el);
  setTimeout(() => el.remove(), ms);
  return el;
}

/**
 * A modal confirmation: resolves true/false, or with the text typed when ``input`` names a
 * field (a reason), or null when cancelled.
 */
export async function confirm({ title, body, confirmLabel = "Confirm", danger = false, input = null, required = false }) {
  const field = input ? h("textarea", { name: "reason", rows: 3, placeholder: input, required }) : null;
  let typed = null;
  const chosen = await modal({
    title,
    body: [body || null, field ? h("label", { class: "field" }, h("span", {}, input), field) : null],
    focus: field,
    actions: [
      {
        label: confirmLabel,
        kind: danger ? "danger" : "primary",
        testid: "confirm",
        value: true,
        submit: true,
        run: async () => {
          if (field && required && !field.value.trim()) {
            field.focus();
            return false;
          }
          typed = field ? field.value.trim() : null;
          return true;
        },
      },
    ],
  });
  if (field) return chosen ? typed : null;
  return Boolean(chosen);
}

/**
 * A modal with any content and several actions: resolves with the ``value`` of the action
 * chosen (null when cancelled). An action's ``run`` (async) is called first: the dialog closes
 * only when it returns true, so a failed write can be retried from the same dialog (with the
 * same Idempotency-Key). ``wide`` for tables.
 */
export function modal({ title, body, actions = [], wide = false, cancelLabel = "Cancel", testid, focus = null }) {
  return new Promise((resolve) => {
    const status = h("div", { class: "dialog-status", role: "status" });
    const cancel = button(cancelLabel, null, { testid: "cancel" });
    const buttons = actions.map((a) => button(a.label, null, { kind: a.kind || "", testid: a.testid, disabled: a.disabled, type: a.submit ? "submit" : "button" }));
    const form = h(
      "form",
      { method: "dialog", class: "dialog-form" },
      h("h2", {}, title),
      body ? h("div", { class: "dialog-body" }, body) : null,
      status,
      h("div", { class: "dialog-actions" }, cancel, buttons),
    );
    const dialog = h("dialog", { class: ["dialog", wide && "dialog-wide"], dataset: testid ? { testid } : undefined }, form);
    let answered = false;
    const finish = (value) => {
      if (answered) return;
      answered = true;
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    const choose = async (a, i) => {
      if (!a.run) {
        finish(a.value);
        return;
      }
      for (const b of buttons) b.disabled = true;
      if (a.busy) replace(status, h("span", { class: "muted" }, a.busy));
      let done = false;
      try {
        done = await a.run(status);
      } catch (err) {
        replace(status, errorNotice(err));
      }
      if (done) {
        finish(a.value);
        return;
      }
      if (a.busy && status.textContent === a.busy) replace(status);
      buttons.forEach((b, j) => {
        b.disabled = Boolean(actions[j].disabled);
      });
      buttons[i].disabled = Boolean(a.disabled);
    };
    // Enter in a field submits the form: the action marked ``submit``, if any
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const i = actions.findIndex((a) => a.submit);
      if (i >= 0 && !buttons[i].disabled) choose(actions[i], i);
    });
    actions.forEach((a, i) => {
      if (!a.submit) buttons[i].addEventListener("click", () => choose(a, i));
    });
    cancel.addEventListener("click", () => finish(null));
    dialog.addEventListener("cancel", () => finish(null));
    document.body.appendChild(dialog);
    dialog.showModal();
    (focus || buttons.find((b) => !b.disabled) || cancel).focus();
  });
}

/**
 * The changes between two specs as a table (the API's ``changes``: path, kind, before, after).
 */
export function changesTable(changes, { empty = "No changes." } = {}) {
  const shown = (v) => (v === null || v === undefined ? h("span", { class: "muted" }, "—") : h("code", {}, typeof v === "string" ? v : JSON.stringify(v)));
  return table(
    [
      { label: "Field", cell: (c) => h("code", {}, c.path) },
      { label: "Change", cell: (c) => h("span", { class: ["change", `change-${c.kind}`] }, c.kind) },
      { label: "Before", cell: (c) => shown(c.before), class: "wrap diff-before" },
      { label: "After", cell: (c) => shown(c.after), class: "wrap diff-after" },
    ],
    changes,
    { empty, rowAttrs: (c) => ({ dataset: { change: c.path, kind: c.kind } }) },
  );
}

// -- live indicator -------------------------------------------------------------------------------

/** "live · updated 2 s ago" / "reconnecting in 8 s": fed by a Poller's onStatus. */
export function liveIndicator() {
  const el = h("span", { class: "live", dataset: { live: "starting" } }, "live");
  let last = null;
  const paint = (status) => {
    if (status.ok) {
      last = Date.now();
      el.dataset.live = "ok";
      el.title = "The page refreshes by itself";
      replace(el, h("span", { class: "dot" }), "live");
    } else {
      el.dataset.live = "error";
      const wait = Math.round(status.next / 1000);
      el.title = status.error ? String(status.error.message || status.error) : "";
      replace(el, h("span", { class: "dot" }), `no answer · retry in ${wait} s${last ? ` · last update ${ago(last / 1000)}` : ""}`);
    }
  };
  el.update = paint;
  el.dispose = () => {};
  return el;
}

// -- sparkline ------------------------------------------------------------------------------------

/**
 * A small line chart of ``values`` (numbers, oldest first) as inline SVG; the last value is
 * marked. Nothing is drawn for fewer than two points.
 */
export function sparkline(values, { width = 240, height = 48, label = "", unit = "" } = {}) {
  const points = values.filter((v) => typeof v === "number" && Number.isFinite(v));
  if (points.length < 2) {
    return h("span", { class: "spark-empty" }, points.length === 1 ? `${points[0]}${unit}` : "no data yet");
  }
  const pad = 3;
  const min = Math.min(...points);
  const max = Math.max(...points);
  const span = max - min || 1;
  const x = (i) => pad + (i * (width - 2 * pad)) / (points.length - 1);
  const y = (v) => height - pad - ((v - min) * (height - 2 * pad)) / span;
  const d = points.map((v, i) => `${i === 0 ? "M" : "L"}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  const area = `${d} L${x(points.length - 1).toFixed(1)},${height - pad} L${x(0).toFixed(1)},${height - pad} Z`;
  const lastX = x(points.length - 1);
  const lastY = y(points[points.length - 1]);
  return s(
    "svg",
    { class: "sparkline", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${label}: ${points.length} points, last ${points[points.length - 1]}${unit}` },
    s("title", {}, `${label} (min ${min}${unit}, max ${max}${unit})`),
    s("path", { d: area, class: "spark-area" }),
    s("path", { d, class: "spark-line" }),
    s("circle", { cx: lastX.toFixed(1), cy: lastY.toFixed(1), r: 2.5, class: "spark-dot" }),
  );
}
