// Samples the console takes of figures the node keeps no history of (jobs by state, the largest
// replication lag): kept in memory while the console is open (a page change keeps them, a reload
// or sign-out forgets them), at most KEEP each, oldest first.

/** at one sample every 3-5 s: about two hours */
const KEEP = 1800;
const series = new Map(); // name -> [{t, values}]

/** Add a sample of ``name`` at ``t`` (ms) unless the last one is less than ``minGap`` ms old. */
export function record(name, values, { t = Date.now(), minGap = 2000 } = {}) {
  if (!series.has(name)) series.set(name, []);
  const list = series.get(name);
  if (list.length && t - list[list.length - 1].t < minGap) return list;
  list.push({ t, values });
  if (list.length > KEEP) list.splice(0, list.length - KEEP);
  return list;
}

export function samples(name) {
  return series.get(name) || [];
}

/** Forget every sample (sign-out). */
export function forget() {
  series.clear();
}
