// Job commands (start, stop, restart) for one job or a selection.
//
// A selection goes through the node's bulk operation when it has one (persisted, per-item
// progress, through the submission gate); otherwise one call per job, a few at a time, each
// answer kept (accepted or the problem's detail).

import * as api from "./api.js";

const PARALLEL = 4;

export async function command(name, verb) {
  return api.post(`/v1/jobs/${api.seg(name)}/${verb}`);
}

/**
 * Run ``verb`` on every job of ``names``; ``onProgress(done, total)`` after each answer.
 * Resolves to {ok: [names], failed: [{name, error}]}.
 */
export async function runCommands(verb, names, onProgress = () => {}) {
  const ok = [];
  const failed = [];
  let next = 0;
  let done = 0;
  async function worker() {
    while (next < names.length) {
      const name = names[next++];
      try {
        await command(name, verb);
        ok.push(name);
      } catch (error) {
        failed.push({ name, error });
      }
      done += 1;
      onProgress(done, names.length);
    }
  }
  await Promise.all(Array.from({ length: Math.min(PARALLEL, names.length) }, worker));
  return { ok, failed };
}
