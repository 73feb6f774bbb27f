/**
 * Fans committed events out to live followers in memory. Each event is serialised at most once, however many follow it,
 * and followers never query the store for live events.
 */
import type { RunEvent } from "@nodefabric/schemas";

/** A committed event with its NDJSON line, encoded once, when a follower first writes it. */
export interface HubEvent {
  readonly event: RunEvent;
  readonly line: string;
}

/**
 * The line is encoded on first use: most followers write only some events (a composite's stream asks for two types
 * of a fan-out's seven events per child), and `Prefer: wait` writes none.
 */
class CommittedEvent implements HubEvent {
  private encoded?: string;
  constructor(readonly event: RunEvent) {}
  get line(): string {
    return (this.encoded ??= `${JSON.stringify(this.event)}\n`);
  }
}

export type HubListener = (e: HubEvent) => void;

/** Per-run subscriptions to committed events. */
export class EventHub {
  private readonly byRun = new Map<string, Set<HubListener>>();

  /** Follows a run's events; returns the function that stops following. */
  subscribe(runId: string, listener: HubListener): () => void {
    let set = this.byRun.get(runId);
    if (!set) {
      set = new Set();
      this.byRun.set(runId, set);
    }
    set.add(listener);
    return () => {
      const s = this.byRun.get(runId);
      if (!s) return;
      s.delete(listener);
      if (s.size === 0) this.byRun.delete(runId);
    };
  }

  /** Delivers committed events, in order, to their runs' followers. */
  publish(events: RunEvent[]): void {
    for (const event of events) {
      const set = this.byRun.get(event.run_id);
      if (!set || set.size === 0) continue;
      const e: HubEvent = new CommittedEvent(event);
      for (const l of [...set]) l(e);
    }
  }

  /** Whether anyone here follows the run. */
  isFollowed(runId: string): boolean {
    return (this.byRun.get(runId)?.size ?? 0) > 0;
  }

  /** The runs someone here follows. */
  followedRuns(): string[] {
    return [...this.byRun.keys()];
  }

  /** How many followers are attached (health and tests). */
  followers(): number {
    let n = 0;
    for (const s of this.byRun.values()) n += s.size;
    return n;
  }
}
