// Sign in with an API token (or an SSO JWT): checked with GET /v1/whoami, then kept in this
// tab's session storage only.

import * as api from "../api.js";
import * as session from "../session.js";
import { h, replace } from "../dom.js";
import { notice } from "../components.js";

export async function render(root, ctx) {
  const reason = ctx.query.get("reason");
  const next = ctx.query.get("next") || "";
  const input = h("input", {
    type: "password",
    name: "token",
    id: "token",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "drv_…",
    required: true,
  });
  const message = h("div", { class: "signin-message" });
  const submit = h("button", { type: "submit", class: "btn btn-primary" }, "Sign in");
  const form = h(
    "form",
    { class: "signin card", "aria-label": "Sign in" },
    h("h1", {}, "Drover ops console"),
    h(
      "p",
      { class: "subtitle" },
      "Sign in with an API token (",
      h("code", {}, "drover token create"),
      ") or your SSO token. It stays in this browser tab only and is forgotten when the tab closes.",
    ),
    reason ? notice("muted", reason) : null,
    h("label", { class: "field", for: "token" }, h("span", {}, "Token"), input),
    message,
    h("div", { class: "form-actions" }, submit),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const secret = input.value.trim();
    if (!secret) return;
    submit.disabled = true;
    replace(message);
    try {
      const me = await api.get("/v1/whoami", undefined, { token: secret });
      session.signIn(secret, me);
      const [path, search = ""] = next ? next.split("?") : ["/jobs", ""];
      ctx.navigate(path && path !== "/signin" ? path : "/jobs", Object.fromEntries(new URLSearchParams(search)));
    } catch (err) {
      const why = err.status === 401 ? "This token is not accepted (unknown, expired or revoked)." : err.message;
      replace(message, notice("error", why));
      submit.disabled = false;
      input.select();
    }
  });
  replace(root, h("div", { class: "signin-wrap" }, form));
  input.focus();
  ctx.ready();
}
