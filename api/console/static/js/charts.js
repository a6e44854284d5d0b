// Small charts drawn as inline SVG (no library): a stacked area over time, vertical bars per time
// bucket, horizontal bars per name, and a timeline of events. Colours come from the stylesheet
// (classes such as ``fill-running``), so the charts follow the console's meaning of colours;
// every chart has a text alternative (its <title> and aria-label) and a legend.

import { h, s, num } from "./dom.js";

const W = 560;
const H = 180;
const PAD = { top: 10, right: 12, bottom: 22, left: 44 };

function clock(ms) {
  const d = new Date(ms);
  const pad = (x) => String(x).padStart(2, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function day(ms) {
  const d = new Date(ms);
  return `${d.getMonth() + 1}/${d.getDate()} ${clock(ms)}`;
}

/** A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten. */
export function niceMax(value) {
  if (!(value > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 5, 10]) if (m * p >= value) return m * p;
  return 10 * p;
}

function frame(label, testid, ...children) {
  return s(
    "svg",
    { class: "chart", viewBox: `0 0 ${W} ${H}`, width: "100%", preserveAspectRatio: "xMidYMid meet", role: "img", "aria-label": label, "data-testid": testid },
    s("title", {}, label),
    ...children,
  );
}

/** An axis label: 1.5k, 20k, 3M. */
function compact(n) {
  if (n >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return `${+n.toFixed(2)}`;
}

function yAxis(max, fmt = compact) {
  const y0 = H - PAD.bottom;
  const lines = [];
  for (const f of [0, 0.5, 1]) {
    const y = y0 - f * (y0 - PAD.top);
    lines.push(s("line", { x1: PAD.left, x2: W - PAD.right, y1: y, y2: y, class: "grid-line" }));
    lines.push(s("text", { x: PAD.left - 6, y: y + 4, class: "axis-label", "text-anchor": "end" }, fmt(max * f)));
  }
  return lines;
}

export function legend(entries) {
  return h(
    "div",
    { class: "legend" },
    entries.map(([cls, label]) => h("span", { class: "legend-item" }, s("svg", { width: 10, height: 10, class: "legend-swatch" }, s("rect", { width: 10, height: 10, class: cls })), label)),
  );
}

/**
 * Stacked areas over time. ``samples``: [{t (ms), values: {key: n}}] oldest first; ``keys``: the
 * series bottom to top; ``cls(key)``: the fill class of a series.
 */
export function stackedArea(samples, keys, { label, cls, testid }) {
  if (samples.length < 2) return h("p", { class: "muted chart-empty" }, "Collecting samples… (the chart fills in while this page is open)");
  const t0 = samples[0].t;
  const t1 = samples[samples.length - 1].t;
  const span = t1 - t0 || 1;
  const totals = samples.map((p) => keys.reduce((a, k) => a + (p.values[k] || 0), 0));
  const max = niceMax(Math.max(...totals));
  const x = (t) => PAD.left + ((t - t0) * (W - PAD.left - PAD.right)) / span;
  const y = (v) => H - PAD.bottom - (v * (H - PAD.top - PAD.bottom)) / max;
  const below = samples.map(() => 0);
  const areas = [];
  for (const key of keys) {
    const above = samples.map((p, i) => below[i] + (p.values[key] || 0));
    if (above.some((v, i) => v !== below[i])) {
      const top = samples.map((p, i) => `${x(p.t).toFixed(1)},${y(above[i]).toFixed(1)}`);
      const bottom = samples.map((p, i) => `${x(p.t).toFixed(1)},${y(below[i]).toFixed(1)}`).reverse();
      areas.push(s("polygon", { points: [...top, ...bottom].join(" "), class: cls(key) }, s("title", {}, `${key}: ${samples[samples.length - 1].values[key] || 0} now`)));
    }
    above.forEach((v, i) => {
      below[i] = v;
    });
  }
  return frame(
    label,
    testid,
    ...yAxis(max),
    ...areas,
    s("text", { x: PAD.left, y: H - 6, class: "axis-label" }, clock(t0)),
    s("text", { x: W - PAD.right, y: H - 6, class: "axis-label", "text-anchor": "end" }, clock(t1)),
  );
}

/**
 * Bars per time bucket, several series side by side. ``buckets``: [{start (ms), end (ms), values:
 * {key: n}}]; ``series``: [[key, class, label]].
 */
export function bars(buckets, series, { label, testid }) {
  if (!buckets.length) return h("p", { class: "muted chart-empty" }, "No data.");
  const max = niceMax(Math.max(1, ...buckets.flatMap((b) => series.map(([k]) => b.values[k] || 0))));
  const plotW = W - PAD.left - PAD.right;
  const slot = plotW / buckets.length;
  const barW = Math.max(1, (slot * 0.8) / series.length);
  const y = (v) => H - PAD.bottom - (v * (H - PAD.top - PAD.bottom)) / max;
  const shapes = [];
  buckets.forEach((b, i) => {
    series.forEach(([key, cls, name], j) => {
      const v = b.values[key] || 0;
      if (!v) return;
      const x0 = PAD.left + i * slot + slot * 0.1 + j * barW;
      shapes.push(s("rect", { x: x0.toFixed(1), y: y(v).toFixed(1), width: barW.toFixed(1), height: (H - PAD.bottom - y(v)).toFixed(1), class: cls, "data-series": key }, s("title", {}, `${name}: ${v} (${day(b.start)}–${clock(b.end)})`)));
    });
  });
  const first = buckets[0].start;
  const last = buckets[buckets.length - 1].end;
  const fmt = last - first > 6 * 3600000 ? day : clock;
  return frame(
    label,
    testid,
    ...yAxis(max),
    ...shapes,
    s("text", { x: PAD.left, y: H - 6, class: "axis-label" }, fmt(first)),
    s("text", { x: W - PAD.right, y: H - 6, class: "axis-label", "text-anchor": "end" }, fmt(last)),
  );
}

/** Horizontal bars: [{label, value, cls?}] largest first, ``unit`` after each value. */
export function hbars(rows, { label, testid, unit = "", fmt = num, cls = "fill-accent" }) {
  if (!rows.length) return h("p", { class: "muted chart-empty" }, "No data.");
  const rowH = 18;
  const height = rows.length * rowH + 8;
  const labelW = 170;
  const max = niceMax(Math.max(...rows.map((r) => r.value)));
  const plotW = W - labelW - 70;
  return s(
    "svg",
    { class: "chart", viewBox: `0 0 ${W} ${height}`, width: "100%", role: "img", "aria-label": label, "data-testid": testid },
    s("title", {}, label),
    ...rows.flatMap((r, i) => {
      const y0 = 4 + i * rowH;
      const w = Math.max(1, (r.value * plotW) / max);
      return [
        s("text", { x: labelW - 6, y: y0 + 12, class: "axis-label", "text-anchor": "end" }, r.label.length > 26 ? `${r.label.slice(0, 25)}…` : r.label),
        s("rect", { x: labelW, y: y0 + 2, width: w.toFixed(1), height: rowH - 6, class: r.cls || cls }, s("title", {}, `${r.label}: ${fmt(r.value)}${unit}`)),
        s("text", { x: labelW + w + 5, y: y0 + 12, class: "axis-label" }, `${fmt(r.value)}${unit}`),
      ];
    }),
  );
}

/** Events on a time axis: [{t (ms), cls, title}] between ``from`` and ``to`` (ms). */
export function timeline(events, { from, to, label, testid }) {
  const height = 54;
  const span = to - from || 1;
  const x = (t) => PAD.left + ((t - from) * (W - PAD.left - PAD.right)) / span;
  return s(
    "svg",
    { class: "chart", viewBox: `0 0 ${W} ${height}`, width: "100%", role: "img", "aria-label": label, "data-testid": testid },
    s("title", {}, label),
    s("line", { x1: PAD.left, x2: W - PAD.right, y1: 22, y2: 22, class: "axis-line" }),
    ...events.map((e) => s("circle", { cx: x(e.t).toFixed(1), cy: 22, r: 6, class: e.cls }, s("title", {}, e.title))),
    s("text", { x: PAD.left, y: height - 6, class: "axis-label" }, day(from)),
    s("text", { x: W - PAD.right, y: height - 6, class: "axis-label", "text-anchor": "end" }, day(to)),
  );
}
