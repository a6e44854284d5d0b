// Teams and tokens: the teams the caller may see with their members' roles, and API tokens
// (every token for a platform admin, one's own otherwise). A new token's secret is shown once,
// in this page only, and never again (the node keeps only its hash); revoking takes effect at
// the next request made with it.

import * as api from "../api.js";
import * as session from "../session.js";
import { datetime, h, num, replace, when } from "../dom.js";
import { button, confirm, errorNotice, notice, pageHeader, section, table, toast } from "../components.js";

const LIFETIMES = [
  ["86400", "1 day"],
  ["2592000", "30 days"],
  ["7776000", "90 days"],
  ["31536000", "1 year"],
  ["", "never expires"],
];

export async function render(root, ctx) {
  const teamsEl = h("div", {});
  const tokensEl = h("div", {});
  const secretEl = h("div", { dataset: { testid: "token-secret-box" } });
  const me = session.whoami();
  let tokenCursors = [null];

  // -- create a token ---------------------------------------------------------------------------
  const identity = h("input", { type: "text", name: "identity", value: me.identity || "", placeholder: "identity", size: 16, dataset: { testid: "token-identity" } });
  const description = h("input", { type: "text", name: "description", placeholder: "what it is for (e.g. ci-deploy)", size: 28, dataset: { testid: "token-description" } });
  const lifetime = h("select", { name: "expires_in_seconds", "aria-label": "Lifetime" }, LIFETIMES.map(([v, label]) => h("option", { value: v, selected: v === "2592000" }, label)));
  const writeScope = h("input", { type: "checkbox", name: "write", checked: true });
  const create = button("Create token", null, { kind: "primary", type: "submit", testid: "token-create" });
  const form = h(
    "form",
    { class: "toolbar", "aria-label": "Create a token" },
    h("label", { class: "inline" }, "For ", identity),
    description,
    lifetime,
    h("label", { class: "checks" }, writeScope, "may write (else read-only)"),
    create,
  );
  if (!session.can("platform.admin")) {
    identity.disabled = true; // one's own tokens only
    identity.title = "Your own identity: creating tokens for others needs the platform admin role";
  }
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    create.disabled = true;
    const body = {
      scopes: writeScope.checked ? ["read", "write"] : ["read"],
      expires_in_seconds: lifetime.value ? Number(lifetime.value) : null,
      description: description.value.trim(),
    };
    if (identity.value.trim() && identity.value.trim() !== me.identity) body.identity = identity.value.trim();
    try {
      const made = await api.post("/v1/tokens", body);
      showSecret(made);
      description.value = "";
      await loadTokens();
    } catch (err) {
      replace(secretEl, errorNotice(err));
    } finally {
      create.disabled = false;
    }
  });

  /** The secret, once: with a copy button and the warning that it is not shown again. */
  function showSecret(made) {
    const field = h("input", { type: "text", readonly: true, value: made.token, class: "secret", size: 60, "aria-label": "The new token", dataset: { testid: "token-secret" } });
    const copy = button("Copy", async () => {
      field.select();
      try {
        await navigator.clipboard.writeText(made.token);
        toast("Copied", "ok", 2000);
      } catch {
        toast("Select the text and copy it (the browser refused the clipboard here)", "info", 5000);
      }
    });
    const hide = button("I have stored it", () => replace(secretEl), { kind: "ghost", testid: "token-secret-done" });
    replace(
      secretEl,
      notice(
        "warn",
        h("strong", {}, `Token #${made.id} for ${made.identity}: copy it now. `),
        "It is shown this once; the node keeps only its hash. Anyone holding it acts as ",
        made.identity,
        ".",
        h("div", { class: "secret-row" }, field, copy, hide),
      ),
    );
    field.focus();
    field.select();
  }

  replace(
    root,
    pageHeader("Teams & tokens", { subtitle: `signed in as ${me.subject}` }),
    section("API tokens", form, secretEl, tokensEl),
    section("Teams", teamsEl),
  );

  async function revoke(t) {
    const ok = await confirm({
      title: `Revoke token #${t.id} (${t.prefix}…) of ${t.identity}?`,
      body: t.identity === me.identity && t.prefix && session.token() && session.token().startsWith(t.prefix) ? "This is the token this console is signed in with: you will be signed out." : "Every request made with it is refused from now on. This cannot be undone.",
      confirmLabel: "Revoke",
      danger: true,
    });
    if (!ok) return;
    try {
      await api.del(`/v1/tokens/${t.id}`);
      toast(`Token #${t.id} revoked`, "ok");
    } catch (err) {
      toast(`Refused: ${err.message}`, "error", 10000);
    }
    if (session.token()) await loadTokens();
  }

  async function loadTokens() {
    const q = { limit: 50, count: true };
    const cursor = tokenCursors[tokenCursors.length - 1];
    if (cursor) q.cursor = cursor;
    const page = await api.get("/v1/tokens", q);
    if (!ctx.current()) return;
    const now = Date.now();
    const state = (t) => (t.revoked_at ? "revoked" : t.expires_at && new Date(t.expires_at).getTime() < now ? "expired" : "active");
    const mine = (t) => t.identity === me.identity;
    replace(
      tokensEl,
      h("p", { class: "muted" }, session.can("platform.admin") ? `Every token (${num(page.count)}).` : `Your tokens (${num(page.count)}).`),
      table(
        [
          { label: "#", cell: (t) => String(t.id) },
          { label: "Identity", cell: (t) => t.identity },
          { label: "Starts with", cell: (t) => h("code", {}, `${t.prefix}…`) },
          { label: "Scopes", cell: (t) => t.scopes.join(", ") },
          { label: "Description", cell: (t) => t.description || h("span", { class: "muted" }, "—"), class: "wrap" },
          { label: "Created", cell: (t) => h("span", { title: `${datetime(t.created_at)} by ${t.created_by}` }, when(t.created_at)) },
          { label: "Expires", cell: (t) => (t.expires_at ? datetime(t.expires_at) : "never") },
          { label: "State", cell: (t) => h("span", { class: ["badge", state(t) === "active" ? "state-running" : "state-stopped"], dataset: { state: state(t) } }, state(t)) },
          {
            label: "",
            cell: (t) => (state(t) === "active" && (mine(t) || session.can("platform.admin")) ? button("Revoke", () => revoke(t), { kind: "danger", testid: "token-revoke" }) : ""),
          },
        ],
        page.data || [],
        { empty: "No tokens.", rowAttrs: (t) => ({ dataset: { token: t.id, state: state(t) } }) },
      ),
      h(
        "div",
        { class: "pager" },
        button("‹ Previous", () => {
          tokenCursors.pop();
          loadTokens().catch((err) => replace(tokensEl, errorNotice(err)));
        }, { disabled: tokenCursors.length <= 1 }),
        button("Next ›", () => {
          tokenCursors.push(page.next_cursor);
          loadTokens().catch((err) => replace(tokensEl, errorNotice(err)));
        }, { disabled: !page.next_cursor }),
      ),
    );
  }

  async function loadTeams() {
    const page = await api.get("/v1/teams", { limit: 200, count: true });
    if (!ctx.current()) return;
    replace(
      teamsEl,
      table(
        [
          { label: "Team", cell: (t) => h("strong", {}, t.name) },
          { label: "Description", cell: (t) => t.description || h("span", { class: "muted" }, "—"), class: "wrap" },
          {
            label: "Members",
            class: "wrap",
            cell: (t) => {
              const members = Object.entries(t.members || {});
              return members.length ? members.map(([who, role]) => h("span", { class: "member" }, who, " ", h("span", { class: `role-${role}` }, role))) : h("span", { class: "muted" }, "none");
            },
          },
          { label: "Your role", cell: (t) => (me.roles || {})[t.name] || ((me.roles || {})["*"] ? `${me.roles["*"]} (every team)` : "—") },
          { label: "Jobs", cell: (t) => h("a", { href: `#/jobs?team=${api.seg(t.name)}` }, "its jobs") },
          { label: "Created", cell: (t) => when(t.created_at) },
        ],
        page.data || [],
        { empty: "No teams you may see.", rowAttrs: (t) => ({ dataset: { team: t.name } }) },
      ),
    );
  }

  try {
    await Promise.all([loadTokens(), loadTeams()]);
  } catch (err) {
    replace(tokensEl, errorNotice(err));
  }
  ctx.ready();
  return null;
}
