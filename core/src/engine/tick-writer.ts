/**
 * Groups the store writes of one tick into one transaction. Callers hand in their part of a batch and wait for the
 * commit; upserts of the same record within a tick collapse into the last one, events keep their order.
 *
 * One caller's part can never fail the others: when the tick's combined transaction fails (a document that cannot be
 * serialized, a constraint of the store), each part is applied again on its own, in the order written, so only the
 * parts that fail by themselves are rejected, with their own error, and the rest commit as they would have.
 */
import type { RunEvent } from "@nodefabric/schemas";
import type { ApprovalRecord, NewRunEvent, NodeRunRecord, RunRecord, RunStore, WriteBatch } from "../store/run-store.js";

interface Part {
  batch: WriteBatch;
  resolve: (events: RunEvent[]) => void;
  reject: (err: unknown) => void;
}

/** Batches writes per tick and tells listeners about every committed event. */
export class TickWriter {
  private parts: Part[] = [];
  private scheduled = false;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: RunStore,
    private readonly onCommitted: (events: RunEvent[]) => void,
  ) {}

  /** Queues a part of this tick's batch; resolves with its events (seq set) once it is durable. */
  write(part: WriteBatch): Promise<RunEvent[]> {
    const done = new Promise<RunEvent[]>((resolve, reject) => this.parts.push({ batch: part, resolve, reject }));
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        // flush never rejects, so the chain always runs the next tick.
        this.flushing = this.flushing.then(() => this.flush());
      });
    }
    return done;
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const parts = this.parts;
    this.parts = [];
    if (parts.length === 0) return;
    if (parts.length === 1) {
      await this.applyAlone(parts[0]);
      return;
    }
    let committed: RunEvent[];
    try {
      committed = await this.store.apply(combine(parts));
    } catch {
      // Nothing of the tick was written: find the parts at fault by applying each on its own, in order.
      for (const p of parts) await this.applyAlone(p);
      return;
    }
    this.publish(committed);
    let from = 0;
    for (const p of parts) {
      const count = p.batch.events?.length ?? 0;
      p.resolve(committed.slice(from, from + count));
      from += count;
    }
  }

  private async applyAlone(p: Part): Promise<void> {
    let committed: RunEvent[];
    try {
      committed = await this.store.apply(p.batch);
    } catch (err) {
      p.reject(err);
      return;
    }
    this.publish(committed);
    p.resolve(committed);
  }

  private publish(events: RunEvent[]): void {
    if (events.length === 0) return;
    try {
      this.onCommitted(events);
    } catch {
      // The events are durable whatever a listener does; its failure is not the writers'.
    }
  }

  /** Resolves once everything queued so far is committed. */
  async drain(): Promise<void> {
    if (this.scheduled || this.parts.length) await this.write({}).catch(() => undefined);
    await this.flushing;
  }
}

/** The parts of a tick as one batch: one upsert per record (the last written), every event in order. */
function combine(parts: readonly Part[]): WriteBatch {
  const runs = new Map<string, RunRecord>();
  const nodeRuns = new Map<string, NodeRunRecord>();
  const approvals = new Map<string, ApprovalRecord>();
  const events: NewRunEvent[] = [];
  for (const { batch } of parts) {
    if (batch.runs) for (const r of batch.runs) runs.set(r.run_id, r);
    if (batch.nodeRuns) for (const n of batch.nodeRuns) nodeRuns.set(n.node_run_id, n);
    if (batch.approvals) for (const a of batch.approvals) approvals.set(a.approval_id, a);
    if (batch.events) for (const e of batch.events) events.push(e);
  }
  return { runs: [...runs.values()], nodeRuns: [...nodeRuns.values()], approvals: [...approvals.values()], events };
}
