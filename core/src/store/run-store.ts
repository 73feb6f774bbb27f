/**
 * The coordinator's durable state: Runs, NodeRuns, their events and approvals.
 *
 * Every state change reaches the store as part of a WriteBatch together with the events that describe it, and a
 * batch is applied in one transaction: all of it or none. The engine groups the changes of one tick into one batch.
 * Event `seq` numbers are allocated by the store inside that transaction, so several coordinators sharing one
 * PostgreSQL database still produce gapless, ordered sequences per run.
 *
 * Nothing above this interface may assume SQLite: every method is async, claims are phrased so that PostgreSQL can
 * serve them with `FOR UPDATE SKIP LOCKED`, and time is passed in (epoch ms) rather than read from the database.
 */
import type { NodeRun, Run, RunEvent } from "@nodefabric/schemas";

export type RunState = Run["state"];
export type NodeRunState = NodeRun["state"];

export const TERMINAL_STATES: ReadonlySet<string> = new Set(["completed", "failed", "canceled"]);

/** A Run and the bookkeeping the coordinator keeps beside it. */
export interface RunRecord {
  run_id: string;
  /** The tenant that started it (from the caller's token); null when none. */
  tenant_id: string | null;
  state: RunState;
  /** The v1 Run document exactly as the API answers it. */
  run: Run;
  /** A hash of the canonical start request, so a repeated client-supplied run_id is recognised. */
  request_hash: string;
  /** When `max_wall_time_ms` runs out (epoch ms), or null. */
  deadline_at: number | null;
  created_at: number;
}

/** A NodeRun and the bookkeeping of its dispatch. */
export interface NodeRunRecord {
  node_run_id: string;
  run_id: string;
  parent_node_run_id: string | null;
  state: NodeRunState;
  /** The v1 NodeRun document exactly as the API answers it. */
  node_run: NodeRun;
  /** Delivery attempt, from 1. */
  attempt: number;
  /** Not dispatchable before this time (epoch ms): retry backoff. */
  available_at: number;
  /** Who holds the claim, and until when; null when not claimed. */
  lease_owner: string | null;
  lease_expires_at: number | null;
  /** Set while the NodeRun waits for a decision on an approval. */
  approval_id: string | null;
  /** A child's idempotency key, unique within (run_id, parent_node_run_id). */
  idempotency_key: string | null;
  /** Hash of the canonical create spec, to tell a repeat from a conflicting reuse of the key. */
  spec_hash: string | null;
  depth: number;
  created_at: number;
}

/** An event before the store has given it a seq. */
export type NewRunEvent = Omit<RunEvent, "seq">;

export interface ApprovalRecord {
  approval_id: string;
  run_id: string;
  node_run_id: string;
  state: "pending" | "approved" | "rejected" | "canceled";
  created_at: number;
  resolved_at: number | null;
  /** The PolicyDecision that asked for it. */
  decision: Record<string, unknown>;
}

/** Changes applied together in one transaction. Records are upserts keyed by their id. */
export interface WriteBatch {
  runs?: RunRecord[];
  nodeRuns?: NodeRunRecord[];
  events?: NewRunEvent[];
  approvals?: ApprovalRecord[];
}

export interface RunListQuery {
  tenant_id?: string | null;
  state?: RunState;
  limit: number;
  /** Exclusive: runs created before this run_id (ids sort by creation time), newest first. */
  before_run_id?: string;
}

export interface ClaimOptions {
  /** Id of the claiming coordinator instance. */
  owner: string;
  now: number;
  limit: number;
  leaseMs: number;
}

/** Durable storage of runs, node runs, events and approvals. */
export interface RunStore {
  /** Applies a batch in one transaction and returns its events with their seq, in batch order. */
  apply(batch: WriteBatch): Promise<RunEvent[]>;

  getRun(runId: string): Promise<RunRecord | undefined>;
  /** Runs newest first. */
  listRuns(query: RunListQuery): Promise<RunRecord[]>;
  /** Runs not yet terminal (recovery on start). */
  listOpenRuns(): Promise<RunRecord[]>;

  getNodeRun(nodeRunId: string): Promise<NodeRunRecord | undefined>;
  /** Every NodeRun of a run, oldest first. */
  listNodeRuns(runId: string): Promise<NodeRunRecord[]>;
  findChild(runId: string, parentNodeRunId: string, idempotencyKey: string): Promise<NodeRunRecord | undefined>;

  /** Events of a run with seq > afterSeq, in seq order, at most `limit`. */
  listEvents(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]>;
  /** The highest seq of a run, or -1 when it has no event. */
  lastSeq(runId: string): Promise<number>;

  getApproval(approvalId: string): Promise<ApprovalRecord | undefined>;

  /**
   * Claims up to `limit` dispatchable NodeRuns, oldest first (created_at, node_run_id). Dispatchable means: state
   * `queued`, `assigned` or `running` (a retry waiting out its backoff stays `running`; a NodeRun whose holder died
   * is re-dispatched without its state moving backwards), no pending approval (`approval_id` null),
   * `available_at <= now`, and no live lease (`lease_owner` null or `lease_expires_at < now`). Sets `lease_owner`
   * and `lease_expires_at = now + leaseMs` and returns the updated records. State changes and events are the
   * caller's, in its next batch; a caller releases a lease by writing the record back with `lease_owner` null.
   */
  claim(options: ClaimOptions): Promise<NodeRunRecord[]>;
  /** Clears every lease held by `owner` (a restarted single-process coordinator reclaims its own work at once). */
  releaseLeases(owner: string): Promise<number>;
  /** Open NodeRuns whose lease expired before `now`. */
  listExpiredLeases(now: number, limit: number): Promise<NodeRunRecord[]>;
  /** Open runs whose deadline passed before `now`. */
  listOverdueRuns(now: number, limit: number): Promise<RunRecord[]>;

  close(): Promise<void>;
}
