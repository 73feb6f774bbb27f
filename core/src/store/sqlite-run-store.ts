/**
 * The coordinator's RunStore on SQLite (node:sqlite or better-sqlite3, WAL, synchronous=NORMAL: a committed batch survives a
 * process crash or kill -9). Each record is kept as its whole JSON document beside the columns that queries need,
 * so a read is one index lookup and one JSON.parse, never a re-assembly.
 */
import type { SqliteDatabase, SqliteDriverName, SqliteOpenOptions, SqliteStatement } from "./sqlite-driver.js";
import type { RunEvent } from "@nodefabric/schemas";
import {
  TERMINAL_STATES,
  type ApprovalListing,
  type ApprovalListQuery,
  type ApprovalRecord,
  type ClaimOptions,
  type NewRunEvent,
  type NodeRunRecord,
  type NodeRunState,
  type RunListQuery,
  type RunRecord,
  type RunState,
  type RunStore,
  type WriteBatch,
} from "./run-store.js";
import { migrateSqlite, openSqlite } from "./sqlite-open.js";

/** Options of {@link openSqliteRunStore}. */
export interface SqliteRunStoreOptions extends SqliteOpenOptions {
  /** The database file; created, with its directory, when missing. */
  path: string;
}

/** The schema version this code writes; bump it with a new step in MIGRATIONS. */

// In v1 the non-terminal states are exactly these; every "open" query and partial index spells them the same way,
// because SQLite only uses a partial index when the query repeats the index's WHERE terms.
const OPEN_RUN = `state IN ('queued', 'running')`;
const OPEN_NODE_RUN = `state IN ('queued', 'assigned', 'running')`;

// The first step is idempotent (IF NOT EXISTS) so a file shared with another store that also uses user_version still
// gets these tables; later steps run once, by user_version.
const MIGRATIONS: string[] = [
  `CREATE TABLE IF NOT EXISTS runs (
     run_id TEXT PRIMARY KEY,
     tenant_id TEXT,
     state TEXT NOT NULL,
     doc TEXT NOT NULL,
     request_hash TEXT NOT NULL,
     deadline_at INTEGER,
     created_at INTEGER NOT NULL
   );
   CREATE INDEX IF NOT EXISTS runs_by_tenant ON runs (tenant_id, run_id);
   -- Also serves the open and overdue queries: open runs are the in-flight working set, a short range here.
   CREATE INDEX IF NOT EXISTS runs_by_state ON runs (state, run_id);

   CREATE TABLE IF NOT EXISTS node_runs (
     node_run_id TEXT PRIMARY KEY,
     run_id TEXT NOT NULL REFERENCES runs (run_id),
     parent_node_run_id TEXT,
     state TEXT NOT NULL,
     doc TEXT NOT NULL,
     attempt INTEGER NOT NULL,
     available_at INTEGER NOT NULL,
     lease_owner TEXT,
     lease_expires_at INTEGER,
     approval_id TEXT,
     idempotency_key TEXT,
     spec_hash TEXT,
     depth INTEGER NOT NULL,
     created_at INTEGER NOT NULL
   );
   CREATE INDEX IF NOT EXISTS node_runs_by_run ON node_runs (run_id, created_at, node_run_id);
   CREATE UNIQUE INDEX IF NOT EXISTS node_runs_idempotency
     ON node_runs (run_id, parent_node_run_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
   CREATE INDEX IF NOT EXISTS node_runs_unleased ON node_runs (created_at, node_run_id)
     WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN};
   CREATE INDEX IF NOT EXISTS node_runs_leased ON node_runs (lease_expires_at)
     WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN};

   -- Rows append in rowid order and only the narrow (run_id, seq) index takes scattered inserts: with many runs in
   -- flight this writes far fewer pages per commit than a WITHOUT ROWID table keyed by (run_id, seq) (measured 1.5-2x).
   -- No foreign key: apply proves the run exists once per run and batch, not once per event, and a run's last seq is
   -- read from the index, so no counter row is rewritten for every batch.
   CREATE TABLE IF NOT EXISTS events (
     id INTEGER PRIMARY KEY,
     run_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     node_run_id TEXT,
     type TEXT NOT NULL,
     time TEXT NOT NULL,
     doc TEXT NOT NULL
   );
   CREATE UNIQUE INDEX IF NOT EXISTS events_by_run ON events (run_id, seq);

   CREATE TABLE IF NOT EXISTS approvals (
     approval_id TEXT PRIMARY KEY,
     run_id TEXT NOT NULL REFERENCES runs (run_id),
     node_run_id TEXT NOT NULL REFERENCES node_runs (node_run_id),
     state TEXT NOT NULL,
     doc TEXT NOT NULL,
     created_at INTEGER NOT NULL,
     resolved_at INTEGER
   );`,
];

/**
 * What the listings need beyond the first schema: each run's root node type (a column, backfilled from the root
 * NodeRuns of a file written before it) and the orders approvals are listed in. Checked by the columns present, not
 * by user_version, which a file shared with another store may have moved; idempotent, in one write transaction.
 */
function addListingColumns(db: SqliteDatabase): void {
  const has = () => (db.pragma("table_info(runs)") as Array<{ name: string }>).some((c) => c.name === "root_node_type_id");
  db.transaction(() => {
    if (!has()) {
      db.exec(`ALTER TABLE runs ADD COLUMN root_node_type_id TEXT;
        UPDATE runs SET root_node_type_id = (
          SELECT json_extract(n.doc, '$.node_type_ref.node_type_id') FROM node_runs n
          WHERE n.node_run_id = json_extract(runs.doc, '$.root_node_run_id'));`);
    }
    db.exec(`CREATE INDEX IF NOT EXISTS runs_by_root_type ON runs (root_node_type_id, run_id);
      CREATE INDEX IF NOT EXISTS approvals_by_created ON approvals (created_at, approval_id);
      CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals (state, created_at, approval_id);
      CREATE INDEX IF NOT EXISTS approvals_by_run ON approvals (run_id, created_at, approval_id);`);
  }).immediate();
}

interface RunRow {
  run_id: string;
  tenant_id: string | null;
  state: RunState;
  doc: string;
  request_hash: string;
  deadline_at: number | null;
  created_at: number;
}

interface NodeRunRow {
  node_run_id: string;
  run_id: string;
  parent_node_run_id: string | null;
  state: NodeRunState;
  doc: string;
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
  doc: string;
  created_at: number;
  resolved_at: number | null;
}

const RUN_COLUMNS = "run_id, tenant_id, state, doc, request_hash, deadline_at, created_at";
const NODE_RUN_COLUMNS =
  "node_run_id, run_id, parent_node_run_id, state, doc, attempt, available_at, lease_owner, lease_expires_at, " +
  "approval_id, idempotency_key, spec_hash, depth, created_at";
const APPROVAL_COLUMNS = "approval_id, run_id, node_run_id, state, doc, created_at, resolved_at";

function toRun(row: RunRow): RunRecord {
  return {
    run_id: row.run_id,
    tenant_id: row.tenant_id,
    state: row.state,
    run: JSON.parse(row.doc),
    request_hash: row.request_hash,
    deadline_at: row.deadline_at,
    created_at: row.created_at,
  };
}

function toNodeRun(row: NodeRunRow): NodeRunRecord {
  return {
    node_run_id: row.node_run_id,
    run_id: row.run_id,
    parent_node_run_id: row.parent_node_run_id,
    state: row.state,
    node_run: JSON.parse(row.doc),
    attempt: row.attempt,
    available_at: row.available_at,
    lease_owner: row.lease_owner,
    lease_expires_at: row.lease_expires_at,
    approval_id: row.approval_id,
    idempotency_key: row.idempotency_key,
    spec_hash: row.spec_hash,
    depth: row.depth,
    created_at: row.created_at,
  };
}

function toApproval(row: ApprovalRow): ApprovalRecord {
  return {
    approval_id: row.approval_id,
    run_id: row.run_id,
    node_run_id: row.node_run_id,
    state: row.state,
    created_at: row.created_at,
    resolved_at: row.resolved_at,
    decision: JSON.parse(row.doc),
  };
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

/** Thrown by `apply` when a batch names a run that exists neither in the store nor in the batch. */
export class UnknownRunError extends Error {
  constructor(readonly runId: string) {
    super(`event for unknown run ${runId}`);
    this.name = "UnknownRunError";
  }
}

function prepareAll(db: SqliteDatabase) {
  return {
    // Identity columns (tenant, request hash, parent, idempotency key, spec hash, depth, created_at) never change
    // after creation, so the upserts leave them, and the indexes built on them, untouched.
    upsertRun: db.prepare(
      `INSERT INTO runs (run_id, tenant_id, state, doc, request_hash, deadline_at, created_at, root_node_type_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, deadline_at = excluded.deadline_at`,
    ),
    upsertNodeRun: db.prepare(
      `INSERT INTO node_runs (${NODE_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (node_run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, attempt = excluded.attempt,
         available_at = excluded.available_at, lease_owner = excluded.lease_owner,
         lease_expires_at = excluded.lease_expires_at, approval_id = excluded.approval_id`,
    ),
    upsertApproval: db.prepare(
      `INSERT INTO approvals (${APPROVAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (approval_id) DO UPDATE SET state = excluded.state, doc = excluded.doc,
         resolved_at = excluded.resolved_at`,
    ),
    runExists: db.prepare(`SELECT 1 FROM runs WHERE run_id = ?`).pluck(),
    lastSeq: db.prepare(`SELECT seq FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`).pluck(),
    insertEvent: db.prepare(`INSERT INTO events (run_id, seq, node_run_id, type, time, doc) VALUES (?, ?, ?, ?, ?, ?)`),

    getRun: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`),
    openRuns: db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE ${OPEN_RUN} ORDER BY run_id`),
    overdueRuns: db.prepare(
      `SELECT ${RUN_COLUMNS} FROM runs
       WHERE ${OPEN_RUN} AND deadline_at < ?
       ORDER BY deadline_at LIMIT ?`,
    ),

    getNodeRun: db.prepare(`SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE node_run_id = ?`),
    nodeRunsOfRun: db.prepare(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE run_id = ? ORDER BY created_at, node_run_id`,
    ),
    openNodeRunsOfRun: db.prepare(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs WHERE run_id = ? AND ${OPEN_NODE_RUN} ORDER BY created_at, node_run_id`,
    ),
    findChild: db.prepare(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs
       WHERE run_id = ? AND parent_node_run_id = ? AND idempotency_key = ?`,
    ),
    // Two index ranges, each already in the order wanted: unleased work by age, and expired leases. The update sets
    // the lease on at most `limit` of their union, oldest first.
    claim: db.prepare(
      `UPDATE node_runs SET lease_owner = @owner, lease_expires_at = @expires
       WHERE node_run_id IN (
         SELECT node_run_id FROM (
           SELECT node_run_id, created_at FROM (
             SELECT node_run_id, created_at FROM node_runs
             WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN} AND available_at <= @now
             ORDER BY created_at, node_run_id LIMIT @limit)
           UNION ALL
           SELECT node_run_id, created_at FROM (
             SELECT node_run_id, created_at FROM node_runs
             WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < @now
               AND approval_id IS NULL AND available_at <= @now
             ORDER BY created_at, node_run_id LIMIT @limit))
         ORDER BY created_at, node_run_id LIMIT @limit)
       RETURNING ${NODE_RUN_COLUMNS}`,
    ),
    releaseLeases: db.prepare(
      `UPDATE node_runs SET lease_owner = NULL, lease_expires_at = NULL
       WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_owner = ?`,
    ),
    expiredLeases: db.prepare(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs
       WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < ?
       ORDER BY lease_expires_at LIMIT ?`,
    ),

    events: db.prepare(`SELECT doc FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`).pluck(),
    queueStats: db.prepare(
      `SELECT count(*) AS depth, min(available_at) AS oldest FROM node_runs
       WHERE ${OPEN_NODE_RUN} AND approval_id IS NULL AND available_at <= @now
         AND (lease_owner IS NULL OR lease_expires_at < @now)`,
    ),

    getApproval: db.prepare(`SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE approval_id = ?`),
  };
}

/** What one committed batch leaves for the caches. */
interface Applied {
  events: RunEvent[];
  /** Next seq per run touched by the batch's events. */
  nextSeq: Map<string, number>;
  runDocs: string[];
  nodeRunDocs: string[];
}

/** Above this many entries a cache is dropped whole; it refills from the in-flight working set. */
const MAX_CACHED = 50_000;

/**
 * RunStore on one SQLite file. Only one process may write the file (several coordinators need the PostgreSQL store),
 * which lets it keep in memory each run's next seq and the rows of the open runs and NodeRuns it has read or claimed:
 * the engine re-reads those in-flight records several times per dispatch. The copies change only after a commit,
 * with exactly what the commit wrote, so they never differ from the file; a terminal record leaves memory.
 */
export class SqliteRunStore implements RunStore {
  private readonly db: SqliteDatabase;
  private readonly stmt: ReturnType<typeof prepareAll>;
  /** listRuns statements, one per shape of filter, prepared on first use (an OR of filters would defeat indexes). */
  private readonly listStatements = new Map<string, SqliteStatement>();
  private readonly applyTx: (batch: WriteBatch) => Applied;
  private readonly claimTx: (options: ClaimOptions) => NodeRunRow[];
  private readonly nextSeq = new Map<string, number>();
  private readonly runRows = new Map<string, RunRow>();
  private readonly nodeRunRows = new Map<string, NodeRunRow>();
  private closed = false;

  /** The SQLite driver the file was opened with. */
  get driver(): SqliteDriverName {
    return this.db.driver;
  }

  constructor(options: SqliteRunStoreOptions) {
    const db = openSqlite(options.path, options);
    db.pragma("foreign_keys = ON");
    migrateSqlite(db, MIGRATIONS);
    addListingColumns(db);
    this.db = db;
    this.stmt = prepareAll(db);
    // IMMEDIATE takes the write lock at BEGIN: should another connection be writing the file (a maintenance tool),
    // this waits for busy_timeout there instead of failing midway on a lock upgrade.
    this.applyTx = db.transaction((batch: WriteBatch) => this.applyNow(batch)).immediate;
    this.claimTx = db.transaction((o: ClaimOptions) => this.claimNow(o)).immediate;
  }

  private applyNow(batch: WriteBatch): Applied {
    const s = this.stmt;
    const runs = batch.runs ?? [];
    const nodeRuns = batch.nodeRuns ?? [];
    const runDocs: string[] = new Array(runs.length);
    const rootTypes = runs.length > 0 ? rootTypesOf(runs, nodeRuns) : undefined;
    for (let i = 0; i < runs.length; i++) {
      const r = runs[i];
      const doc = (runDocs[i] = JSON.stringify(r.run));
      s.upsertRun.run(r.run_id, r.tenant_id, r.state, doc, r.request_hash, r.deadline_at, r.created_at, rootTypes![i]);
    }
    const nodeRunDocs: string[] = new Array(nodeRuns.length);
    for (let i = 0; i < nodeRuns.length; i++) {
      const n = nodeRuns[i];
      const doc = (nodeRunDocs[i] = JSON.stringify(n.node_run));
      s.upsertNodeRun.run(
        n.node_run_id, n.run_id, n.parent_node_run_id, n.state, doc, n.attempt, n.available_at, n.lease_owner,
        n.lease_expires_at, n.approval_id, n.idempotency_key, n.spec_hash, n.depth, n.created_at,
      );
    }
    for (const a of batch.approvals ?? []) {
      s.upsertApproval.run(
        a.approval_id, a.run_id, a.node_run_id, a.state, JSON.stringify(a.decision), a.created_at, a.resolved_at,
      );
    }
    const nextSeq = new Map<string, number>();
    const events = batch.events ?? [];
    const out: RunEvent[] = new Array(events.length);
    for (let i = 0; i < events.length; i++) {
      const e: NewRunEvent = events[i];
      let seq = nextSeq.get(e.run_id) ?? this.nextSeq.get(e.run_id);
      if (seq === undefined) {
        // The batch's own runs are already written above, so one lookup covers both places a run may be.
        if (s.runExists.get(e.run_id) === undefined) throw new UnknownRunError(e.run_id);
        const last = s.lastSeq.get(e.run_id) as number | undefined;
        seq = last === undefined ? 0 : last + 1;
      }
      nextSeq.set(e.run_id, seq + 1);
      // Field by field: seq lands second in the JSON, and a key set to undefined is left out, as the schema wants.
      const ev: RunEvent = { run_id: e.run_id, seq, type: e.type, time: e.time };
      if (e.node_run_id !== undefined) ev.node_run_id = e.node_run_id;
      if (e.data !== undefined) ev.data = e.data;
      if (e.extensions !== undefined) ev.extensions = e.extensions;
      s.insertEvent.run(e.run_id, seq, e.node_run_id ?? null, e.type, e.time, JSON.stringify(ev));
      out[i] = ev;
    }
    return { events: out, nextSeq, runDocs, nodeRunDocs };
  }

  /** Brings the caches in line with a batch that has just committed. */
  private remember(batch: WriteBatch, applied: Applied): void {
    if (this.nextSeq.size + applied.nextSeq.size > MAX_CACHED) this.nextSeq.clear();
    for (const [runId, next] of applied.nextSeq) this.nextSeq.set(runId, next);
    const runs = batch.runs ?? [];
    for (let i = 0; i < runs.length; i++) {
      const r = runs[i];
      const cached = this.runRows.get(r.run_id);
      if (TERMINAL_STATES.has(r.state)) {
        this.runRows.delete(r.run_id);
        this.nextSeq.delete(r.run_id);
      } else if (cached) {
        // Only rows read back from the database are cached, so their identity columns are the stored ones.
        this.runRows.set(r.run_id, { ...cached, state: r.state, doc: applied.runDocs[i], deadline_at: r.deadline_at });
      }
    }
    const nodeRuns = batch.nodeRuns ?? [];
    for (let i = 0; i < nodeRuns.length; i++) {
      const n = nodeRuns[i];
      const cached = this.nodeRunRows.get(n.node_run_id);
      if (!cached) continue;
      if (TERMINAL_STATES.has(n.state)) {
        this.nodeRunRows.delete(n.node_run_id);
        continue;
      }
      this.nodeRunRows.set(n.node_run_id, {
        ...cached,
        state: n.state,
        doc: applied.nodeRunDocs[i],
        attempt: n.attempt,
        available_at: n.available_at,
        lease_owner: n.lease_owner,
        lease_expires_at: n.lease_expires_at,
        approval_id: n.approval_id,
      });
    }
  }

  private cacheRun(row: RunRow): void {
    if (TERMINAL_STATES.has(row.state)) return;
    if (this.runRows.size >= MAX_CACHED) this.runRows.clear();
    this.runRows.set(row.run_id, row);
  }

  private cacheNodeRun(row: NodeRunRow): void {
    if (TERMINAL_STATES.has(row.state)) return;
    if (this.nodeRunRows.size >= MAX_CACHED) this.nodeRunRows.clear();
    this.nodeRunRows.set(row.node_run_id, row);
  }

  private claimNow(o: ClaimOptions): NodeRunRow[] {
    if (o.limit <= 0) return [];
    return this.stmt.claim.all({ owner: o.owner, expires: o.now + o.leaseMs, now: o.now, limit: o.limit }) as NodeRunRow[];
  }

  /** Applies a batch in one transaction and returns its events with their seq, in batch order. */
  async apply(batch: WriteBatch): Promise<RunEvent[]> {
    let applied: Applied;
    try {
      applied = this.applyTx(batch);
    } catch (err) {
      // Nothing was written; dropping the seq cache also heals it should another process have written the file.
      this.nextSeq.clear();
      throw err;
    }
    this.remember(batch, applied);
    return applied.events;
  }

  /** The run with this id, or undefined. */
  async getRun(runId: string): Promise<RunRecord | undefined> {
    let row = this.runRows.get(runId);
    if (!row) {
      row = this.stmt.getRun.get(runId) as RunRow | undefined;
      if (!row) return undefined;
      this.cacheRun(row);
    }
    return toRun(row);
  }

  /** Runs newest first (by run_id), filtered by tenant (null: runs without one) and state, paged by before_run_id. */
  async listRuns(query: RunListQuery): Promise<RunRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    let shape = "";
    if (query.tenant_id === null) {
      where.push("tenant_id IS NULL");
      shape += "n";
    } else if (query.tenant_id !== undefined) {
      where.push("tenant_id = ?");
      params.push(query.tenant_id);
      shape += "t";
    }
    if (query.state !== undefined) {
      where.push("state = ?");
      params.push(query.state);
      shape += "s";
    }
    if (query.root_node_type_id !== undefined) {
      where.push("root_node_type_id = ?");
      params.push(query.root_node_type_id);
      shape += "k";
    }
    if (query.created_after !== undefined) {
      where.push("created_at > ?");
      params.push(query.created_after);
      shape += "a";
    }
    if (query.created_before !== undefined) {
      where.push("created_at < ?");
      params.push(query.created_before);
      shape += "z";
    }
    if (query.before_run_id !== undefined) {
      where.push("run_id < ?");
      params.push(query.before_run_id);
      shape += "b";
    }
    params.push(query.limit);
    let stmt = this.listStatements.get(shape);
    if (!stmt) {
      const filter = where.length ? `WHERE ${where.join(" AND ")}` : "";
      stmt = this.db.prepare(`SELECT ${RUN_COLUMNS} FROM runs ${filter} ORDER BY run_id DESC LIMIT ?`);
      this.listStatements.set(shape, stmt);
    }
    return (stmt.all(...params) as RunRow[]).map(toRun);
  }

  /** Runs not yet terminal, oldest first. */
  async listOpenRuns(): Promise<RunRecord[]> {
    return (this.stmt.openRuns.all() as RunRow[]).map(toRun);
  }

  /** The NodeRun with this id, or undefined. */
  async getNodeRun(nodeRunId: string): Promise<NodeRunRecord | undefined> {
    let row = this.nodeRunRows.get(nodeRunId);
    if (!row) {
      row = this.stmt.getNodeRun.get(nodeRunId) as NodeRunRow | undefined;
      if (!row) return undefined;
      this.cacheNodeRun(row);
    }
    return toNodeRun(row);
  }

  /** Every NodeRun of a run, oldest first. */
  async listNodeRuns(runId: string): Promise<NodeRunRecord[]> {
    return (this.stmt.nodeRunsOfRun.all(runId) as NodeRunRow[]).map(toNodeRun);
  }

  /** The NodeRuns of a run not yet terminal, oldest first: the rows are filtered in SQLite, never parsed. */
  async listOpenNodeRuns(runId: string): Promise<NodeRunRecord[]> {
    return (this.stmt.openNodeRunsOfRun.all(runId) as NodeRunRow[]).map(toNodeRun);
  }

  /** The child of a parent with this idempotency key, or undefined. */
  async findChild(runId: string, parentNodeRunId: string, idempotencyKey: string): Promise<NodeRunRecord | undefined> {
    const row = this.stmt.findChild.get(runId, parentNodeRunId, idempotencyKey) as NodeRunRow | undefined;
    return row && toNodeRun(row);
  }

  /** Events of a run with seq > afterSeq, in seq order, at most `limit`. */
  async listEvents(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]> {
    const docs = this.stmt.events.all(runId, afterSeq, limit) as string[];
    if (docs.length === 0) return [];
    // One parse of the joined array costs less than a parse per row.
    return JSON.parse(`[${docs.join(",")}]`);
  }

  /** The highest seq of a run, or -1 when it has no event (or does not exist). */
  async lastSeq(runId: string): Promise<number> {
    const next = this.nextSeq.get(runId);
    if (next !== undefined) return next - 1;
    return (this.stmt.lastSeq.get(runId) as number | undefined) ?? -1;
  }

  /** The approval with this id, or undefined. */
  async getApproval(approvalId: string): Promise<ApprovalRecord | undefined> {
    const row = this.stmt.getApproval.get(approvalId) as ApprovalRow | undefined;
    return row && toApproval(row);
  }

  /** Approvals newest first, with their run's tenant and their NodeRun's node type (see RunStore.listApprovals). */
  async listApprovals(query: ApprovalListQuery): Promise<ApprovalListing[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    let shape = "A";
    if (query.tenant_id === null) {
      where.push("r.tenant_id IS NULL");
      shape += "n";
    } else if (query.tenant_id !== undefined) {
      where.push("r.tenant_id = ?");
      params.push(query.tenant_id);
      shape += "t";
    }
    if (query.state !== undefined) {
      where.push("a.state = ?");
      params.push(query.state);
      shape += "s";
    }
    if (query.run_id !== undefined) {
      where.push("a.run_id = ?");
      params.push(query.run_id);
      shape += "r";
    }
    if (query.before !== undefined) {
      where.push("(a.created_at, a.approval_id) < (?, ?)");
      params.push(query.before.created_at, query.before.approval_id);
      shape += "b";
    }
    params.push(query.limit);
    let stmt = this.listStatements.get(shape);
    if (!stmt) {
      const filter = where.length ? `WHERE ${where.join(" AND ")}` : "";
      stmt = this.db.prepare(
        `SELECT a.approval_id, a.run_id, a.node_run_id, a.state, a.doc, a.created_at, a.resolved_at, r.tenant_id,
                json_extract(n.doc, '$.node_type_ref') AS node_type_ref
         FROM approvals a JOIN runs r ON r.run_id = a.run_id JOIN node_runs n ON n.node_run_id = a.node_run_id
         ${filter} ORDER BY a.created_at DESC, a.approval_id DESC LIMIT ?`,
      );
      this.listStatements.set(shape, stmt);
    }
    const rows = stmt.all(...params) as Array<ApprovalRow & { tenant_id: string | null; node_type_ref: string }>;
    return rows.map((row) => ({ ...toApproval(row), tenant_id: row.tenant_id, node_type_ref: JSON.parse(row.node_type_ref) }));
  }

  /** Leases up to `limit` dispatchable NodeRuns to `owner`, oldest first (see RunStore.claim). */
  async claim(options: ClaimOptions): Promise<NodeRunRecord[]> {
    const rows = this.claimTx(options);
    const out = new Array<NodeRunRecord>(rows.length);
    for (let i = 0; i < rows.length; i++) {
      this.cacheNodeRun(rows[i]);
      out[i] = toNodeRun(rows[i]);
    }
    // RETURNING gives no order guarantee.
    return out.sort(byAge);
  }

  /** Clears the leases `owner` holds on open NodeRuns; answers how many. */
  async releaseLeases(owner: string): Promise<number> {
    const changes = this.stmt.releaseLeases.run(owner).changes;
    if (changes > 0) this.nodeRunRows.clear();
    return changes;
  }

  /** Open NodeRuns whose lease expired before `now`, longest expired first. */
  async listExpiredLeases(now: number, limit: number): Promise<NodeRunRecord[]> {
    return (this.stmt.expiredLeases.all(now, limit) as NodeRunRow[]).map(toNodeRun);
  }

  /** Open runs whose deadline passed before `now`, most overdue first. */
  async listOverdueRuns(now: number, limit: number): Promise<RunRecord[]> {
    return (this.stmt.overdueRuns.all(now, limit) as RunRow[]).map(toRun);
  }

  async queueStats(now: number): Promise<{ depth: number; oldestAvailableAt: number | null }> {
    const row = this.stmt.queueStats.get({ now }) as { depth: number; oldest: number | null };
    return { depth: row.depth, oldestAvailableAt: row.oldest };
  }

  /** Closes the database; later calls do nothing. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}

/** Opens (creating when needed) a SQLite RunStore at `options.path`. */
export function openSqliteRunStore(options: SqliteRunStoreOptions): SqliteRunStore {
  return new SqliteRunStore(options);
}
