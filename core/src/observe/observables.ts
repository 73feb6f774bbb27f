/**
 * Values an observer reads when it asks (a Prometheus scrape): how much work waits, how much is in flight, how many
 * event followers are connected. Each service says what it can tell; the fabric hands `observe()` to its plugins.
 */

/** What one service can tell at a given moment; each field only where it applies. */
export interface ObservedValues {
  /** NodeRuns ready to be dispatched that no coordinator has sent yet (the coordinator). */
  queue_depth?: number;
  /** Seconds the oldest of those has waited, 0 with none (the coordinator). */
  queue_oldest_age_seconds?: number;
  /** NodeRuns this coordinator has sent to executors and awaits (the coordinator). */
  dispatch_in_flight?: number;
  /** NodeRuns this executor is working on now (an atomic or composite executor). */
  executor_in_flight?: number;
  /** Event streams being followed through this service (the coordinator, the gateway). */
  event_followers?: number;
}

export type ObserveFn = () => ObservedValues | Promise<ObservedValues>;

const sources = new WeakMap<object, ObserveFn[]>();

/** Adds what a service can tell (several parts of one service may each add theirs). */
export function exposeObservables(app: object, fn: ObserveFn): void {
  sources.set(app, [...(sources.get(app) ?? []), fn]);
}

/** Everything a service can tell now; a source that fails is left out. */
export async function observeService(app: object): Promise<ObservedValues> {
  const out: ObservedValues = {};
  for (const fn of sources.get(app) ?? []) {
    try {
      Object.assign(out, await fn());
    } catch {
      // One source that cannot answer (a store that is down) leaves the others' values standing.
    }
  }
  return out;
}
