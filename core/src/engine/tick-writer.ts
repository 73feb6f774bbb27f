/**
 * Groups the store writes of one tick into one transaction. Callers hand in their part of a batch and wait for the
 * commit; upserts of the same record within a tick collapse into the last one, events keep their order.
 */
import type { RunEvent } from "@nodefabric/schemas";
import type { ApprovalRecord, NewRunEvent, NodeRunRecord, RunRecord, RunStore, WriteBatch } from "../store/run-store.js";

interface Waiter {
  from: number;
  count: number;
  resolve: (events: RunEvent[]) => void;
  reject: (err: unknown) => void;
}

/** Batches writes per tick and tells listeners about every committed event. */
export class TickWriter {
  private runs = new Map<string, RunRecord>();
  private nodeRuns = new Map<string, NodeRunRecord>();
  private approvals = new Map<string, ApprovalRecord>();
  private events: NewRunEvent[] = [];
  private waiters: Waiter[] = [];
  private scheduled = false;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: RunStore,
    private readonly onCommitted: (events: RunEvent[]) => void,
  ) {}

  /** Queues a part of this tick's batch; resolves with its events (seq set) once the whole batch is durable. */
  write(part: WriteBatch): Promise<RunEvent[]> {
    for (const r of part.runs ?? []) this.runs.set(r.run_id, r);
    for (const n of part.nodeRuns ?? []) this.nodeRuns.set(n.node_run_id, n);
    for (const a of part.approvals ?? []) this.approvals.set(a.approval_id, a);
    const from = this.events.length;
    const count = part.events?.length ?? 0;
    if (count) this.events.push(...part.events!);
    const done = new Promise<RunEvent[]>((resolve, reject) => this.waiters.push({ from, count, resolve, reject }));
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.flushing = this.flushing.then(() => this.flush());
      });
    }
    return done;
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const batch: WriteBatch = {
      runs: [...this.runs.values()],
      nodeRuns: [...this.nodeRuns.values()],
      approvals: [...this.approvals.values()],
      events: this.events,
    };
    const waiters = this.waiters;
    this.runs = new Map();
    this.nodeRuns = new Map();
    this.approvals = new Map();
    this.events = [];
    this.waiters = [];
    let committed: RunEvent[];
    try {
      committed = await this.store.apply(batch);
    } catch (err) {
      for (const w of waiters) w.reject(err);
      return;
    }
    this.onCommitted(committed);
    for (const w of waiters) w.resolve(committed.slice(w.from, w.from + w.count));
  }

  /** Resolves once everything queued so far is committed. */
  async drain(): Promise<void> {
    if (this.scheduled || this.waiters.length) await this.write({});
    await this.flushing;
  }
}
