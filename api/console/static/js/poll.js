// Keeping a page live without reloading: call a function every few seconds, back off when the
// node does not answer, pause while the tab is hidden.
//
// One Poller per page; the router stops it when the page changes. ``fn`` runs again only after
// the previous call has finished (no pile-up behind a slow node).

export class Poller {
  /**
   * @param fn async function doing one refresh (throws on failure)
   * @param interval ms between successful refreshes
   * @param maxBackoff ms: the longest wait after repeated failures
   * @param onStatus called with {ok, error, next} after each attempt (the "live" indicator)
   */
  constructor(fn, { interval = 3000, maxBackoff = 30000, onStatus = () => {} } = {}) {
    this.fn = fn;
    this.interval = interval;
    this.maxBackoff = maxBackoff;
    this.onStatus = onStatus;
    this.delay = interval;
    this.failures = 0;
    this.timer = null;
    this.running = false;
    this.stopped = true;
    this.visibility = () => {
      if (document.visibilityState === "visible" && !this.stopped) this.now();
    };
  }

  start({ immediately = false } = {}) {
    this.stopped = false;
    document.addEventListener("visibilitychange", this.visibility);
    if (immediately) this.now();
    else this.schedule(this.interval);
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    document.removeEventListener("visibilitychange", this.visibility);
  }

  /** The page's first load: runs ``fn`` once, reports the outcome, throws its error. */
  async prime() {
    try {
      await this.fn();
      this.onStatus({ ok: true, error: null, next: this.interval });
    } catch (error) {
      this.onStatus({ ok: false, error, next: this.interval });
      throw error;
    }
  }

  /** Refresh now (after a write, or when the tab comes back). */
  now() {
    clearTimeout(this.timer);
    this.tick();
  }

  schedule(ms) {
    clearTimeout(this.timer);
    if (!this.stopped) this.timer = setTimeout(() => this.tick(), ms);
  }

  async tick() {
    if (this.stopped || this.running) return;
    if (document.visibilityState === "hidden") return; // resumes on visibilitychange
    this.running = true;
    try {
      await this.fn();
      this.failures = 0;
      this.delay = this.interval;
      this.onStatus({ ok: true, error: null, next: this.delay });
    } catch (error) {
      this.failures += 1;
      // exponential backoff with jitter: 2x, 4x, ... the interval, at most maxBackoff
      const base = Math.min(this.maxBackoff, this.interval * 2 ** this.failures);
      this.delay = Math.round(base * (0.8 + Math.random() * 0.4));
      this.onStatus({ ok: false, error, next: this.delay });
    } finally {
      this.running = false;
    }
    this.schedule(this.delay);
  }
}
