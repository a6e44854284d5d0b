// The signed-in caller: the token (in sessionStorage: it lives as long as the tab, never in a
// cookie, never in local storage) and what the API says the caller may do (GET /v1/whoami).

const KEY = "drover.console.token";

let me = null; // the last whoami answer
const listeners = new Set();

export function token() {
  try {
    return window.sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

export function signIn(secret, whoami) {
  window.sessionStorage.setItem(KEY, secret);
  me = whoami;
}

export function signOut(reason = "") {
  window.sessionStorage.removeItem(KEY);
  me = null;
  for (const fn of listeners) fn(reason);
}

/** The API refused the token (revoked, expired): back to the sign-in page, saying why. */
export function expired(reason) {
  if (token()) signOut(reason || "the token is no longer accepted");
}

export function onSignOut(fn) {
  listeners.add(fn);
}

export function whoami() {
  return me;
}

export function setWhoami(value) {
  me = value;
}

/**
 * May the caller take ``action`` (e.g. "job.write") on ``team``? Without a team: anywhere.
 * Decided from the API's own answer (``permissions`` of /v1/whoami: action -> teams, "*" for
 * every team), so a viewer sees no button the API would refuse.
 */
export function can(action, team) {
  const where = me && me.permissions ? me.permissions[action] : null;
  if (!where || where.length === 0) return false;
  if (team === undefined || team === null) return true;
  return where.includes("*") || where.includes(team);
}
