// Create a job, or edit one's spec. The API's validation errors (RFC 9457 problem documents
// whose ``errors`` name the field each message is about) are shown on their fields. An edit shows
// the changes against the spec it was opened on before it saves them, saves only what changed,
// with ``If-Match: <spec_version>`` (a concurrent edit is refused, not overwritten) and an
// Idempotency-Key (a retry after a lost answer does not apply, or restart, twice). Every saved
// edit is a new revision of the job (its page lists them and rolls back to any).

import * as api from "../api.js";
import * as session from "../session.js";
import { h, replace } from "../dom.js";
import { button, changesTable, errorNotice, modal, notice, pageHeader, section, toast } from "../components.js";

/** the spec fields whose change replaces a running job's application (an upgrade) */
const RESTART_FIELDS = new Set(["entrypoint", "args", "conf", "checkpoint_location"]);
/** the spec fields the form edits, in the order a diff lists them */
const SPEC_FIELDS = ["entrypoint", "args", "conf", "team", "business", "priority", "checkpoint_location", "labels", "replicate", "stall_after", "on_stall"];

export async function render(root, ctx) {
  const editing = ctx.params.name !== undefined;
  const name = ctx.params.name;
  const message = h("div", {});
  let job = null;
  if (editing) {
    try {
      job = await api.get(`/v1/jobs/${api.seg(name)}`);
    } catch (err) {
      replace(root, pageHeader(`Edit ${name}`), errorNotice(err));
      ctx.ready();
      return null;
    }
    if (!session.can("job.write", job.team)) {
      replace(root, pageHeader(`Edit ${name}`), notice("error", `You may not change the jobs of team ${job.team}.`));
      ctx.ready();
      return null;
    }
  }

  // -- the fields ------------------------------------------------------------------------------
  const fields = new Map(); // field -> {wrap, input, errors}
  const field = (key, label, input, help) => {
    const errors = h("div", { class: "field-errors", id: `error-${key}`, dataset: { testid: `error-${key}` }, role: "alert" });
    input.setAttribute("aria-describedby", `error-${key}`);
    const wrap = h("label", { class: "field", dataset: { field: key } }, h("span", {}, label), input, help ? h("small", { class: "help" }, help) : null, errors);
    fields.set(key, { wrap, input, errors });
    return wrap;
  };
  const text = (key, attrs = {}) => h("input", { type: "text", name: key, autocomplete: "off", spellcheck: "false", ...attrs });
  const area = (key, rows, attrs = {}) => h("textarea", { name: key, rows, spellcheck: "false", ...attrs });
  const choice = (key, options, current) =>
    h("select", { name: key }, options.map(([value, label]) => h("option", { value, selected: value === current }, label)));

  const inputs = {
    name: text("name", { required: true, placeholder: "orders-enrich", dataset: { testid: "field-name" } }),
    group: h("select", { name: "group", dataset: { testid: "field-group" } }),
    team: text("team", { list: "form-teams", placeholder: "the owning team" }),
    business: text("business", { placeholder: "its submission quota (empty: none)" }),
    priority: choice("priority", [["high", "high"], ["normal", "normal"], ["low", "low"]], "normal"),
    entrypoint: text("entrypoint", { required: true, placeholder: "/opt/pipelines/orders_enrich.py", dataset: { testid: "field-entrypoint" } }),
    args: area("args", 3, { placeholder: "one argument a line", dataset: { testid: "field-args" } }),
    conf: area("conf", 4, { placeholder: "spark.executor.memory=2g\none property a line", dataset: { testid: "field-conf" } }),
    labels: area("labels", 2, { placeholder: "env=prod\none label a line", dataset: { testid: "field-labels" } }),
    checkpoint_location: text("checkpoint_location", { placeholder: "empty: under the cluster's storage root" }),
    stall_after: h("input", { type: "number", name: "stall_after", min: 1, step: "any", placeholder: "automatic" }),
    on_stall: choice("on_stall", [["alert", "alert"], ["restart", "restart"]], "alert"),
    replicate: choice("replicate", [["", "the group's default"], ["true", "yes"], ["false", "no"]], ""),
  };
  const startNow = h("input", { type: "checkbox", name: "start", dataset: { testid: "field-start" } });
  const rollbackAfter = h("input", { type: "number", name: "rollback_after_seconds", min: 1, step: "any", placeholder: "no automatic rollback" });
  const teamList = h("datalist", { id: "form-teams" });

  const fill = (spec) => {
    inputs.team.value = spec.team || "";
    inputs.business.value = spec.business || "";
    inputs.priority.value = spec.priority || "normal";
    inputs.entrypoint.value = spec.entrypoint || "";
    inputs.args.value = (spec.args || []).join("\n");
    inputs.conf.value = Object.entries(spec.conf || {})
      .map(([k, v]) => `${k}=${v}`)
      .join("\n");
    inputs.labels.value = Object.entries(spec.labels || {})
      .map(([k, v]) => (v === "" ? k : `${k}=${v}`))
      .join("\n");
    inputs.checkpoint_location.value = spec.checkpoint_location || "";
    inputs.stall_after.value = spec.stall_after === null || spec.stall_after === undefined ? "" : String(spec.stall_after);
    inputs.on_stall.value = spec.on_stall || "alert";
    inputs.replicate.value = spec.replicate === null || spec.replicate === undefined ? "" : String(spec.replicate);
  };
  if (job) fill(job);
  else {
    const mine = (session.whoami()?.permissions?.["job.write"] || []).filter((t) => t !== "*");
    if (mine.length === 1) inputs.team.value = mine[0];
  }

  const save = button(editing ? "Review changes…" : "Create job", null, { kind: "primary", type: "submit", testid: "form-save" });
  const form = h(
    "form",
    { class: "job-form", "aria-label": editing ? `Edit ${name}` : "New job", novalidate: true },
    message,
    section(
      "Job",
      h(
        "div",
        { class: "form-grid" },
        editing ? null : field("name", "Name", inputs.name, "letters, digits, . _ -; unique"),
        editing ? null : field("group", "Group", inputs.group, "its clusters and the nodes that manage it"),
        field("team", "Team", inputs.team),
        field("business", "Business", inputs.business),
        field("priority", "Priority", inputs.priority),
      ),
    ),
    section(
      "Application",
      field("entrypoint", "Entrypoint", inputs.entrypoint, "the pipeline file: a path or a file:// URL ending in .py"),
      h("div", { class: "form-grid" }, field("args", "Arguments", inputs.args), field("conf", "Spark properties", inputs.conf)),
      field("checkpoint_location", "Checkpoint location", inputs.checkpoint_location),
    ),
    section(
      "Operations",
      h(
        "div",
        { class: "form-grid" },
        field("labels", "Labels", inputs.labels, "key=value, one a line"),
        field("stall_after", "Stall after (s)", inputs.stall_after),
        field("on_stall", "On stall", inputs.on_stall),
        field("replicate", "Replicate its checkpoint", inputs.replicate),
      ),
      editing
        ? field("rollback_after_seconds", "Upgrade: roll back unless RUNNING within (s)", rollbackAfter, "for a change that restarts a running job")
        : h("label", { class: "checks" }, startNow, "Start it now (desired state RUNNING)"),
    ),
    h("div", { class: "form-actions" }, save, h("a", { class: "btn btn-ghost", href: editing ? `#/jobs/${api.seg(name)}` : "#/jobs" }, "Cancel")),
    teamList,
  );

  replace(
    root,
    pageHeader(editing ? `Edit ${name}` : "New job", {
      subtitle: editing ? `spec version ${job.spec_version} · every saved change is a new revision` : "a long-running PySpark pipeline Drover keeps running",
    }),
    form,
  );

  // the choices: groups and teams, beside the form
  if (!editing) {
    api
      .get("/v1/groups", { limit: 1000 })
      .then((page) => {
        const names = (page.data || []).map((g) => g.name);
        replace(inputs.group, names.map((g) => h("option", { value: g, selected: g === "default" }, g)));
      })
      .catch((err) => replace(message, errorNotice(err)));
  }
  api
    .get("/v1/teams", { limit: 1000 })
    .then((page) => replace(teamList, (page.data || []).map((t) => h("option", { value: t.name }))))
    .catch(() => {});

  // -- reading the form ------------------------------------------------------------------------
  function showErrors(byField, general) {
    for (const [key, f] of fields) {
      const msgs = byField.get(key) || [];
      replace(f.errors, msgs.map((m) => h("div", {}, m)));
      f.wrap.classList.toggle("invalid", msgs.length > 0);
      if (msgs.length) f.input.setAttribute("aria-invalid", "true");
      else f.input.removeAttribute("aria-invalid");
    }
    const elsewhere = [...byField.entries()].filter(([key]) => !fields.has(key)).flatMap(([key, msgs]) => msgs.map((m) => (key ? `${key}: ${m}` : m)));
    replace(message, general ? errorNotice(general) : null, elsewhere.length ? notice("error", elsewhere.join("; ")) : null);
    const first = [...fields.entries()].find(([key]) => byField.has(key));
    if (first) first[1].input.focus();
  }

  /** The spec the form says, and the problems found reading it (field -> [message]). */
  function read() {
    const problems = new Map();
    const complain = (key, msg) => {
      if (!problems.has(key)) problems.set(key, []);
      problems.get(key).push(msg);
    };
    const pairs = (key, allowBare) => {
      const out = {};
      inputs[key].value.split("\n").forEach((line, i) => {
        const t = line.trim();
        if (!t) return;
        const at = t.indexOf("=");
        if (at < 0 && !allowBare) complain(key, `line ${i + 1}: write key=value`);
        else if (at === 0) complain(key, `line ${i + 1}: the key is missing`);
        else if (at < 0) out[t] = "";
        else out[t.slice(0, at).trim()] = t.slice(at + 1).trim();
      });
      return out;
    };
    const spec = {
      team: inputs.team.value.trim(),
      business: inputs.business.value.trim(),
      priority: inputs.priority.value,
      entrypoint: inputs.entrypoint.value.trim(),
      args: inputs.args.value.split("\n").map((a) => a.trim()).filter(Boolean),
      conf: pairs("conf", false),
      labels: pairs("labels", true),
      checkpoint_location: inputs.checkpoint_location.value.trim(),
      on_stall: inputs.on_stall.value,
      replicate: inputs.replicate.value === "" ? null : inputs.replicate.value === "true",
      stall_after: inputs.stall_after.value === "" ? null : Number(inputs.stall_after.value),
    };
    if (spec.stall_after !== null && !Number.isFinite(spec.stall_after)) complain("stall_after", "a number of seconds");
    return { spec, problems };
  }

  // -- saving ----------------------------------------------------------------------------------
  async function create(spec) {
    const body = { name: inputs.name.value.trim(), group: inputs.group.value || "default", ...spec, desired_state: startNow.checked ? "RUNNING" : "STOPPED" };
    if (body.replicate === null) delete body.replicate;
    if (body.stall_after === null) delete body.stall_after;
    const created = await api.post("/v1/jobs", body, { idempotencyKey: key });
    toast(`${created.name} created${startNow.checked ? ": starting" : ""}`, "ok");
    ctx.navigate(`/jobs/${api.seg(created.name)}`);
  }

  async function edit(spec) {
    const changes = specChanges(job, spec);
    if (!changes.length) {
      replace(message, notice("muted", "Nothing changed."));
      return;
    }
    const fieldsChanged = new Set(changes.map((c) => c.path.split(".")[0]));
    const body = {};
    for (const f of fieldsChanged) body[f] = spec[f];
    const upgrade = [...fieldsChanged].some((f) => RESTART_FIELDS.has(f)) && ["RUNNING", "STARTING", "SUBMITTING", "QUEUED"].includes(job.state);
    const query = {};
    if (upgrade && rollbackAfter.value) query.rollback_after_seconds = rollbackAfter.value;
    let outcome = null;
    await modal({
      title: `Save ${changes.length} change${changes.length === 1 ? "" : "s"} to ${name}?`,
      wide: true,
      testid: "review",
      body: [
        h("p", {}, `From spec version ${job.spec_version} to a new revision:`),
        changesTable(changes),
        upgrade ? notice("warn", `This is an upgrade: the running application is stopped gracefully and started again with the new spec from the same checkpoint${query.rollback_after_seconds ? `, and rolled back by itself unless RUNNING within ${query.rollback_after_seconds} s` : ""}.`) : null,
      ],
      actions: [
        {
          label: "Save",
          kind: "primary",
          testid: "review-save",
          value: "saved",
          busy: "Saving…",
          run: async (status) => {
            try {
              job = await api.call("PATCH", `/v1/jobs/${api.seg(name)}`, { body, query, ifMatch: job.spec_version, idempotencyKey: key });
              outcome = "saved";
              return true;
            } catch (err) {
              if (err.status === 412) {
                replace(status, notice("error", "Someone changed this job since you opened the form: reload it to see their change, then edit again."));
                return false;
              }
              if (err.status === 422) {
                showErrors(err.fieldErrors(), (err.problem.errors || []).length ? null : err);
                outcome = "invalid";
                return true; // back to the form, errors on their fields
              }
              throw err;
            }
          },
        },
      ],
    });
    if (outcome !== "saved") return;
    toast(`${name}: revision ${job.spec_version} saved`, "ok");
    ctx.navigate(`/jobs/${api.seg(name)}`);
  }

  let key = api.newIdempotencyKey();
  let lastBody = null;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const { spec, problems } = read();
    if (!editing && !inputs.name.value.trim()) problems.set("name", ["a name is needed"]);
    if (!spec.entrypoint) problems.set("entrypoint", ["an entrypoint is needed"]);
    showErrors(problems, null);
    if (problems.size) return;
    // a new intent (the form changed since the last attempt) gets a new key
    const intent = JSON.stringify([inputs.name.value, inputs.group.value, startNow.checked, spec]);
    if (intent !== lastBody) key = api.newIdempotencyKey();
    lastBody = intent;
    save.disabled = true;
    try {
      await (editing ? edit(spec) : create(spec));
    } catch (err) {
      if (err.status === 409 && !editing) showErrors(new Map([["name", [err.message]]]), null);
      else if (err.status === 422 && (err.problem.errors || []).length) showErrors(err.fieldErrors(), null);
      else showErrors(new Map(), err);
    } finally {
      save.disabled = false;
    }
  });

  ctx.ready();
  (editing ? inputs.entrypoint : inputs.name).focus();
  return null;
}

/** The changes from ``job``'s spec to ``spec``, as the API's revision diffs list them. */
export function specChanges(job, spec) {
  const out = [];
  const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  for (const key of SPEC_FIELDS) {
    const before = job[key];
    const after = spec[key];
    if (key === "conf" || key === "labels") {
      const keys = [...new Set([...Object.keys(before || {}), ...Object.keys(after || {})])].sort();
      for (const k of keys) {
        const b = (before || {})[k];
        const a = (after || {})[k];
        if (b === a) continue;
        out.push({ path: `${key}.${k}`, kind: b === undefined ? "added" : a === undefined ? "removed" : "changed", before: b ?? null, after: a ?? null });
      }
    } else if (!same(before, after)) {
      out.push({ path: key, kind: "changed", before: before ?? null, after: after ?? null });
    }
  }
  return out;
}
