/**
 * The coordinator's RunStore on PostgreSQL, shared by several coordinators (SharedRunStore).
 *
 * apply() is one transaction of a handful of multi-row statements whatever the batch's size: records travel as one
 * JSON array per table (jsonb_to_recordset) and are upserted with ON CONFLICT. Event seqs come from runs.last_seq,
 * updated in the same transaction: the row lock orders the writers of a run across processes and a rollback gives the
 * seqs back, so they stay gapless. Rows are written in id order, so two batches touching the same runs lock them in
 * the same order and cannot deadlock.
 *
 * Attached to a coordinator, every batch first locks the runs it touches (FOR UPDATE, by run_id) and checks that the
 * coordinator still holds each at the epoch it claimed it with; otherwise it throws FencedError and writes nothing.
 */
import { randomBytes, createHash } from "node:crypto";
import pg from "pg";
import {
  clock,
  FencedError,
  RunExistsError,
  type ApprovalListing,
  type ApprovalListQuery,
  type ApprovalRecord,
  type ClaimOptions,
  type CoordinatorRecord,
  type NodeRunRecord,
  type RunListQuery,
  type RunOwner,
  type RunRecord,
  type RunStore,
  type SharedRunStore,
  type WriteBatch,
} from "@nodefabric/core";
import { trackCache } from "@nodefabric/core";
import { ms, pingPool, ts, whenOpened, whenReady, type PgTarget } from "./connect.js";
import { inTransaction } from "./pg-migrate.js";

type RunEvent = Awaited<ReturnType<RunStore["apply"]>>[number];
type CommitListener = (runId: string | null, seq: number) => void;

// Spelled as in the partial indexes of the migrations, so PostgreSQL can use them.
const OPEN_RUN = `state IN ('queued', 'running')`;
const OPEN_NODE_RUN = `state IN ('queued', 'assigned', 'running')`;
const TERMINAL = new Set(["completed", "failed", "canceled"]);

const RUN_COLUMNS = `run_id, tenant_id, state, doc, request_hash, ${ms("deadline_at")} AS deadline_at, ${ms("created_at")} AS created_at`;
const NODE_RUN_COLUMNS =
  `node_run_id, run_id, parent_node_run_id, state, doc, attempt, ${ms("available_at")} AS available_at, lease_owner, ` +
  `${ms("lease_expires_at")} AS lease_expires_at, approval_id, idempotency_key, spec_hash, depth, ${ms("created_at")} AS created_at`;
const APPROVAL_COLUMNS = `approval_id, run_id, node_run_id, state, doc, ${ms("created_at")} AS created_at, ${ms("resolved_at")} AS resolved_at`;

/**
 * Ready work for the metrics (queueStats, $1 = now): the claim's two index ranges, counted apart. An OR of them
 * implies neither partial index, and the count would read every NodeRun ever stored at each metrics scrape.
 */
export const QUEUE_STATS_SQL = `SELECT sum(n)::int8 AS depth, (extract(epoch FROM min(oldest)) * 1000)::int8 AS oldest FROM (
     SELECT count(*) AS n, min(available_at) AS oldest FROM node_runs
     WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN} AND available_at <= ${ts("$1")}
     UNION ALL
     SELECT count(*), min(available_at) FROM node_runs
     WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < ${ts("$1")}
       AND approval_id IS NULL AND available_at <= ${ts("$1")}) AS q`;

/** Ended runs kept in `held` (so `holds` stays true for them); beyond this many, the oldest are forgotten. */
const MAX_ENDED_HELD = 50_000;

/** How often the LISTEN connection is probed, and how long the probe may take before the connection is dropped (ms). */
const LISTEN_PROBE_EVERY_MS = 15_000;
const LISTEN_PROBE_TIMEOUT_MS = 5_000;

/** pg_notify refuses payloads of 8000 bytes or more; chunks stay below with room to spare. */
const NOTIFY_LIMIT = 7900;

interface RunRow {
  run_id: string;
  tenant_id: string | null;
  state: RunRecord["state"];
  doc: RunRecord["run"];
  request_hash: string;
  deadline_at: number | null;
  created_at: number;
}

interface NodeRunRow {
  node_run_id: string;
  run_id: string;
  parent_node_run_id: string | null;
  state: NodeRunRecord["state"];
  doc: NodeRunRecord["node_run"];
  attempt: number;
  available_at: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  approval_id: string | null;
  idempotency_key: string | null;
  spec_hash: string | null;
  depth: number;
  created_at: number;
}

interface ApprovalRow {
  approval_id: string;
  run_id: string;
  node_run_id: string;
  state: ApprovalRecord["state"];
  doc: ApprovalRecord["decision"];
  created_at: number;
  resolved_at: number | null;
}

const toRun = (r: RunRow): RunRecord => ({
  run_id: r.run_id,
  tenant_id: r.tenant_id,
  state: r.state,
  run: r.doc,
  request_hash: r.request_hash,
  deadline_at: r.deadline_at,
  created_at: r.created_at,
});

const toNodeRun = (r: NodeRunRow): NodeRunRecord => ({
  node_run_id: r.node_run_id,
  run_id: r.run_id,
  parent_node_run_id: r.parent_node_run_id,
  state: r.state,
  node_run: r.doc,
  attempt: r.attempt,
  available_at: r.available_at,
  lease_owner: r.lease_owner,
  lease_expires_at: r.lease_expires_at,
  approval_id: r.approval_id,
  idempotency_key: r.idempotency_key,
  spec_hash: r.spec_hash,
  depth: r.depth,
  created_at: r.created_at,
});

const toApproval = (r: ApprovalRow): ApprovalRecord => ({
  approval_id: r.approval_id,
  run_id: r.run_id,
  node_run_id: r.node_run_id,
  state: r.state,
  created_at: r.created_at,
  resolved_at: r.resolved_at,
  decision: r.doc,
});

/** jsonb keeps keys in its own order; events are handed out with the key order the SQLite store writes. */
function eventFrom(doc: RunEvent): RunEvent {
  const ev: RunEvent = { run_id: doc.run_id, seq: doc.seq, type: doc.type, time: doc.time };
  if (doc.node_run_id !== undefined) ev.node_run_id = doc.node_run_id;
  if (doc.data !== undefined) ev.data = doc.data;
  if (doc.extensions !== undefined) ev.extensions = doc.extensions;
  return ev;
}

/** The node type id of each run's root NodeRun, when the batch holds it (a run's first batch does). */
function rootTypesOf(runs: readonly RunRecord[], nodeRuns: readonly NodeRunRecord[]): Array<string | null> {
  const roots = new Map<string, string>();
  for (const r of runs) roots.set(r.run.root_node_run_id, "");
  for (const n of nodeRuns) if (roots.has(n.node_run_id)) roots.set(n.node_run_id, n.node_run.node_type_ref.node_type_id);
  return runs.map((r) => roots.get(r.run.root_node_run_id) || null);
}

function byAge(a: NodeRunRecord, b: NodeRunRecord): number {
  if (a.created_at !== b.created_at) return a.created_at - b.created_at;
  return a.node_run_id < b.node_run_id ? -1 : a.node_run_id > b.node_run_id ? 1 : 0;
}

/** The last record of each id, in id order (one upsert statement may not touch a row twice). */
function lastById<T>(records: readonly T[] | undefined, id: (r: T) => string): T[] {
  if (!records || records.length === 0) return [];
  const m = new Map<string, T>();
  for (const r of records) m.set(id(r), r);
  return [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
}

/** Thrown by `apply` when an event names a run that exists neither in the store nor in the batch. */
export class UnknownRunError extends Error {
  constructor(readonly runId: string) {
    super(`event for unknown run ${runId}`);
    this.name = "UnknownRunError";
  }
}

/** The LISTEN channel of a schema: channels are per database, so stores of two schemas must not hear each other. */
function channelOf(schema: string): string {
  return `nf_commit_${createHash("sha256").update(schema).digest("hex").slice(0, 24)}`;
}

/** RunStore and SharedRunStore on one PostgreSQL schema. */
export class PgRunStore implements RunStore, SharedRunStore {
  private owner: string | undefined;
  private leaseMs = 0;
  /** The epoch of each run this coordinator holds, as of its last takeover, creation or renewal. */
  private readonly held = new Map<string, number>();
  /** The held runs known to have ended: they stay held (ended runs stay leased) but need no renewal. */
  private readonly ended = new Set<string>();
  /** Runs a fenced write showed this coordinator had lost; the next renew reports them with the others. */
  private readonly lostSinceRenew = new Set<string>();
  private readonly listeners = new Set<CommitListener>();
  /** When the leases were last renewed, and until when they are vouched for while renewals fail (see holds). */
  private renewedAt = clock.now();
  private vouchedUntil = Number.POSITIVE_INFINITY;
  private listenClient: pg.Client | undefined;
  private listenProbe: NodeJS.Timeout | undefined;
  private listening = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;

  /** Opens the store: `pool` is migrated already; `schema` names the channel of commit notices. */
  constructor(
    private readonly pool: pg.Pool,
    private readonly target: PgTarget,
    private channel: string,
  ) {
    // The runs this coordinator holds: the open ones (work in flight) and at most MAX_ENDED_HELD ended ones.
    trackCache("store.pg_held_runs", this, (s) => ({ entries: s.held.size + s.lostSinceRenew.size }));
    trackCache("store.pg_ended_held_runs", this, (s) => ({ entries: s.ended.size }), { max_entries: MAX_ENDED_HELD });
  }

  /**
   * Opens a store on a pool of openPool, finding the schema it works in: now, or, when the database could not be
   * reached yet, once the pool reaches it (before it serves anything).
   */
  static async open(pool: pg.Pool, target: PgTarget): Promise<PgRunStore> {
    const store = new PgRunStore(pool, target, "");
    await whenOpened(pool, async (query) => {
      const rows = await query(`SELECT current_schema() AS schema`);
      store.channel = channelOf((rows[0]?.schema as string | undefined) ?? "public");
    });
    return store;
  }

  /** Whether the database answers now (for /v1/health; see pingPool). */
  ping(): Promise<void> {
    return pingPool(this.pool);
  }

  /**
   * Batches the engine may have under way at once: each takes a pooled connection for its transaction, so a few
   * overlap their round trips while the rest of the pool stays free for claims, reads and renewals.
   */
  get applyConcurrency(): number {
    return Math.max(1, Math.min(4, (this.pool.options.max ?? 10) - 2));
  }

  /** This store as a SharedRunStore. */
  get shared(): SharedRunStore {
    return this;
  }

  // ---- RunStore -------------------------------------------------------------------------------------------------

  async apply(batch: WriteBatch): Promise<RunEvent[]> {
    const runs = lastById(batch.runs, (r) => r.run_id);
    const nodeRuns = lastById(batch.nodeRuns, (n) => n.node_run_id);
    const approvals = lastById(batch.approvals, (a) => a.approval_id);
    const events = batch.events ?? [];
    if (runs.length === 0 && nodeRuns.length === 0 && approvals.length === 0 && events.length === 0) return [];

    // How many seqs each run takes, in first-seen order.
    const counts = new Map<string, number>();
    for (const e of events) counts.set(e.run_id, (counts.get(e.run_id) ?? 0) + 1);
    const owner = this.owner;

    // Every run the batch touches, locked first and in run_id order (attached, also checked): batches of two
    // coordinators, or two batches of one, then lock shared runs in the same order and cannot deadlock.
    const touched = new Set<string>();
    for (const r of runs) touched.add(r.run_id);
    for (const n of nodeRuns) touched.add(n.run_id);
    for (const a of approvals) touched.add(a.run_id);
    for (const id of counts.keys()) touched.add(id);
    const inBatch = new Set(runs.map((r) => r.run_id));
    const creates = new Set(batch.creates);
    const others = [...counts.keys()].filter((id) => !inBatch.has(id)).sort();

    const result = await inTransaction(this.pool, async (c) => {
      // Statement 1: lock, upsert the runs, and move the seq counters of every run that takes seqs.
      const rootTypes = runs.length > 0 ? rootTypesOf(runs, nodeRuns) : [];
      const runRows = runs.map((r, i) => ({
        run_id: r.run_id,
        tenant_id: r.tenant_id,
        state: r.state,
        doc: r.run,
        request_hash: r.request_hash,
        deadline_at: r.deadline_at,
        created_at: r.created_at,
        root_node_type_id: rootTypes[i],
        n: counts.get(r.run_id) ?? 0,
      }));
      const { rows } = await c.query<{ k: "f" | "u" | "s"; run_id: string; lease_owner: string | null; epoch: number | null; last_seq: number | null; inserted: boolean | null }>(
        `WITH f AS (SELECT run_id, lease_owner, lease_epoch FROM runs WHERE run_id = ANY($7::text[]) ORDER BY run_id FOR UPDATE),
              fc AS (SELECT count(*) AS n FROM f),
              up AS (
                INSERT INTO runs (run_id, tenant_id, state, doc, request_hash, deadline_at, created_at, last_seq, lease_owner,
                                  lease_expires_at, lease_epoch, root_node_type_id)
                SELECT r.run_id, r.tenant_id, r.state, r.doc, r.request_hash, ${ts("r.deadline_at")}, ${ts("r.created_at")}, r.n,
                       $2::text, ${ts("$3")}, $4::int8, r.root_node_type_id
                FROM jsonb_to_recordset($1::jsonb) AS r(run_id text, tenant_id text, state text, doc jsonb, request_hash text,
                                                        deadline_at int8, created_at int8, root_node_type_id text, n int8)
                WHERE (SELECT n FROM fc) >= 0
                ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, deadline_at = excluded.deadline_at,
                  last_seq = runs.last_seq + excluded.last_seq
                RETURNING run_id, last_seq::float8 AS last_seq, (xmax = 0) AS inserted),
              c AS (SELECT * FROM unnest($5::text[], $6::int8[]) AS c(run_id, n)),
              sq AS (
                UPDATE runs SET last_seq = runs.last_seq + c.n FROM c
                WHERE runs.run_id = c.run_id AND (SELECT n FROM fc) >= 0
                RETURNING runs.run_id, runs.last_seq::float8 AS last_seq)
         SELECT 'f' AS k, run_id, lease_owner, lease_epoch::float8 AS epoch, NULL::float8 AS last_seq, NULL::bool AS inserted FROM f
         UNION ALL SELECT 'u', run_id, NULL, NULL, last_seq, inserted FROM up
         UNION ALL SELECT 's', run_id, NULL, NULL, last_seq, NULL FROM sq`,
        [
          JSON.stringify(runRows),
          owner ?? null,
          owner !== undefined ? clock.now() + this.leaseMs : null,
          owner !== undefined ? 1 : 0,
          others,
          others.map((id) => counts.get(id)!),
          [...touched].sort(),
        ],
      );

      // A run the batch creates must not exist: found locked (committed before this statement) or updated rather
      // than inserted (committed by another coordinator while this insert waited on its key), the batch is refused
      // whole and the transaction rolls back, leaving the first creator's run as it wrote it.
      if (creates.size > 0) {
        const existed = rows.find((r) => creates.has(r.run_id) && (r.k === "f" || (r.k === "u" && !r.inserted)));
        if (existed) throw new RunExistsError(existed.run_id);
      }
      if (owner !== undefined) {
        // A run that existed before this batch must be held by `owner` at the epoch it took it with.
        const fenced = rows.filter((r) => r.k === "f" && (r.lease_owner !== owner || this.held.get(r.run_id) !== r.epoch)).map((r) => r.run_id);
        if (fenced.length > 0) {
          for (const id of fenced) this.forget(id, true);
          throw new FencedError(fenced);
        }
      }
      // The first seq of every run that takes some: its new counter minus its events in the batch.
      const next = new Map<string, number>();
      const inserted: string[] = [];
      for (const r of rows) {
        if (r.k === "f") continue;
        const n = counts.get(r.run_id);
        if (n !== undefined) next.set(r.run_id, r.last_seq! - n);
        if (r.inserted) inserted.push(r.run_id);
      }
      const missing = others.find((id) => !next.has(id));
      if (missing !== undefined) throw new UnknownRunError(missing);

      // Statement 2: NodeRuns, approvals, events and the commit notice.
      const out: RunEvent[] = new Array(events.length);
      if (nodeRuns.length === 0 && approvals.length === 0 && events.length === 0) return { out, inserted };
      const nodeRunRows = nodeRuns.map((n) => ({
        node_run_id: n.node_run_id,
        run_id: n.run_id,
        parent_node_run_id: n.parent_node_run_id,
        state: n.state,
        doc: n.node_run,
        attempt: n.attempt,
        available_at: n.available_at,
        lease_owner: n.lease_owner,
        lease_expires_at: n.lease_expires_at,
        approval_id: n.approval_id,
        idempotency_key: n.idempotency_key,
        spec_hash: n.spec_hash,
        depth: n.depth,
        created_at: n.created_at,
      }));
      const approvalRows = approvals.map((a) => ({
        approval_id: a.approval_id,
        run_id: a.run_id,
        node_run_id: a.node_run_id,
        state: a.state,
        doc: a.decision,
        created_at: a.created_at,
        resolved_at: a.resolved_at,
      }));
      const eventRows = new Array(events.length);
      for (let i = 0; i < events.length; i++) {
        const e = events[i];
        const seq = next.get(e.run_id)!;
        next.set(e.run_id, seq + 1);
        const ev: RunEvent = { run_id: e.run_id, seq, type: e.type, time: e.time };
        if (e.node_run_id !== undefined) ev.node_run_id = e.node_run_id;
        if (e.data !== undefined) ev.data = e.data;
        if (e.extensions !== undefined) ev.extensions = e.extensions;
        out[i] = ev;
        eventRows[i] = { run_id: e.run_id, seq, node_run_id: e.node_run_id ?? null, type: e.type, at: e.time, payload: ev };
      }
      // `next` now holds each run's seq after its last event of the batch.
      const notify = owner !== undefined && events.length > 0 ? notices(owner, next) : [];
      // Approvals refer to NodeRuns inserted by the same statement: foreign keys are checked at its end.
      await c.query(
        `WITH nr AS (
           INSERT INTO node_runs (node_run_id, run_id, parent_node_run_id, state, doc, attempt, available_at, lease_owner,
                                  lease_expires_at, approval_id, idempotency_key, spec_hash, depth, created_at)
           SELECT n.node_run_id, n.run_id, n.parent_node_run_id, n.state, n.doc, n.attempt, ${ts("n.available_at")}, n.lease_owner,
                  ${ts("n.lease_expires_at")}, n.approval_id, n.idempotency_key, n.spec_hash, n.depth, ${ts("n.created_at")}
           FROM jsonb_to_recordset($1::jsonb) AS n(node_run_id text, run_id text, parent_node_run_id text, state text, doc jsonb,
                  attempt int4, available_at int8, lease_owner text, lease_expires_at int8, approval_id text,
                  idempotency_key text, spec_hash text, depth int4, created_at int8)
           ON CONFLICT (node_run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, attempt = excluded.attempt,
             available_at = excluded.available_at, lease_owner = excluded.lease_owner,
             lease_expires_at = excluded.lease_expires_at, approval_id = excluded.approval_id),
         ap AS (
           INSERT INTO approvals (approval_id, run_id, node_run_id, state, doc, created_at, resolved_at)
           SELECT a.approval_id, a.run_id, a.node_run_id, a.state, a.doc, ${ts("a.created_at")}, ${ts("a.resolved_at")}
           FROM jsonb_to_recordset($2::jsonb) AS a(approval_id text, run_id text, node_run_id text, state text, doc jsonb,
                                                   created_at int8, resolved_at int8)
           ON CONFLICT (approval_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, resolved_at = excluded.resolved_at),
         ev AS (
           INSERT INTO events (run_id, seq, node_run_id, type, at, payload)
           SELECT e.run_id, e.seq, e.node_run_id, e.type, e.at::timestamptz, e.payload
           FROM jsonb_to_recordset($3::jsonb) AS e(run_id text, seq int8, node_run_id text, type text, at text, payload jsonb))
         SELECT pg_notify($4, p) FROM unnest($5::text[]) AS p`,
        [JSON.stringify(nodeRunRows), JSON.stringify(approvalRows), JSON.stringify(eventRows), this.channel, notify],
      );
      return { out, inserted };
    });
    if (owner !== undefined && owner === this.owner) {
      for (const id of result.inserted) this.held.set(id, 1);
      for (const r of runs) if (TERMINAL.has(r.state) && this.held.has(r.run_id)) this.markEnded(r.run_id);
    }
    return result.out;
  }

  /** Drops a run from what this coordinator holds; `lost` reports it at the next renew. */
  private forget(runId: string, lost: boolean): void {
    this.ended.delete(runId);
    if (this.held.delete(runId) && lost) this.lostSinceRenew.add(runId);
  }

  private markEnded(runId: string): void {
    this.ended.add(runId);
    if (this.ended.size > MAX_ENDED_HELD) this.forget(this.ended.values().next().value as string, false);
  }

  async getRun(runId: string): Promise<RunRecord | undefined> {
    const { rows } = await this.pool.query<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = $1`, [runId]);
    return rows[0] && toRun(rows[0]);
  }

  async listRuns(query: RunListQuery): Promise<RunRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.tenant_id === null) where.push("tenant_id IS NULL");
    else if (query.tenant_id !== undefined) where.push(`tenant_id = $${params.push(query.tenant_id)}`);
    if (query.state !== undefined) where.push(`state = $${params.push(query.state)}`);
    if (query.root_node_type_id !== undefined) where.push(`root_node_type_id = $${params.push(query.root_node_type_id)}`);
    if (query.created_after !== undefined) where.push(`created_at > ${ts(`$${params.push(query.created_after)}`)}`);
    if (query.created_before !== undefined) where.push(`created_at < ${ts(`$${params.push(query.created_before)}`)}`);
    if (query.before_run_id !== undefined) where.push(`run_id < $${params.push(query.before_run_id)}`);
    const filter = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    const { rows } = await this.pool.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM runs ${filter} ORDER BY run_id DESC LIMIT $${params.push(query.limit)}`,
      params,
    );
    return rows.map(toRun);
  }

  async listOpenRuns(): Promise<RunRecord[]> {
    const mine = this.owner !== undefined ? `AND lease_owner = $1` : "";
    const { rows } = await this.pool.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM runs WHERE ${OPEN_RUN} ${mine} ORDER BY run_id`,
      this.owner !== undefined ? [this.owner] : [],
    );
    return rows.map(toRun);
  }

  async getNodeRun(nodeRunId: string): Promise<NodeRunRecord | undefined> {
    const { rows } = await this.pool.query<NodeRunRow>(`SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE node_run_id = $1`, [nodeRunId]);
    return rows[0] && toNodeRun(rows[0]);
  }

  async listNodeRuns(runId: string): Promise<NodeRunRecord[]> {
    const { rows } = await this.pool.query<NodeRunRow>(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE run_id = $1 ORDER BY created_at, node_run_id`,
      [runId],
    );
    return rows.map(toNodeRun);
  }

  /** The NodeRuns of a run not yet terminal, oldest first: filtered by the database, the ended ones never sent. */
  async listOpenNodeRuns(runId: string): Promise<NodeRunRecord[]> {
    const { rows } = await this.pool.query<NodeRunRow>(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE run_id = $1 AND ${OPEN_NODE_RUN} ORDER BY created_at, node_run_id`,
      [runId],
    );
    return rows.map(toNodeRun);
  }

  async findChild(runId: string, parentNodeRunId: string, idempotencyKey: string): Promise<NodeRunRecord | undefined> {
    const { rows } = await this.pool.query<NodeRunRow>(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE run_id = $1 AND parent_node_run_id = $2 AND idempotency_key = $3`,
      [runId, parentNodeRunId, idempotencyKey],
    );
    return rows[0] && toNodeRun(rows[0]);
  }

  async listEvents(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]> {
    const { rows } = await this.pool.query<{ payload: RunEvent }>(
      `SELECT payload FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [runId, afterSeq, limit],
    );
    return rows.map((r) => eventFrom(r.payload));
  }

  async lastSeq(runId: string): Promise<number> {
    const { rows } = await this.pool.query<{ last: number }>(`SELECT last_seq::float8 - 1 AS last FROM runs WHERE run_id = $1`, [runId]);
    return rows[0]?.last ?? -1;
  }

  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const { rows } = await this.pool.query<ApprovalRow>(`SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE approval_id = $1`, [approvalId]);
    return rows[0] && toApproval(rows[0]);
  }

  async listApprovals(query: ApprovalListQuery): Promise<ApprovalListing[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.tenant_id === null) where.push("r.tenant_id IS NULL");
    else if (query.tenant_id !== undefined) where.push(`r.tenant_id = $${params.push(query.tenant_id)}`);
    if (query.state !== undefined) where.push(`a.state = $${params.push(query.state)}`);
    if (query.run_id !== undefined) where.push(`a.run_id = $${params.push(query.run_id)}`);
    if (query.before !== undefined) {
      const at = ts(`$${params.push(query.before.created_at)}`);
      where.push(`(a.created_at, a.approval_id) < (${at}, $${params.push(query.before.approval_id)}::text)`);
    }
    const filter = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    const { rows } = await this.pool.query<ApprovalRow & { tenant_id: string | null; node_type_ref: ApprovalListing["node_type_ref"] }>(
      `SELECT a.approval_id, a.run_id, a.node_run_id, a.state, a.doc, ${ms("a.created_at")} AS created_at,
              ${ms("a.resolved_at")} AS resolved_at, r.tenant_id, n.doc->'node_type_ref' AS node_type_ref
       FROM approvals a JOIN runs r ON r.run_id = a.run_id JOIN node_runs n ON n.node_run_id = a.node_run_id
       ${filter} ORDER BY a.created_at DESC, a.approval_id DESC LIMIT $${params.push(query.limit)}`,
      params,
    );
    return rows.map((row) => ({ ...toApproval(row), tenant_id: row.tenant_id, node_type_ref: row.node_type_ref }));
  }

  async claim(o: ClaimOptions): Promise<NodeRunRecord[]> {
    if (o.limit <= 0) return [];
    const params: unknown[] = [o.owner, o.now, o.now + o.leaseMs, o.limit];
    let pick: string;
    if (this.owner === undefined) {
      // Two index ranges, each in the order wanted (unleased work, expired leases); the outer WHERE repeats the
      // terms so a row another claimer leased meanwhile is re-checked and skipped.
      pick = `SELECT node_run_id AS id FROM node_runs
              WHERE node_run_id IN (
                (SELECT node_run_id FROM node_runs
                 WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN} AND available_at <= ${ts("$2")}
                 ORDER BY created_at, node_run_id LIMIT $4)
                UNION ALL
                (SELECT node_run_id FROM node_runs
                 WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < ${ts("$2")}
                   AND approval_id IS NULL AND available_at <= ${ts("$2")}
                 ORDER BY created_at, node_run_id LIMIT $4))
                AND approval_id IS NULL AND ${OPEN_NODE_RUN} AND available_at <= ${ts("$2")}
                AND (lease_owner IS NULL OR lease_expires_at < ${ts("$2")})
              ORDER BY created_at, node_run_id LIMIT $4
              FOR UPDATE SKIP LOCKED`;
    } else {
      // Only NodeRuns of runs this coordinator holds, where a live lease of a previous owner of the run does not
      // count. The same two index ranges, each limited to the runs held; the outer WHERE re-checks, as above.
      params.push(this.owner);
      // A per-row lookup by primary key: the scan of open work stays in index order and stops at the limit, and
      // the plan does not hinge on statistics a fresh table lacks (a join was planned as a scan per row).
      const heldRun = (n: string) => `(SELECT r.lease_owner FROM runs r WHERE r.run_id = ${n}.run_id AND r.${OPEN_RUN}) = $5`;
      const dispatchable = (n: string) =>
        `${n}.approval_id IS NULL AND ${n}.state IN ('queued', 'assigned', 'running') AND ${n}.available_at <= ${ts("$2")}`;
      pick = `SELECT node_run_id AS id FROM node_runs
              WHERE node_run_id IN (
                (SELECT n.node_run_id FROM node_runs n
                 WHERE n.lease_owner IS NULL AND ${dispatchable("n")} AND ${heldRun("n")}
                 ORDER BY n.created_at, n.node_run_id LIMIT $4)
                UNION ALL
                (SELECT n.node_run_id FROM node_runs n
                 WHERE n.lease_owner IS NOT NULL AND ${dispatchable("n")} AND (n.lease_expires_at < ${ts("$2")} OR n.lease_owner <> $5)
                   AND ${heldRun("n")}
                 ORDER BY n.created_at, n.node_run_id LIMIT $4))
                AND ${dispatchable("node_runs")}
                AND (lease_owner IS NULL OR lease_expires_at < ${ts("$2")} OR lease_owner <> $5)
              ORDER BY created_at, node_run_id LIMIT $4
              FOR UPDATE SKIP LOCKED`;
    }
    const { rows } = await this.pool.query<NodeRunRow>(
      `WITH c AS (${pick})
       UPDATE node_runs SET lease_owner = $1, lease_expires_at = ${ts("$3")}, lease_epoch = node_runs.lease_epoch + 1
       FROM c WHERE node_runs.node_run_id = c.id
       RETURNING ${NODE_RUN_COLUMNS}`,
      params,
    );
    return rows.map(toNodeRun).sort(byAge);
  }

  async releaseLeases(owner: string): Promise<number> {
    const res = await this.pool.query(
      `UPDATE node_runs SET lease_owner = NULL, lease_expires_at = NULL
       WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_owner = $1`,
      [owner],
    );
    return res.rowCount ?? 0;
  }

  async listExpiredLeases(now: number, limit: number): Promise<NodeRunRecord[]> {
    const params: unknown[] = [now, limit];
    const mine = this.owner !== undefined ? `AND run_id IN (SELECT run_id FROM runs WHERE lease_owner = $${params.push(this.owner)} AND ${OPEN_RUN})` : "";
    const { rows } = await this.pool.query<NodeRunRow>(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs
       WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < ${ts("$1")} ${mine}
       ORDER BY lease_expires_at LIMIT $2`,
      params,
    );
    return rows.map(toNodeRun);
  }

  async queueStats(now: number): Promise<{ depth: number; oldestAvailableAt: number | null }> {
    const { rows } = await this.pool.query<{ depth: string; oldest: string | null }>(
      QUEUE_STATS_SQL,
      [now],
    );
    const row = rows[0];
    return { depth: Number(row?.depth ?? 0), oldestAvailableAt: row?.oldest == null ? null : Number(row.oldest) };
  }

  async listOverdueRuns(now: number, limit: number): Promise<RunRecord[]> {
    const params: unknown[] = [now, limit];
    const mine = this.owner !== undefined ? `AND lease_owner = $${params.push(this.owner)}` : "";
    const { rows } = await this.pool.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM runs
       WHERE ${OPEN_RUN} AND deadline_at IS NOT NULL AND deadline_at < ${ts("$1")} ${mine}
       ORDER BY deadline_at LIMIT $2`,
      params,
    );
    return rows.map(toRun);
  }

  // ---- SharedRunStore -------------------------------------------------------------------------------------------

  attach(owner: string, leaseMs: number): void {
    if (this.owner !== undefined && this.owner !== owner) {
      this.held.clear();
      this.ended.clear();
      this.lostSinceRenew.clear();
    }
    this.owner = owner;
    this.leaseMs = leaseMs;
    this.renewedAt = clock.now();
  }

  /**
   * Whether this coordinator holds the run: taken, created or renewed by it, and not lost. While renewals fail (the
   * database is down) the runs stay held, but only for as long as their leases may still be running: past that, another
   * coordinator may have taken them, so none is vouched for (reads go to the store, which answers or is down) until a
   * renewal succeeds again and says which were lost.
   */
  holds(runId: string): boolean {
    return this.held.has(runId) && clock.now() <= this.vouchedUntil;
  }

  private attached(): string {
    if (this.owner === undefined) throw new Error("this run store is not attached to a coordinator: call shared.attach(owner, leaseMs) first");
    return this.owner;
  }

  async renew(now: number): Promise<{ lost: string[] }> {
    try {
      const out = await this.renewHeld(now);
      this.renewedAt = now;
      this.vouchedUntil = Number.POSITIVE_INFINITY;
      return out;
    } catch (err) {
      // The leases renewed last run out at renewedAt + leaseMs; from then on, none is vouched for.
      if (this.vouchedUntil === Number.POSITIVE_INFINITY) this.vouchedUntil = this.renewedAt + this.leaseMs;
      throw err;
    }
  }

  private async renewHeld(now: number): Promise<{ lost: string[] }> {
    const owner = this.attached();
    const ids = [...this.held.keys()].filter((id) => !this.ended.has(id)).sort();
    if (ids.length === 0) {
      const lost = [...this.lostSinceRenew];
      this.lostSinceRenew.clear();
      return { lost: lost.sort() };
    }
    const epochs = ids.map((id) => this.held.get(id)!);
    const sent = new Map(ids.map((id, i) => [id, epochs[i]]));
    // The SELECT reads the rows as they were before the UPDATE, which changes neither owner nor epoch.
    const { rows } = await this.pool.query<{ run_id: string; mine: boolean | null; open: boolean | null }>(
      `WITH h AS (SELECT * FROM unnest($1::text[], $2::int8[]) AS h(run_id, epoch)),
            u AS (UPDATE runs r SET lease_expires_at = ${ts("$4")} FROM h
                  WHERE r.run_id = h.run_id AND r.lease_owner = $3 AND r.lease_epoch = h.epoch AND r.${OPEN_RUN}
                  RETURNING r.run_id)
       SELECT h.run_id, (r.lease_owner = $3 AND r.lease_epoch = h.epoch) AS mine, r.${OPEN_RUN} AS open
       FROM h LEFT JOIN runs r USING (run_id)`,
      [ids, epochs, owner, now + this.leaseMs],
    );
    // Read only now: when the renewal fails, they are reported by the next one.
    const lost = [...this.lostSinceRenew];
    this.lostSinceRenew.clear();
    for (const r of rows) {
      if (!r.mine) {
        // Only drop what is still the epoch we read: a takeover racing with this renewal may have set a new one.
        if (this.held.get(r.run_id) === sent.get(r.run_id)) this.forget(r.run_id, false);
        lost.push(r.run_id);
      } else if (!r.open) {
        // Ended (by another path than this store's apply): still held, no longer renewed.
        this.markEnded(r.run_id);
      }
    }
    return { lost: lost.sort() };
  }

  async takeOver(now: number, limit: number, runIds?: string[]): Promise<string[]> {
    const owner = this.attached();
    if (limit <= 0 || (runIds !== undefined && runIds.length === 0)) return [];
    const params: unknown[] = [owner, now, now + this.leaseMs, limit];
    const takeable = `${OPEN_RUN} AND (lease_owner IS NULL OR lease_expires_at < ${ts("$2")})`;
    // Without ids, two index ranges: leases that ran out (longest expired first) and runs nobody holds.
    const candidates =
      runIds !== undefined
        ? `run_id = ANY($${params.push(runIds)}::text[])`
        : `run_id IN (
             (SELECT run_id FROM runs WHERE ${OPEN_RUN} AND lease_owner IS NOT NULL AND lease_expires_at < ${ts("$2")}
              ORDER BY lease_expires_at LIMIT $4)
             UNION ALL
             (SELECT run_id FROM runs WHERE lease_owner IS NULL AND ${OPEN_RUN} ORDER BY run_id LIMIT $4))`;
    // FOR UPDATE re-checks the WHERE on the latest row version, so a run another coordinator took meanwhile is
    // left alone, and SKIP LOCKED passes over one it is taking right now.
    const { rows } = await this.pool.query<{ run_id: string; epoch: number }>(
      `WITH c AS (
         SELECT run_id FROM runs WHERE ${candidates} AND ${takeable}
         ORDER BY lease_expires_at NULLS FIRST, run_id LIMIT $4
         FOR UPDATE SKIP LOCKED)
       UPDATE runs SET lease_owner = $1, lease_expires_at = ${ts("$3")}, lease_epoch = runs.lease_epoch + 1
       FROM c WHERE runs.run_id = c.run_id
       RETURNING runs.run_id, runs.lease_epoch::float8 AS epoch`,
      params,
    );
    if (owner === this.owner) {
      for (const r of rows) {
        this.held.set(r.run_id, r.epoch);
        this.ended.delete(r.run_id);
        this.lostSinceRenew.delete(r.run_id);
      }
    }
    return rows.map((r) => r.run_id).sort();
  }

  async ownerOf(runId: string): Promise<RunOwner | undefined> {
    const { rows } = await this.pool.query<{ owner: string; endpoint: string | null; epoch: number; expires_at: number | null }>(
      `SELECT r.lease_owner AS owner, c.endpoint, r.lease_epoch::float8 AS epoch, ${ms("r.lease_expires_at")} AS expires_at
       FROM runs r LEFT JOIN coordinators c ON c.instance_id = r.lease_owner
       WHERE r.run_id = $1 AND r.lease_owner IS NOT NULL`,
      [runId],
    );
    const r = rows[0];
    return r && { owner: r.owner, endpoint: r.endpoint, epoch: r.epoch, expires_at: r.expires_at ?? 0 };
  }

  async release(now: number): Promise<string[]> {
    const owner = this.attached();
    // A lease that ended a millisecond ago: takeOver's "ran out before now" holds at once for every other coordinator.
    const { rows } = await this.pool.query<{ run_id: string }>(
      `UPDATE runs SET lease_expires_at = ${ts("$2")} WHERE lease_owner = $1 AND ${OPEN_RUN} AND lease_expires_at > ${ts("$2")} RETURNING run_id`,
      [owner, now - 1],
    );
    await this.pool.query(`UPDATE coordinators SET expires_at = ${ts("$2")} WHERE instance_id = $1`, [owner, now - 1]);
    return rows.map((r) => r.run_id).sort();
  }

  async announce(endpoint: string | null, now: number, ttlMs: number): Promise<void> {
    const owner = this.attached();
    await this.pool.query(
      `INSERT INTO coordinators (instance_id, endpoint, expires_at) VALUES ($1, $2, ${ts("$3")})
       ON CONFLICT (instance_id) DO UPDATE SET endpoint = excluded.endpoint, expires_at = excluded.expires_at`,
      [owner, endpoint, now + ttlMs],
    );
  }

  async coordinators(now: number): Promise<CoordinatorRecord[]> {
    const { rows } = await this.pool.query<CoordinatorRecord>(
      `SELECT instance_id, endpoint, ${ms("expires_at")} AS expires_at FROM coordinators
       WHERE expires_at >= ${ts("$1")} ORDER BY instance_id`,
      [now],
    );
    return rows;
  }

  onCommit(listener: CommitListener): () => void {
    this.listeners.add(listener);
    if (!this.listening && !this.closed) {
      this.listening = true;
      void this.connectListener(false, 100);
    }
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Opens the LISTEN connection, retrying with backoff; after a reconnect, tells the listeners they may have missed notices. */
  private async connectListener(reconnect: boolean, delayMs: number): Promise<void> {
    // A store opened while the database was down listens once it is reached (its channel is known then).
    await whenReady(this.pool);
    if (this.closed) return;
    const client = new pg.Client(this.target.config);
    let gone = false;
    const lost = () => {
      if (gone) return;
      gone = true;
      clearInterval(this.listenProbe);
      if (this.listenClient === client) this.listenClient = undefined;
      void client.end().catch(() => {});
      this.scheduleReconnect(delayMs);
    };
    client.on("error", lost);
    client.on("end", lost);
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
    } catch {
      lost();
      return;
    }
    if (this.closed) {
      gone = true;
      await client.end().catch(() => {});
      return;
    }
    this.listenClient = client;
    client.on("notification", (msg) => {
      if (msg.channel === this.channel && msg.payload) this.deliver(msg.payload);
    });
    if (reconnect) this.emit(null, -1);
    // A connection that stays up resets the backoff.
    delayMs = 100;
    // The connection only listens, so nothing else would notice a network that holds its packets: a probe that
    // gets no answer in time drops it, and the reconnect (with its catch-up notice) follows.
    clearInterval(this.listenProbe);
    const heartbeat = setInterval(() => {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("no answer")), LISTEN_PROBE_TIMEOUT_MS)));
      Promise.race([client.query("SELECT 1"), deadline])
        .catch(() => {
          (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
          lost();
        })
        .finally(() => clearTimeout(timer));
    }, LISTEN_PROBE_EVERY_MS);
    heartbeat.unref();
    this.listenProbe = heartbeat;
  }

  private scheduleReconnect(delayMs: number): void {
    if (this.closed || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connectListener(true, Math.min(delayMs * 2, 5_000));
    }, delayMs);
    this.reconnectTimer.unref?.();
  }

  private deliver(payload: string): void {
    const lines = payload.split("\n");
    // The first line names the writer; a store's own commits are not news to it.
    if (lines[0] === this.owner) return;
    for (let i = 1; i < lines.length; i++) {
      const at = lines[i].lastIndexOf(" ");
      if (at <= 0) continue;
      this.emit(lines[i].slice(0, at), Number(lines[i].slice(at + 1)));
    }
  }

  private emit(runId: string | null, seq: number): void {
    for (const l of [...this.listeners]) {
      try {
        l(runId, seq);
      } catch {
        // One listener's failure must not keep the notice from the others.
      }
    }
  }

  /** Resolves once the LISTEN connection is up (after the first onCommit); tests wait on it before committing. */
  async whenListening(timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!this.listenClient) {
      if (this.closed || Date.now() > until) throw new Error("the commit listener is not connected");
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  async sharedSecret(name: string): Promise<Uint8Array> {
    const key = `secret:${name}`;
    // Two statements: the SELECT runs with a new snapshot, so it sees the row a concurrent first asker committed.
    await this.pool.query(`INSERT INTO nodefabric_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, [
      key,
      randomBytes(32).toString("base64"),
    ]);
    const { rows } = await this.pool.query<{ value: string }>(`SELECT value FROM nodefabric_settings WHERE name = $1`, [key]);
    return new Uint8Array(Buffer.from(rows[0]!.value, "base64"));
  }

  async close(): Promise<void> {
    if (!this.closing) {
      this.closed = true;
      if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
      clearInterval(this.listenProbe);
      const client = this.listenClient;
      this.listenClient = undefined;
      this.closing = (async () => {
        if (client) {
          client.removeAllListeners("end");
          client.removeAllListeners("error");
          client.on("error", () => {});
          // A connection the network holds would never finish ending: given a second, then dropped.
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([client.end().catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, 1_000)))]);
          clearTimeout(timer);
          (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
        }
        await this.pool.end();
      })();
    }
    return this.closing;
  }
}

/** Commit notices of one batch: the writer, then "run_id seq" per run (its last seq), in chunks pg_notify accepts. */
function notices(owner: string, next: Map<string, number>): string[] {
  const out: string[] = [];
  let chunk = owner;
  let size = Buffer.byteLength(owner);
  for (const [runId, after] of next) {
    const line = `\n${runId} ${after - 1}`;
    const n = Buffer.byteLength(line);
    if (size + n > NOTIFY_LIMIT && chunk !== owner) {
      out.push(chunk);
      chunk = owner;
      size = Buffer.byteLength(owner);
    }
    chunk += line;
    size += n;
  }
  if (chunk !== owner) out.push(chunk);
  return out;
}
