// Building the page without markup strings: every text goes in through textContent, so nothing
// the API returns is ever parsed as HTML (and the Content-Security-Policy forbids inline code).

const SVG_NS = "http://www.w3.org/2000/svg";

function append(el, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) append(el, c);
  } else if (child instanceof Node) {
    el.appendChild(child);
  } else {
    el.appendChild(document.createTextNode(String(child)));
  }
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") {
      el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    } else if (key === "dataset") {
      for (const [k, v] of Object.entries(value)) el.dataset[k] = v;
    } else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "value" && "value" in el) {
      el.value = value;
    } else if (key === "checked" || key === "disabled" || key === "selected") {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

/** h("a", {href: "#/jobs", class: "x"}, "text", child...) -> an element. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** The same for SVG elements (sparklines). */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

const NUMBER = new Intl.NumberFormat("en");

export function num(n) {
  return n === null || n === undefined ? "—" : NUMBER.format(n);
}

export function rate(n) {
  if (n === null || n === undefined) return "—";
  return n >= 100 ? NUMBER.format(Math.round(n)) : n.toFixed(1);
}

/** A time from the API: an ISO 8601 string, or seconds since the epoch (node start times). */
function toDate(value) {
  return new Date(typeof value === "number" ? value * 1000 : value);
}

/** "2024-05-01 12:03:04" in the browser's time zone. */
export function datetime(iso) {
  if (iso === null || iso === undefined || iso === "") return "—";
  const d = toDate(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const pad = (x) => String(x).padStart(2, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

/** "3 s ago", "5 min ago", "2 h ago", "4 d ago". */
export function ago(iso, now = Date.now()) {
  if (iso === null || iso === undefined || iso === "") return "—";
  const t = toDate(iso).getTime();
  if (Number.isNaN(t)) return String(iso);
  const sec = Math.max(0, Math.round((now - t) / 1000));
  if (sec < 60) return `${sec} s ago`;
  if (sec < 3600) return `${Math.floor(sec / 60)} min ago`;
  if (sec < 86400) return `${Math.floor(sec / 3600)} h ago`;
  return `${Math.floor(sec / 86400)} d ago`;
}

/** A time cell: relative text, absolute time on hover. */
export function when(iso) {
  if (iso === null || iso === undefined || iso === "") return h("span", { class: "muted" }, "—");
  const d = toDate(iso);
  const machine = Number.isNaN(d.getTime()) ? "" : d.toISOString();
  return h("time", { datetime: machine, title: datetime(iso) }, ago(iso));
}

export function seconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  return `${Math.round(s / 60)} min`;
}

/** Wait ``ms`` before calling ``fn`` with the latest arguments (search boxes). */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/**
 * Keep a page's state (its filters, its page size) in the URL's fragment without a new history
 * entry or a new render: ``#<path>?<query>``, empty values left out. A reload or a shared link
 * then opens the same view.
 */
export function keepInUrl(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== null && v !== undefined && v !== "") params.set(k, String(v));
  }
  const encoded = params.toString();
  window.history.replaceState(null, "", `#${path}${encoded ? `?${encoded}` : ""}`);
}
