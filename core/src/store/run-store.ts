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
  /**
   * The PolicyDecision that asked for it; once a person decided, also their reason (DECISION_REASON_KEY, when given)
   * and who they are (DECIDED_BY_KEY, when authenticated). A JSON document, so stores keep these without new columns.
   */
  decision: Record<string, unknown>;
}

/** Key in ApprovalRecord.decision of the reason the person gave with the decision. */
export const DECISION_REASON_KEY = "nodefabric.decision_reason";
/** Key in ApprovalRecord.decision of the subject (and issuer) of the person who decided: `{ sub, iss? }`. */
export const DECIDED_BY_KEY = "nodefabric.decided_by";

/** Changes applied together in one transaction. Records are upserts keyed by their id. */
export interface WriteBatch {
  runs?: RunRecord[];
  /**
   * Runs this batch creates (their ids, each also in `runs`). Creating cannot overwrite: when one of them exists
   * already (another coordinator created it first), `apply` throws RunExistsError and writes nothing of the batch.
   */
  creates?: string[];
  nodeRuns?: NodeRunRecord[];
  events?: NewRunEvent[];
  approvals?: ApprovalRecord[];
}

export interface RunListQuery {
  tenant_id?: string | null;
  state?: RunState;
  /** Only runs whose root NodeRun is of this node type. */
  root_node_type_id?: string;
  /** Only runs with `created_at` strictly after this time (epoch ms). */
  created_after?: number;
  /** Only runs with `created_at` strictly before this time (epoch ms). */
  created_before?: number;
  limit: number;
  /** Exclusive: runs created before this run_id (ids sort by creation time), newest first. */
  before_run_id?: string;
}

export interface ApprovalListQuery {
  /** The tenant of the approval's run (null: runs without one); undefined: every tenant. */
  tenant_id?: string | null;
  state?: ApprovalRecord["state"];
  run_id?: string;
  limit: number;
  /** Exclusive keyset: approvals older than this one (created_at, then approval_id), newest first. */
  before?: { created_at: number; approval_id: string };
}

/** An approval as listed: the record, with what a person needs to decide from its NodeRun and run. */
export interface ApprovalListing extends ApprovalRecord {
  /** The node type of the NodeRun that waits. */
  node_type_ref: { node_type_id: string; version: string };
  /** The tenant of the run, or null. */
  tenant_id: string | null;
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
  /**
   * How many `apply` calls the engine may have under way at once (default 1). Batches under way together never
   * touch the same run, so a store whose transactions run concurrently (a server with a pool) can take several: the
   * engine then keeps writing while a commit travels. A store that applies on the caller's thread needs only 1.
   */
  readonly applyConcurrency?: number;

  getRun(runId: string): Promise<RunRecord | undefined>;
  /**
   * Runs newest first. A run's root node type is that of the NodeRun its document names as root, written in the same
   * batch as the run's first write (as the engine starts runs).
   */
  listRuns(query: RunListQuery): Promise<RunRecord[]>;
  /** Runs not yet terminal (recovery on start). */
  listOpenRuns(): Promise<RunRecord[]>;

  getNodeRun(nodeRunId: string): Promise<NodeRunRecord | undefined>;
  /** Every NodeRun of a run, oldest first. */
  listNodeRuns(runId: string): Promise<NodeRunRecord[]>;
  /**
   * The NodeRuns of a run not yet terminal, oldest first. Optional: without it the engine filters `listNodeRuns`,
   * which reads (and parses) every NodeRun of the run — 10,000 of them when a fan-out's composite ends.
   */
  listOpenNodeRuns?(runId: string): Promise<NodeRunRecord[]>;
  findChild(runId: string, parentNodeRunId: string, idempotencyKey: string): Promise<NodeRunRecord | undefined>;

  /** Events of a run with seq > afterSeq, in seq order, at most `limit`. */
  listEvents(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]>;
  /** The highest seq of a run, or -1 when it has no event. */
  lastSeq(runId: string): Promise<number>;

  getApproval(approvalId: string): Promise<ApprovalRecord | undefined>;
  /** Approvals newest first (created_at, then approval_id, both descending), filtered and paged by `query`. */
  listApprovals(query: ApprovalListQuery): Promise<ApprovalListing[]>;

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
  /**
   * How many NodeRuns are ready to be claimed at `now` (dispatchable as `claim` says: no approval pending, available,
   * and unleased or with an expired lease), and the earliest `available_at` among them (null with none). For
   * metrics; a store may leave it out.
   */
  queueStats?(now: number): Promise<{ depth: number; oldestAvailableAt: number | null }>;

  /** Present on a store several coordinators share (PostgreSQL); absent on the embedded SQLite store. */
  readonly shared?: SharedRunStore;

  /**
   * Resolves when the store's database answers now, for /v1/health; throws (a StoreUnavailableError) when it cannot
   * be reached. A store on a database server answers quickly and briefly caches the answer; others may leave it out.
   */
  ping?(): Promise<void>;

  close(): Promise<void>;
}

/** A coordinator as the shared directory lists it. */
export interface CoordinatorRecord {
  instance_id: string;
  /** The base URL other coordinators forward requests for its runs to; null before it listens. */
  endpoint: string | null;
  /** Its announcement (and its runs' leases, unless renewed) runs out at this time (epoch ms). */
  expires_at: number;
}

/** Who holds a run now. */
export interface RunOwner {
  owner: string;
  /** The owner's endpoint from the directory, or null when it announced none. */
  endpoint: string | null;
  /** The fencing token the owner claimed the run with. */
  epoch: number;
  /** The owner's lease on the run runs out at this time (epoch ms). */
  expires_at: number;
}

/** The code of a FencedError. */
export const FENCED = "FABRIC_FENCED";

/**
 * A write refused because the writer no longer holds a run it touches: another coordinator took it over (a newer
 * epoch) while this one was paused, or it never held it. Nothing of the batch was written.
 */
export class FencedError extends Error {
  readonly code = FENCED;
  constructor(readonly runIds: string[]) {
    super(`this coordinator no longer holds run${runIds.length === 1 ? "" : "s"} ${runIds.join(", ")}: another coordinator took over`);
    this.name = "FencedError";
  }

  static is(err: unknown): err is FencedError {
    return err instanceof Error && (err as { code?: unknown }).code === FENCED;
  }
}

/** The code of a RunExistsError. */
export const RUN_EXISTS = "FABRIC_RUN_EXISTS";

/**
 * A batch refused because a run it creates (`WriteBatch.creates`) exists already: the same client-chosen run_id was
 * started a moment earlier, here or through another coordinator. Nothing of the batch was written; the caller reads
 * the run that exists and answers with it (the same request) or with a conflict (another request).
 */
export class RunExistsError extends Error {
  readonly code = RUN_EXISTS;
  constructor(readonly runId: string) {
    super(`run ${runId} exists already`);
    this.name = "RunExistsError";
  }

  static is(err: unknown): err is RunExistsError {
    return err instanceof Error && (err as { code?: unknown }).code === RUN_EXISTS;
  }
}

/** Thrown by `apply` when a batch names a run that exists neither in the store nor in the batch. */
export class UnknownRunError extends Error {
  constructor(readonly runId: string) {
    super(`event for unknown run ${runId}`);
    this.name = "UnknownRunError";
  }
}

/**
 * What a store shared by several coordinators adds. Each open run is driven by one coordinator at a time, its
 * owner, which holds a lease on the run row with a fencing token (the lease epoch). The owner is the only writer of
 * the run: requests for it that reach another coordinator are forwarded to the owner. A coordinator that dies stops
 * renewing; once its leases run out another takes its runs over (FOR UPDATE SKIP LOCKED, epoch + 1) and recovers
 * them. A coordinator that was merely paused finds its writes refused (FencedError), since its epoch is old.
 */
export interface SharedRunStore {
  /**
   * Binds the store to one coordinator. From then on:
   * - every `apply` is fenced: each run a batch touches must be held by `owner` at the epoch it was claimed with
   *   (else FencedError, and nothing is written); a run the batch creates is held by `owner` from epoch 1;
   * - `claim`, `listExpiredLeases`, `listOverdueRuns` and `listOpenRuns` answer only runs `owner` holds; `claim`
   *   also takes NodeRuns whose lease belongs to a previous owner of their run;
   * - commits that wrote events are announced to the other processes (see `onCommit`).
   */
  attach(owner: string, leaseMs: number): void;
  /** Whether the attached owner holds the run, as far as this process knows (no round trip). */
  holds(runId: string): boolean;
  /** Extends the lease of every open run the owner holds to now + leaseMs; answers the runs it lost meanwhile. */
  renew(now: number): Promise<{ lost: string[] }>;
  /**
   * Takes over open runs whose lease ran out before `now` (or that nobody holds), at most `limit`, skipping rows
   * another coordinator is taking at the same moment; with `runIds`, only those. Bumps each epoch and answers the
   * ids taken.
   */
  takeOver(now: number, limit: number, runIds?: string[]): Promise<string[]>;
  /**
   * On a clean stop: lets every open run the owner holds go at once (its lease ends now) and withdraws the owner
   * from the directory, so other coordinators take the runs over without waiting for the leases to run out. Answers
   * the runs let go.
   */
  release(now: number): Promise<string[]>;
  /** Who holds a run now (lease live or not), or undefined when the run is unknown or nobody holds it. */
  ownerOf(runId: string): Promise<RunOwner | undefined>;
  /** Announces the attached coordinator in the directory, with its endpoint, until now + ttlMs. */
  announce(endpoint: string | null, now: number, ttlMs: number): Promise<void>;
  /** Coordinators whose announcement is live at `now`, ordered by instance id. */
  coordinators(now: number): Promise<CoordinatorRecord[]>;
  /**
   * Hears of commits made by other processes: `listener(runId, seq)` after a commit gave the run's events up to
   * `seq`. After a lost connection to the database, `listener(null, -1)`: notices may have been missed, so the
   * listener re-reads whatever it follows. One connection per store serves every listener.
   */
  onCommit(listener: (runId: string | null, seq: number) => void): () => void;
  /** A secret every coordinator of the database shares (32 random bytes made by the first to ask). */
  sharedSecret(name: string): Promise<Uint8Array>;
}

/** The runs a batch writes to, each once. */
export function runsOfBatch(batch: WriteBatch): string[] {
  const ids = new Set<string>();
  if (batch.runs) for (const r of batch.runs) ids.add(r.run_id);
  if (batch.nodeRuns) for (const n of batch.nodeRuns) ids.add(n.run_id);
  if (batch.approvals) for (const a of batch.approvals) ids.add(a.run_id);
  if (batch.events) for (const e of batch.events) ids.add(e.run_id);
  return [...ids];
}
