/**
 * Run ownership when several coordinators share one store (PostgreSQL). Each open run is driven by one coordinator
 * at a time, which holds a lease on it with a fencing epoch (SharedRunStore). This part keeps this coordinator's
 * side of that: it announces itself in the directory, renews the leases of the runs it holds, notices the runs it
 * lost while it was paused, takes over the runs of coordinators that stopped renewing, and says where a request for
 * a run must go: here, or to the coordinator that holds it.
 *
 * With the embedded SQLite store there is one coordinator and every run is local; none of this runs.
 */
import { clock } from "../clock.js";
import type { SharedRunStore } from "../store/run-store.js";
import type { Logger } from "./engine-types.js";
import type { StoreOutage } from "./store-outage.js";

/** Where requests for a run are served. */
export type RunPlace = { local: true } | { local: false; owner: string; endpoint: string | null };

export interface OwnershipOptions {
  shared: SharedRunStore;
  instanceId: string;
  log: Logger;
  /** How long a coordinator's hold on its runs lasts without renewal (ms). */
  runLeaseMs: number;
  /** This coordinator's endpoint, once it listens (for the directory). */
  endpoint: () => string | undefined;
  /** Called with runs taken over from a coordinator that stopped renewing: they need recovering. */
  onTakenOver: (runIds: string[]) => void;
  /** Called with runs another coordinator took over from this one. */
  onLost: (runIds: string[]) => void;
  /** The engine's view of the database being down: ticks back off while it is (store-outage.ts). */
  outage?: StoreOutage;
}

export class RunOwnership {
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private stopped = false;
  private renewedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly o: OwnershipOptions) {
    o.shared.attach(o.instanceId, o.runLeaseMs);
  }

  /** Announces this coordinator, takes over orphaned runs, then renews on a timer (three times per lease). */
  async start(): Promise<void> {
    await this.tick();
    // Renewal is due three times per lease; runs let go by a coordinator that stopped cleanly are looked for every
    // second whatever the lease, so they move at once.
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.min(1000, Math.floor(this.o.runLeaseMs / 3))));
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }

  /** On a clean stop: lets this coordinator's open runs go at once, for the others to take over. */
  async release(): Promise<void> {
    try {
      const released = await this.o.shared.release(clock.now());
      if (released.length > 0) this.o.log.info({ runs: released.length }, "let go of open runs on stopping; other coordinators take them over");
    } catch (err) {
      this.o.log.warn({ err }, "could not let go of runs on stopping; they are taken over when their leases run out");
    }
  }

  /** Announces this coordinator's endpoint now (it just became known). */
  async announce(): Promise<void> {
    try {
      await this.o.shared.announce(this.o.endpoint() ?? null, clock.now(), this.o.runLeaseMs);
    } catch (err) {
      if (!this.o.outage?.failed(err, "announcing this coordinator")) this.o.log.warn({ err }, "announcing this coordinator failed; the next renewal tries again");
    }
  }

  /** One round: announce, renew what is held (and hear what was lost), take over what others left. */
  async tick(): Promise<void> {
    if (this.ticking || this.stopped || this.o.outage?.waiting()) return;
    this.ticking = true;
    const { shared, log } = this.o;
    try {
      const now = clock.now();
      if (now - this.renewedAt >= this.o.runLeaseMs / 3) {
        // A renewal that fails (the database is down) changes nothing held: the runs are neither dropped nor
        // assumed still ours past their lease (the store stops vouching for them then), and the next tick tries
        // again. Renewed first: the directory entry matters less.
        const { lost } = await shared.renew(now);
        this.o.outage?.ok();
        this.renewedAt = now;
        if (lost.length > 0) {
          log.warn({ runs: lost.length }, "another coordinator took over runs this one held (it was paused, or cut off from the database, past its lease)");
          this.o.onLost(lost);
        }
        await shared.announce(this.o.endpoint() ?? null, now, this.o.runLeaseMs);
      }
      for (;;) {
        const taken = await shared.takeOver(clock.now(), 100);
        if (taken.length === 0) break;
        log.info({ runs: taken.length }, "took over runs of a coordinator that stopped renewing its leases");
        this.o.onTakenOver(taken);
        if (taken.length < 100) break;
      }
    } catch (err) {
      if (!this.o.outage?.failed(err, "renewing run leases")) log.error({ err }, "renewing run leases failed");
    } finally {
      this.ticking = false;
    }
  }

  /**
   * Where requests for a run go: here when this coordinator holds it (or takes it over now, its holder having
   * stopped renewing), otherwise the holder's endpoint. Undefined when the run is unknown to the store.
   */
  async placeOf(runId: string): Promise<RunPlace | undefined> {
    const { shared } = this.o;
    if (shared.holds(runId)) return { local: true };
    for (let i = 0; i < 3; i++) {
      const owner = await shared.ownerOf(runId);
      if (owner && owner.owner === this.o.instanceId && shared.holds(runId)) return { local: true };
      if (owner && owner.owner !== this.o.instanceId && owner.expires_at > clock.now()) {
        // A holder that has not announced its address yet (it is starting): the caller is asked to try again.
        if (!owner.endpoint) return { local: false, owner: owner.owner, endpoint: null };
        return { local: false, owner: owner.owner, endpoint: owner.endpoint };
      }
      // Nobody holds it live (its holder died, or never announced an endpoint): take it here.
      const taken = await shared.takeOver(clock.now(), 1, [runId]);
      if (taken.includes(runId)) {
        this.o.onTakenOver(taken);
        return { local: true };
      }
      if (!owner) return undefined;
    }
    return undefined;
  }
}
