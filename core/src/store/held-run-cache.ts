/**
 * The records of the runs this coordinator holds, kept in memory, in front of a store several coordinators share.
 * A coordinator is the only writer of the runs it holds (the store fences every other), so what it last wrote of
 * them is what the database holds: reading it back costs a round trip for nothing. Reads of runs it does not hold
 * go to the store. Records are copied in and out, so a caller mutating what it read changes nothing cached, and a
 * write reaches the cache only once it is committed.
 */
import type { RunEvent } from "@nodefabric/schemas";
import {
  TERMINAL_STATES,
  type ApprovalListing,
  type ApprovalListQuery,
  type ApprovalRecord,
  type ClaimOptions,
  type NodeRunRecord,
  type RunListQuery,
  type RunRecord,
  type RunStore,
  type SharedRunStore,
  type WriteBatch,
} from "./run-store.js";
import { trackCache } from "../observe/caches.js";
import { storeUnavailable } from "./store-unavailable.js";

/** Records kept at most; the oldest go first. */
const MAX_RECORDS = 20_000;
/** Ended runs kept: a run that ended never changes again, so any copy of it stays true. */
const MAX_ENDED = 4_096;

const copy = <T>(value: T): T => structuredClone(value);

export class HeldRunCache implements RunStore {
  private readonly runs = new Map<string, RunRecord>();
  private readonly nodeRuns = new Map<string, NodeRunRecord>();
  /** Runs that ended (held or not): `Prefer: wait` and clients read them once more right after the end. */
  private readonly ended = new Map<string, RunRecord>();
  readonly shared: SharedRunStore;

  constructor(private readonly inner: RunStore & { shared: SharedRunStore }) {
    trackCache("store.held_records", this, (c) => ({ entries: c.runs.size + c.nodeRuns.size }), { max_entries: 2 * MAX_RECORDS });
    trackCache("store.held_ended_runs", this, (c) => ({ entries: c.ended.size }), { max_entries: MAX_ENDED });
    this.shared = inner.shared;
    this.listOpenNodeRuns = inner.listOpenNodeRuns?.bind(inner);
  }

  /** Forgets what is kept of runs this coordinator lost (another took them over). */
  forget(runIds: readonly string[]): void {
    const lost = new Set(runIds);
    for (const id of lost) this.runs.delete(id);
    for (const [id, nr] of this.nodeRuns) if (lost.has(nr.run_id)) this.nodeRuns.delete(id);
  }

  private keep<T>(map: Map<string, T>, id: string, value: T, max = MAX_RECORDS): void {
    map.delete(id);
    map.set(id, value);
    if (map.size > max) map.delete(map.keys().next().value as string);
  }

  private keepRun(r: RunRecord): void {
    if (TERMINAL_STATES.has(r.state)) {
      this.runs.delete(r.run_id);
      this.keep(this.ended, r.run_id, r, MAX_ENDED);
    } else if (this.shared.holds(r.run_id)) this.keep(this.runs, r.run_id, r);
    else this.runs.delete(r.run_id);
  }

  /** Keeps a NodeRun; `owned` when it is already a copy of the cache's own (apply copies before the write). */
  private keepNodeRun(nr: NodeRunRecord, owned = false): void {
    if (TERMINAL_STATES.has(nr.state) || !this.shared.holds(nr.run_id)) this.nodeRuns.delete(nr.node_run_id);
    else this.keep(this.nodeRuns, nr.node_run_id, owned ? nr : copy(nr));
  }

  get applyConcurrency(): number | undefined {
    return this.inner.applyConcurrency;
  }

  async apply(batch: WriteBatch): Promise<RunEvent[]> {
    // Copied before the write: the caller may change its records while the transaction is under way.
    const runs = batch.runs?.map(copy);
    const nodeRuns = batch.nodeRuns?.map(copy);
    let events: RunEvent[];
    try {
      events = await this.inner.apply(batch);
    } catch (err) {
      // The connection lost while committing: the transaction may have been applied or not. What is kept of the
      // runs it touched is read again from the database, which knows.
      if (storeUnavailable(err)) {
        const touched = new Set<string>();
        for (const r of batch.runs ?? []) touched.add(r.run_id);
        for (const n of batch.nodeRuns ?? []) touched.add(n.run_id);
        for (const e of batch.events ?? []) touched.add(e.run_id);
        this.forget([...touched]);
      }
      throw err;
    }
    for (const r of runs ?? []) this.keepRun(r);
    for (const nr of nodeRuns ?? []) this.keepNodeRun(nr, true);
    return events;
  }

  async getRun(runId: string): Promise<RunRecord | undefined> {
    const kept = this.runs.get(runId);
    if (kept && this.shared.holds(runId)) return copy(kept);
    const ended = this.ended.get(runId);
    if (ended) return copy(ended);
    const rec = await this.inner.getRun(runId);
    if (rec) this.keepRun(copy(rec));
    return rec;
  }

  async getNodeRun(nodeRunId: string): Promise<NodeRunRecord | undefined> {
    const kept = this.nodeRuns.get(nodeRunId);
    if (kept && this.shared.holds(kept.run_id)) return copy(kept);
    const rec = await this.inner.getNodeRun(nodeRunId);
    if (rec) this.keepNodeRun(rec);
    return rec;
  }

  async claim(options: ClaimOptions): Promise<NodeRunRecord[]> {
    // A claim writes leases without apply: what it answers is what is stored now.
    const claimed = await this.inner.claim(options);
    for (const nr of claimed) this.keepNodeRun(nr);
    return claimed;
  }

  async releaseLeases(owner: string): Promise<number> {
    this.nodeRuns.clear();
    return this.inner.releaseLeases(owner);
  }

  listRuns(query: RunListQuery): Promise<RunRecord[]> {
    return this.inner.listRuns(query);
  }

  listOpenRuns(): Promise<RunRecord[]> {
    return this.inner.listOpenRuns();
  }

  listNodeRuns(runId: string): Promise<NodeRunRecord[]> {
    return this.inner.listNodeRuns(runId);
  }

  /** The store's own, when it has one: the engine filters `listNodeRuns` only for a store without it. */
  readonly listOpenNodeRuns?: (runId: string) => Promise<NodeRunRecord[]>;

  findChild(runId: string, parentNodeRunId: string, idempotencyKey: string): Promise<NodeRunRecord | undefined> {
    return this.inner.findChild(runId, parentNodeRunId, idempotencyKey);
  }

  listEvents(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]> {
    return this.inner.listEvents(runId, afterSeq, limit);
  }

  lastSeq(runId: string): Promise<number> {
    return this.inner.lastSeq(runId);
  }

  getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    return this.inner.getApproval(approvalId);
  }

  listApprovals(query: ApprovalListQuery): Promise<ApprovalListing[]> {
    return this.inner.listApprovals(query);
  }

  listExpiredLeases(now: number, limit: number): Promise<NodeRunRecord[]> {
    return this.inner.listExpiredLeases(now, limit);
  }

  listOverdueRuns(now: number, limit: number): Promise<RunRecord[]> {
    return this.inner.listOverdueRuns(now, limit);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
