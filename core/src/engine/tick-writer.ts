/**
 * Groups the store writes of one tick into one transaction. Callers hand in their part of a batch and wait for the
 * commit; upserts of the same record within a tick collapse into the last one, events keep their order.
 *
 * One caller's part can never fail the others: when the tick's combined transaction fails (a document that cannot be
 * serialized, a constraint of the store), each part is applied again on its own, in the order written, so only the
 * parts that fail by themselves are rejected, with their own error, and the rest commit as they would have.
 *
 * A store that commits concurrently (`applyConcurrency` > 1, a database server) gets up to that many batches at
 * once, so the engine keeps writing while a commit is on its way. Batches under way together never share a run: a
 * part touching a run that a batch under way also touches waits for it, and so does every later part of that run,
 * so each run's writes still commit, and publish their events, in the order they were written.
 */
import type { RunEvent } from "@nodefabric/schemas";
import { observed } from "../observe/channels.js";
import { context, recording, SpanStatusCode, tracer, type Context } from "../observe/tracing.js";
import { runsOfBatch, type ApprovalRecord, type NewRunEvent, type NodeRunRecord, type RunRecord, type RunStore, type WriteBatch } from "../store/run-store.js";

interface Part {
  batch: WriteBatch;
  /** The traced context the part was written in, for its `store.write` span. */
  trace?: Context;
  resolve: (events: RunEvent[]) => void;
  reject: (err: unknown) => void;
}

/** Batches writes per tick and tells listeners about every committed event. */
export class TickWriter {
  private parts: Part[] = [];
  private scheduled = false;
  /** Runs touched by the batches under way. */
  private readonly busy = new Map<string, number>();
  private underWay = 0;
  private readonly maxUnderWay: number;
  private idle: (() => void)[] = [];

  constructor(
    private readonly store: RunStore,
    private readonly onCommitted: (events: RunEvent[]) => void,
  ) {
    this.maxUnderWay = Math.max(1, Math.floor(store.applyConcurrency ?? 1));
  }

  /** Queues a part of this tick's batch; resolves with its events (seq set) once it is durable. */
  write(part: WriteBatch): Promise<RunEvent[]> {
    const traced = recording() ? context.active() : undefined;
    const done = new Promise<RunEvent[]>((resolve, reject) => this.parts.push({ batch: part, trace: traced, resolve, reject }));
    this.schedule();
    return done;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.startBatches();
    });
  }

  /** Starts as many batches as the store takes, from the parts whose runs no batch under way touches. */
  private startBatches(): void {
    while (this.parts.length > 0 && this.underWay < this.maxUnderWay) {
      const go: Part[] = [];
      const wait: Part[] = [];
      // Runs of parts held back: a later part of the same run must not overtake them.
      const heldBack = new Set<string>();
      for (const p of this.parts) {
        const runs = runsOfBatch(p.batch);
        if (runs.some((id) => this.busy.has(id) || heldBack.has(id))) {
          for (const id of runs) heldBack.add(id);
          wait.push(p);
        } else go.push(p);
      }
      this.parts = wait;
      if (go.length === 0) return;
      const runs = new Set<string>();
      for (const p of go) for (const id of runsOfBatch(p.batch)) runs.add(id);
      for (const id of runs) this.busy.set(id, (this.busy.get(id) ?? 0) + 1);
      this.underWay++;
      void this.flush(go).finally(() => {
        for (const id of runs) {
          const n = this.busy.get(id)! - 1;
          if (n === 0) this.busy.delete(id);
          else this.busy.set(id, n);
        }
        this.underWay--;
        if (this.parts.length > 0) this.startBatches();
        if (this.underWay === 0 && this.parts.length === 0) for (const resolve of this.idle.splice(0)) resolve();
      });
    }
  }

  /**
   * Applies `batch` for `parts`; tells observers how long it took and how big it was, and gives each traced part a
   * `store.write` span in its own trace (a transaction serves several runs, so several traces).
   */
  private async apply(parts: Part[], batch: WriteBatch): Promise<RunEvent[]> {
    const observe = observed.storeWrite.hasSubscribers;
    const traced = parts.some((p) => p.trace !== undefined);
    if (!observe && !traced) return this.store.apply(batch);
    const startedAt = Date.now();
    const started = performance.now();
    let ok = false;
    try {
      const committed = await this.store.apply(batch);
      ok = true;
      return committed;
    } finally {
      const durationMs = performance.now() - started;
      const events = batch.events?.length ?? 0;
      const nodeRuns = batch.nodeRuns?.length ?? 0;
      if (observe) observed.storeWrite.publish({ store: "runs", parts: parts.length, events, node_runs: nodeRuns, duration_ms: durationMs, ok });
      if (traced) {
        const seen = new Set<Context>();
        for (const p of parts) {
          if (!p.trace || seen.has(p.trace)) continue;
          seen.add(p.trace);
          const span = tracer.startSpan("store.write", { startTime: startedAt, attributes: { "db.operation.name": "apply", "nodefabric.store.batch_parts": parts.length, "nodefabric.store.events": events, "nodefabric.store.node_runs": nodeRuns } }, p.trace);
          if (!ok) span.setStatus({ code: SpanStatusCode.ERROR, message: "the transaction failed" });
          span.end(startedAt + durationMs);
        }
      }
    }
  }

  /** Applies parts as one batch; never rejects. */
  private async flush(parts: Part[]): Promise<void> {
    if (parts.length === 1) {
      await this.applyAlone(parts[0]);
      return;
    }
    let committed: RunEvent[];
    try {
      committed = await this.apply(parts, combine(parts));
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
      committed = await this.apply([p], p.batch);
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
    if (this.underWay === 0 && this.parts.length === 0 && !this.scheduled) return;
    await new Promise<void>((resolve) => this.idle.push(resolve));
  }
}

/** The parts of a tick as one batch: one upsert per record (the last written), every event in order. */
function combine(parts: readonly Part[]): WriteBatch {
  const runs = new Map<string, RunRecord>();
  const nodeRuns = new Map<string, NodeRunRecord>();
  const approvals = new Map<string, ApprovalRecord>();
  const events: NewRunEvent[] = [];
  const creates: string[] = [];
  for (const { batch } of parts) {
    if (batch.creates) creates.push(...batch.creates);
    if (batch.runs) for (const r of batch.runs) runs.set(r.run_id, r);
    if (batch.nodeRuns) for (const n of batch.nodeRuns) nodeRuns.set(n.node_run_id, n);
    if (batch.approvals) for (const a of batch.approvals) approvals.set(a.approval_id, a);
    if (batch.events) for (const e of batch.events) events.push(e);
  }
  const out: WriteBatch = { runs: [...runs.values()], nodeRuns: [...nodeRuns.values()], approvals: [...approvals.values()], events };
  if (creates.length > 0) out.creates = creates;
  return out;
}
