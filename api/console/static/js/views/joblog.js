// A run's driver log: its tail, then followed while the driver runs (the API reads it from the
// run's cluster: a standalone worker's driver stdout/stderr, a YARN container's, a local run's
// file). Reads go by byte offsets: the first read is the tail, each next one asks from the last
// answer's ``next_offset``, once a second, until the run has ended and its log is read to the
// end. Earlier parts load on demand; a filter shows only the lines containing a text. With links
// to the run's application in its cluster's web UI.

import * as api from "../api.js";
import { h, keepInUrl, num, replace } from "../dom.js";
import { button, errorNotice, liveIndicator, notice, pageHeader } from "../components.js";
import { Poller } from "../poll.js";
import { appLink, clusterUi } from "./job.js";

/** bytes per read */
const CHUNK = 64 << 10;
/** the most text kept on the page (the oldest is dropped past it) */
const KEEP = 2 << 20;

export async function render(root, ctx) {
  const name = ctx.params.name;
  const base = `/v1/jobs/${api.seg(name)}`;
  const live = liveIndicator();
  const message = h("div", {});
  const info = h("div", { class: "log-info muted", dataset: { testid: "log-info" } });
  const pre = h("pre", { class: "log", tabindex: 0, "aria-label": "Driver log", dataset: { testid: "log" } });
  const earlier = h("div", { class: "log-earlier" });
  const runSelect = h("select", { name: "attempt", "aria-label": "Run", dataset: { testid: "log-run" } });
  const streamSelect = h("select", { name: "stream", "aria-label": "Stream", dataset: { testid: "log-stream" } });
  const followBox = h("input", { type: "checkbox", checked: true, dataset: { testid: "log-follow" } });
  const wrapBox = h("input", { type: "checkbox" });
  const filter = h("input", { type: "search", placeholder: "Show lines containing…", "aria-label": "Filter lines", size: 26, dataset: { testid: "log-filter" } });
  const links = h("span", { class: "log-links" });

  const [job, runs, clusters] = await Promise.all([
    api.get(base).catch((err) => err),
    api.get(`${base}/runs`, { limit: 50 }).catch(() => ({ data: [] })),
    api.get("/v1/clusters", { limit: 1000 }).catch(() => ({ data: [] })),
  ]);
  if (job instanceof Error) {
    replace(root, pageHeader(`${name}: driver log`), errorNotice(job));
    ctx.ready();
    return null;
  }
  const byCluster = new Map((clusters.data || []).map((c) => [c.name, c]));
  const submitted = (runs.data || []).filter((r) => r.submission_id || r.app_id);
  let attempt = Number(ctx.query.get("attempt")) || (job.current_run ? job.current_run.attempt : submitted.length ? submitted[0].attempt : null);
  let stream = ctx.query.get("stream") || "";
  replace(
    runSelect,
    submitted.map((r) => h("option", { value: r.attempt, selected: r.attempt === attempt }, `run #${r.id}, attempt ${r.attempt} · ${r.state} on ${r.cluster}`)),
  );

  // the log as read so far: [start, end) of the stream, its text
  let start = 0;
  let end = 0;
  let text = "";
  let done = false; // the run ended and its log was read to its end
  let streams = [];

  replace(
    root,
    pageHeader(`${name}: driver log`, {
      subtitle: [h("a", { href: `#/jobs/${api.seg(name)}` }, "back to the job"), " · ", links],
      actions: [live],
    }),
    h(
      "div",
      { class: "toolbar" },
      runSelect,
      streamSelect,
      h("label", { class: "checks" }, followBox, "Follow"),
      h("label", { class: "checks" }, wrapBox, "Wrap lines"),
      filter,
    ),
    message,
    info,
    earlier,
    pre,
  );

  if (attempt === null) {
    replace(message, notice("muted", "This job has no submitted run: there is no driver log yet."));
    ctx.ready();
    return null;
  }


  function paintLinks() {
    const run = submitted.find((r) => r.attempt === attempt);
    const cluster = run ? byCluster.get(run.cluster) : null;
    replace(links, run && run.app_id ? ["application ", appLink(cluster, run.app_id, run.app_id)] : clusterUi(cluster));
  }

  function paintText(stick) {
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
    const wanted = filter.value.trim().toLowerCase();
    const shown = wanted ? text.split("\n").filter((line) => line.toLowerCase().includes(wanted)).join("\n") : text;
    replace(pre, shown || (text ? "(no line matches the filter)" : "(empty so far)"));
    pre.dataset.lines = String(text ? text.split("\n").filter(Boolean).length : 0);
    if (stick || (followBox.checked && atBottom)) pre.scrollTop = pre.scrollHeight;
  }

  function paintInfo(answer) {
    replace(
      info,
      `${answer.stream} of run #${answer.run} (attempt ${answer.attempt}) on ${answer.cluster}: bytes ${num(start)}–${num(end)} of ${num(answer.size)}`,
      answer.run_ended ? (answer.at_end ? " · the run has ended: this is the whole rest of its log" : " · the run has ended") : followBox.checked ? " · following" : "",
    );
    pre.dataset.runEnded = String(answer.run_ended);
    replace(earlier, start > 0 ? button(`Load earlier (${num(Math.min(start, CHUNK))} bytes)`, loadEarlier, { kind: "ghost", testid: "log-earlier" }) : null);
  }

  function paintStreams() {
    replace(streamSelect, streams.map((st) => h("option", { value: st, selected: st === stream }, st)));
    streamSelect.hidden = streams.length < 2;
  }

  /** The tail: the first read of a run's stream. */
  async function tail() {
    const q = { limit: CHUNK };
    if (stream) q.stream = stream;
    const answer = await api.get(`${base}/runs/${attempt}/log`, q);
    if (!ctx.current()) return;
    stream = answer.stream;
    streams = answer.streams || [answer.stream];
    start = answer.offset;
    end = answer.next_offset;
    text = answer.text;
    done = answer.run_ended && answer.at_end;
    paintStreams();
    paintText(true);
    paintInfo(answer);
    keepInUrl(`/jobs/${api.seg(name)}/log`, { attempt, stream });
  }

  /** What the log gained since the last read (the poller calls it while following). */
  async function more() {
    if (done || !followBox.checked) return;
    const answer = await api.get(`${base}/runs/${attempt}/log`, { stream, offset: end, limit: CHUNK });
    if (!ctx.current()) return;
    if (answer.next_offset > end) {
      text += answer.text;
      end = answer.next_offset;
      if (text.length > KEEP) {
        const cut = text.indexOf("\n", text.length - KEEP);
        start += new TextEncoder().encode(text.slice(0, cut + 1)).length;
        text = text.slice(cut + 1);
      }
      paintText(false);
    }
    done = answer.run_ended && answer.at_end;
    paintInfo(answer);
    if (!answer.at_end) poller.now(); // more to read at once
  }

  async function loadEarlier() {
    const from = Math.max(0, start - CHUNK);
    try {
      const answer = await api.get(`${base}/runs/${attempt}/log`, { stream, offset: from, limit: start - from });
      text = answer.text + text;
      start = answer.offset;
      paintText(false);
      paintInfo(answer);
    } catch (err) {
      replace(message, errorNotice(err));
    }
  }

  async function load() {
    replace(message);
    try {
      await tail();
    } catch (err) {
      text = "";
      paintText(true);
      replace(info);
      replace(message, err.status === 404 ? notice("muted", err.message) : errorNotice(err));
      done = err.status === 404;
    }
    paintLinks();
  }

  runSelect.addEventListener("change", () => {
    attempt = Number(runSelect.value);
    stream = "";
    load();
  });
  streamSelect.addEventListener("change", () => {
    stream = streamSelect.value;
    load();
  });
  followBox.addEventListener("change", () => {
    if (followBox.checked) {
      pre.scrollTop = pre.scrollHeight;
      poller.now();
    }
  });
  wrapBox.addEventListener("change", () => pre.classList.toggle("wrap", wrapBox.checked));
  filter.addEventListener("input", () => paintText(false));

  const poller = new Poller(more, { interval: 1000, maxBackoff: 15000, onStatus: (st) => live.update(st) });
  await load();
  ctx.ready();
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}
