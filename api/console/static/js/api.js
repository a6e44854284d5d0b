// The public API, as the console uses it: bearer token, problem documents, idempotency keys.
//
// Every call carries the session's token and, on writes, the X-Drover-Client header the API
// asks of mutations without a JSON body. Errors come back as RFC 9457 problem documents; they
// are thrown as ApiError with the document's detail (and, for invalid input, which field each
// message is about), so a page can say what went wrong and where.
//
// The console ships in the same package as the API it calls, so it knows the node's routes: it
// never downloads the node's OpenAPI document (a megabyte) to find them out.

import * as session from "./session.js";

const TIMEOUT_MS = 15000;

export class ApiError extends Error {
  constructor(status, problem, path) {
    const detail = (problem && (problem.detail || problem.title)) || `HTTP ${status}`;
    super(detail);
    this.status = status;
    this.problem = problem || {};
    this.path = path;
    this.kind = (this.problem.type || "").replace("urn:drover:problem:", "") || `http-${status}`;
  }

  /**
   * The problem's messages by the request body's top-level field ("entrypoint", "labels", ...):
   * a Map field -> [message]. Each entry of the problem's ``errors`` names its field by a JSON
   * pointer into the body (``pointer``: "/labels/env") or by its location (["body", "labels",
   * "env"]); messages about the body as a whole are under "".
   */
  fieldErrors() {
    const out = new Map();
    for (const e of this.problem.errors || []) {
      const field = fieldOf(e);
      if (!out.has(field)) out.set(field, []);
      out.get(field).push(e.message || e.detail || e.msg || "invalid");
    }
    return out;
  }
}

function fieldOf(entry) {
  if (typeof entry.pointer === "string") {
    const parts = entry.pointer.replace(/^#/, "").split("/").filter(Boolean);
    return (parts[0] || "").replace(/~1/g, "/").replace(/~0/g, "~");
  }
  const where = Array.isArray(entry.location) ? entry.location : Array.isArray(entry.loc) ? entry.loc : [];
  const rest = where[0] === "body" ? where.slice(1) : where;
  return rest.length ? String(rest[0]) : "";
}

/**
 * A new Idempotency-Key: a retry of the same write sends the same key, so the node answers the
 * first outcome again instead of acting twice (crypto.getRandomValues works on plain http too).
 */
export function newIdempotencyKey() {
  const bytes = new Uint8Array(16);
  window.crypto.getRandomValues(bytes);
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function url(path, query) {
  const u = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(query || {})) {
    if (value === null || value === undefined || value === "") continue;
    if (Array.isArray(value)) {
      for (const v of value) u.searchParams.append(key, v);
    } else {
      u.searchParams.set(key, String(value));
    }
  }
  return u.pathname + u.search;
}

/** One API call: resolves to the parsed JSON body (null for 204), throws ApiError otherwise. */
export async function call(method, path, { query, body, ifMatch, idempotencyKey, token, signal } = {}) {
  const headers = { Accept: "application/json" };
  const credential = token || session.token();
  if (credential) headers.Authorization = `Bearer ${credential}`;
  if (method !== "GET") headers["X-Drover-Client"] = "console";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (ifMatch !== undefined && ifMatch !== null) headers["If-Match"] = `"${ifMatch}"`;
  if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
  if (signal) signal.addEventListener("abort", () => controller.abort(), { once: true });
  const target = url(path, query);
  let response;
  try {
    response = await fetch(target, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: controller.signal,
      credentials: "omit", // the token is the only credential; no cookies
      cache: "no-store",
    });
  } catch (err) {
    const why = controller.signal.aborted ? "no answer in time" : "the node cannot be reached";
    throw new ApiError(0, { title: why, detail: `${why} (${method} ${path})` }, path);
  } finally {
    clearTimeout(timer);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text.slice(0, 300) };
    }
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data, path);
    if (response.status === 401 && !token) session.expired(error.message);
    throw error;
  }
  return data;
}

export const get = (path, query, opts) => call("GET", path, { ...opts, query });
export const post = (path, body, opts) => call("POST", path, { ...opts, body });
export const patch = (path, body, opts) => call("PATCH", path, { ...opts, body });
export const put = (path, body, opts) => call("PUT", path, { ...opts, body });
export const del = (path, opts) => call("DELETE", path, opts);

/** Path segment escaping for names of any script. */
export const seg = (name) => encodeURIComponent(name);
