// The public API, as the console uses it: bearer token, problem documents, route discovery.
//
// Every call carries the session's token and, on writes, the X-Drover-Client header the API
// asks of mutations without a JSON body. Errors come back as RFC 9457 problem documents; they
// are thrown as ApiError with the document's detail, so a page can say what went wrong.

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
export async function call(method, path, { query, body, ifMatch, token, signal } = {}) {
  const headers = { Accept: "application/json" };
  const credential = token || session.token();
  if (credential) headers.Authorization = `Bearer ${credential}`;
  if (method !== "GET") headers["X-Drover-Client"] = "console";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (ifMatch !== undefined && ifMatch !== null) headers["If-Match"] = `"${ifMatch}"`;
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

// -- which routes this node has ------------------------------------------------------------------
//
// Other parts of Drover add routes over time (failovers, revisions, progress history); a page
// whose route the node does not have says "not available on this node" instead of failing. The
// node's own OpenAPI document is the list.

let routesPromise = null;

/** path template -> method -> the names of its query parameters */
export function routes() {
  if (!routesPromise) {
    routesPromise = fetch("/openapi.json", { credentials: "omit" })
      .then((r) => (r.ok ? r.json() : { paths: {} }))
      .then((doc) => {
        const out = new Map();
        for (const [path, ops] of Object.entries(doc.paths || {})) {
          const methods = new Map();
          for (const [method, op] of Object.entries(ops)) {
            const names = (op.parameters || []).filter((p) => p.in === "query").map((p) => p.name);
            methods.set(method.toUpperCase(), new Set(names));
          }
          out.set(path, methods);
        }
        return out;
      })
      .catch(() => {
        routesPromise = null; // try again next time
        return new Map();
      });
  }
  return routesPromise;
}

/** Does this node serve ``method`` on the path template ``path`` (e.g. "/v1/failovers")? */
export async function has(method, path) {
  const known = await routes();
  const ops = known.get(path);
  return Boolean(ops && ops.has(method.toUpperCase()));
}

/** Does ``method path`` take the query parameter ``name`` on this node? */
export async function accepts(method, path, name) {
  const known = await routes();
  const params = known.get(path)?.get(method.toUpperCase());
  return Boolean(params && params.has(name));
}

/** The first path template among ``candidates`` this node serves with ``method`` (or null). */
export async function first(method, ...candidates) {
  for (const path of candidates) {
    if (await has(method, path)) return path;
  }
  return null;
}

/** Path segment escaping for names of any script. */
export const seg = (name) => encodeURIComponent(name);
