/**
 * The coordinator's view of its database being down: its background loops (claims, recovery, lease renewal and
 * takeover, the directory) stop trying at every tick while the store throws StoreUnavailableError, try again with a
 * backoff (250 ms doubling up to `maxDelayMs`), log once when the outage starts and once when it ends, and resume by
 * themselves. Nothing is dropped: what they would have done is still in the database, and is done when it is back
 * (docs/deploy.md, "When the database goes away").
 */
import { storeUnavailable } from "../store/store-unavailable.js";
import type { Logger } from "./engine-types.js";

const FIRST_DELAY_MS = 250;

export class StoreOutage {
  private since: number | undefined;
  private delay = 0;
  private nextAt = 0;

  constructor(
    private readonly log: Logger,
    /** Longest pause between two tries (ms). */
    private readonly maxDelayMs = 2_000,
  ) {}

  /** Whether the database is down as far as this coordinator knows. */
  get down(): boolean {
    return this.since !== undefined;
  }

  /** True while backing off: the loop skips this round. */
  waiting(): boolean {
    return this.since !== undefined && Date.now() < this.nextAt;
  }

  /** Milliseconds until the next try is due (0 when it is due now, or nothing is down). */
  dueIn(): number {
    return this.since === undefined ? 0 : Math.max(0, this.nextAt - Date.now());
  }

  /**
   * Records a failed round: true when `err` is the store being unreachable (then handled here: logged once per
   * outage), false for any other error, which the caller reports itself.
   */
  failed(err: unknown, doing: string): boolean {
    const down = storeUnavailable(err);
    if (!down) return false;
    const now = Date.now();
    if (this.since === undefined) {
      this.since = now;
      this.log.warn(
        { err: down, doing },
        "the database cannot be reached: this coordinator stops claiming work and renewing leases until it is back, and answers 503 meanwhile",
      );
    }
    this.delay = Math.min(this.maxDelayMs, Math.max(FIRST_DELAY_MS, this.delay * 2));
    this.nextAt = now + this.delay;
    return true;
  }

  /** Records a round that reached the database: an outage under way ends. */
  ok(): void {
    if (this.since === undefined) return;
    const outageMs = Date.now() - this.since;
    this.since = undefined;
    this.delay = 0;
    this.nextAt = 0;
    this.log.info({ outage_ms: outageMs }, "the database is reachable again: this coordinator resumes claiming work and renewing leases");
  }
}
