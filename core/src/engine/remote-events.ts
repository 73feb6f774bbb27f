/**
 * Live events written by other coordinators of a shared store. The store tells this process of each commit (one
 * LISTEN connection for the whole process); for runs that someone here follows, the new events are read once and
 * published to the hub, so every follower of a run on this coordinator is served by one read, whoever wrote them.
 * No follower polls. Streams fill any gap themselves (event-stream.ts), so a notice may safely be read from its own
 * last seq when this process has not yet delivered anything of that run.
 */
import type { RunEvent } from "@nodefabric/schemas";
import type { RunStore, SharedRunStore } from "../store/run-store.js";
import type { EventHub } from "./event-hub.js";
import type { Logger } from "./engine-types.js";
import { trackCache } from "../observe/caches.js";

const PAGE = 1000;

export class RemoteEvents {
  /** The highest seq published here per followed run. */
  private readonly delivered = new Map<string, number>();
  /** The highest seq announced per run while a read is under way, and the reads under way. */
  private readonly wanted = new Map<string, number>();
  private readonly reading = new Set<string>();
  private unlisten: (() => void) | undefined;

  constructor(
    private readonly store: RunStore,
    private readonly shared: SharedRunStore,
    private readonly hub: EventHub,
    private readonly log: Logger,
  ) {
    trackCache("engine.remote_event_runs", this, (r) => ({ entries: r.delivered.size + r.wanted.size + r.reading.size }));
  }

  start(): void {
    this.unlisten = this.shared.onCommit((runId, seq) => this.notice(runId, seq));
  }

  stop(): void {
    this.unlisten?.();
  }

  /** Events this process wrote itself: they were published already. */
  published(events: readonly RunEvent[]): void {
    for (const e of events) {
      const d = this.delivered.get(e.run_id);
      if (d !== undefined && e.seq > d) this.delivered.set(e.run_id, e.seq);
    }
  }

  private notice(runId: string | null, seq: number): void {
    if (runId === null) {
      // Notices may have been lost with the connection: catch up every followed run.
      for (const id of this.hub.followedRuns()) {
        void this.store.lastSeq(id).then(
          (last) => this.notice(id, last),
          (err: unknown) => this.log.warn({ err, run_id: id }, "catching up with another coordinator's events failed"),
        );
      }
      return;
    }
    if (!this.hub.isFollowed(runId)) {
      this.delivered.delete(runId);
      return;
    }
    this.wanted.set(runId, Math.max(this.wanted.get(runId) ?? -1, seq));
    if (!this.reading.has(runId)) void this.read(runId);
  }

  private async read(runId: string): Promise<void> {
    this.reading.add(runId);
    try {
      for (;;) {
        const want = this.wanted.get(runId);
        if (want === undefined) break;
        let from = this.delivered.get(runId) ?? want - 1;
        if (from >= want) {
          this.wanted.delete(runId);
          break;
        }
        const page = await this.store.listEvents(runId, from, PAGE);
        if (page.length > 0) {
          from = page[page.length - 1].seq;
          this.delivered.set(runId, from);
          this.hub.publish(page);
        }
        if (page.length < PAGE) {
          // Caught up with every notice so far (a notice that came during the read asks for more).
          if ((this.wanted.get(runId) ?? -1) <= from || page.length === 0) {
            this.wanted.delete(runId);
            break;
          }
        }
      }
    } catch (err) {
      this.log.warn({ err, run_id: runId }, "reading another coordinator's events failed");
      this.wanted.delete(runId);
    } finally {
      this.reading.delete(runId);
    }
  }
}
