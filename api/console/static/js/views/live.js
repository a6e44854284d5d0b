// A page kept live: its poller's first refresh awaited (a failure shown on the page), then the
// poller started, and the disposer the router calls when the page changes.

import { replace } from "../dom.js";
import { errorNotice, notice, pageHeader } from "../components.js";

/**
 * Prime `poller` (the page's Poller, reporting to the `live` indicator) and start it. A failure
 * of the first refresh is shown in `errorEl`, unless `missing(err)` replaced the whole page (the
 * thing is not there: true), in which case there is nothing to keep live. The page is ready once
 * the first refresh is over.
 * @returns the disposer (stops polling, drops the indicator), or null for a missing thing
 */
export async function keepLive(ctx, poller, { live, errorEl, missing = () => false }) {
  try {
    await poller.prime();
  } catch (err) {
    if (missing(err)) {
      ctx.ready();
      return null;
    }
    replace(errorEl, errorNotice(err));
  }
  ctx.ready();
  poller.start();
  return () => {
    poller.stop();
    live.dispose();
  };
}

/**
 * A `missing` for keepLive on the page of one thing: a 404 replaces the page (`root`) by a
 * header `title`, the error notice `text`, then `more` (a way back).
 */
export function notFoundPage(root, title, text, ...more) {
  return (err) => {
    if (err.status !== 404) return false;
    replace(root, pageHeader(title), notice("error", text), ...more);
    return true;
  };
}
