/**
 * The coordinator's RunStore on SQLite (node:sqlite or better-sqlite3, WAL, synchronous=NORMAL: a committed batch survives a
 * process crash or kill -9). Each record is kept as its whole JSON document beside the columns that queries need,
 * so a read is one index lookup and one JSON.parse, never a re-assembly.
 */
import type { SqliteDriverName, SqliteDatabase, SqliteOpenOptions, SqliteStatement } from "./sqlite-driver.js";
import type { RunEvent } from "@nodefabric/schemas";
import {
  RunExistsError,
  TERMINAL_STATES,
  UnknownRunError,
  type ApprovalListing,
  type ApprovalListQuery,
  type ApprovalRecord,
  type ClaimOptions,
  type NewRunEvent,
  type NodeRunRecord,
  type RunListQuery,
  type RunRecord,
  type RunStore,
  type WriteBatch,
  runsOfBatch,
} from "./run-store.js";
import { byAge, eventWithSeq, rootTypesOf, rowMappers, type ApprovalRow as ApprovalRowOf, type NodeRunRow as NodeRunRowOf, type RunRow as RunRowOf } from "./run-rows.js";
import { openSqlite } from "./sqlite-open.js";
import { claimSqliteFile } from "./sqlite-owner.js";
import { migrateSqliteRunStore } from "./sqlite-run-migrations.js";
import { claimParameters, prepareAll, RUN_COLUMNS, WRITE_SQL } from "./sqlite-run-sql.js";
import { sumOf, trackCache } from "../observe/caches.js";
import { writeRows, type WriteRows } from "./sqlite-writer.mjs";
import { chooseSqliteWriter, SqliteWriterThread, type SqliteWriterMode } from "./sqlite-writer-thread.js";

// The statements are the store's own; the driver benchmark (test/bench/sqlite-drivers.mjs) and the tests read them here.
export { QUEUE_STATS_SQL, WRITE_SQL } from "./sqlite-run-sql.js";

/** Options of {@link openSqliteRunStore}. */
export interface SqliteRunStoreOptions extends SqliteOpenOptions {
  /** The database file; created, with its directory, when missing. */
  path: string;
  /**
   * Where the writes run (default: FABRIC_SQLITE_WRITER, else `inline`): `inline` on the store's connection, or
   * `thread`, on a connection of their own in a worker thread, beside the event loop. A database in memory is always
   * inline.
   */
  writer?: SqliteWriterMode;
}

// Rows hold each record's document as its JSON text.
type RunRow = RunRowOf<string>;
type NodeRunRow = NodeRunRowOf<string>;
type ApprovalRow = ApprovalRowOf<string>;
const { toRun, toNodeRun, toApproval } = rowMappers<string>(JSON.parse);

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
 * How many of the runs that ended last stay in memory, oldest dropped first, and how much of their documents (in
 * UTF-16 code units): a run's document carries its outputs, which may be large.
 */
const MAX_ENDED = 1_024;
const MAX_ENDED_TEXT = 8 << 20;

/**
 * RunStore on one SQLite file. Only one process may write the file (several coordinators need the PostgreSQL store),
 * which lets it keep in memory each run's next seq and the rows of the open runs and NodeRuns it has written, read or
 * claimed: the engine re-reads those in-flight records several times per dispatch. The copies change only after a
 * commit, with exactly what the commit wrote, so they never differ from the file; a terminal record leaves memory,
 * except the last runs to end, which the callers waiting for them read at once.
 */
export class SqliteRunStore implements RunStore {
  private readonly db: SqliteDatabase;
  private readonly stmt: ReturnType<typeof prepareAll>;
  /** listRuns statements, one per shape of filter, prepared on first use (an OR of filters would defeat indexes). */
  private readonly listStatements = new Map<string, SqliteStatement>();
  /** The writes' own connection on a worker thread, or undefined when they run on this connection (`writeTx`). */
  private readonly thread: SqliteWriterThread | undefined;
  private readonly writeTx: (rows: WriteRows) => void;
  private readonly claimTx: (options: ClaimOptions) => NodeRunRow[];
  /**
   * Each run a batch on its way to the writer thread touches, with that batch's settling: a later batch touching the
   * same run waits for it, since its seqs and documents follow from what the earlier one wrote. Batches of other runs
   * go on meanwhile, so the thread commits one while this thread serializes the next.
   */
  private readonly applying = new Map<string, Promise<void>>();
  private readonly nextSeq = new Map<string, number>();
  private readonly runRows = new Map<string, RunRow>();
  private readonly nodeRunRows = new Map<string, NodeRunRow>();
  private readonly endedRuns = new Map<string, RunRow>();
  private endedText = 0;
  private closed = false;
  /** Lets the file go for other processes (sqlite-owner.ts). */
  private readonly releaseFile: () => void;

  /** The SQLite driver the file was opened with. */
  get driver(): SqliteDriverName {
    return this.db.driver;
  }

  /** Where the writes run: `thread`, a connection of their own on a worker thread, or `inline` on the store's. */
  get writer(): SqliteWriterMode {
    return this.thread ? "thread" : "inline";
  }

  constructor(options: SqliteRunStoreOptions) {
    const db = openSqlite(options.path, options);
    try {
      this.releaseFile = claimSqliteFile(options.path);
    } catch (err) {
      db.close();
      throw err;
    }
    db.pragma("foreign_keys = ON");
    migrateSqliteRunStore(db);
    this.db = db;
    this.stmt = prepareAll(db);
    // IMMEDIATE takes the write lock at BEGIN: should another connection be writing the file (a maintenance tool),
    // this waits for busy_timeout there instead of failing midway on a lock upgrade.
    this.writeTx = db.transaction((rows: WriteRows) => writeRows(this.stmt.write, rows)).immediate;
    this.claimTx = db.transaction((o: ClaimOptions) => this.stmt.claim.all(claimParameters(o)) as NodeRunRow[]).immediate;
    const mode = chooseSqliteWriter(options.path, options.writer);
    this.thread = mode === "thread" ? new SqliteWriterThread({ file: options.path, driver: db.driver, nativeBinding: options.nativeBinding, sql: WRITE_SQL }) : undefined;
    // What it keeps in memory (docs/memory.md); bytes are the documents' text.
    trackCache("store.open_runs", this, (s) => ({ entries: s.runRows.size, bytes: sumOf(s.runRows.values(), (r) => r.doc.length) }), { max_entries: MAX_CACHED });
    trackCache("store.open_node_runs", this, (s) => ({ entries: s.nodeRunRows.size, bytes: sumOf(s.nodeRunRows.values(), (r) => r.doc.length) }), { max_entries: MAX_CACHED });
    trackCache("store.ended_runs", this, (s) => ({ entries: s.endedRuns.size, bytes: s.endedText }), { max_entries: MAX_ENDED, max_bytes: MAX_ENDED_TEXT });
    trackCache("store.run_seqs", this, (s) => ({ entries: s.nextSeq.size + s.applying.size }), { max_entries: MAX_CACHED });
  }

  /**
   * Makes a batch into rows, on this thread: documents serialized, each event given its seq, each event's run proven
   * to exist. Writes nothing. Every seq follows from what is committed (the caller has waited for the batch before).
   */
  private serialize(batch: WriteBatch): { rows: WriteRows; applied: Applied } {
    const runs = batch.runs ?? [];
    const nodeRuns = batch.nodeRuns ?? [];
    const approvals = batch.approvals ?? [];
    const events = batch.events ?? [];
    const runRows: unknown[] = new Array(runs.length * 8);
    const runDocs: string[] = new Array(runs.length);
    const rootTypes = runs.length > 0 ? rootTypesOf(runs, nodeRuns) : undefined;
    for (let i = 0, k = 0; i < runs.length; i++) {
      const r = runs[i];
      const doc = (runDocs[i] = JSON.stringify(r.run));
      runRows[k++] = r.run_id;
      runRows[k++] = r.tenant_id;
      runRows[k++] = r.state;
      runRows[k++] = doc;
      runRows[k++] = r.request_hash;
      runRows[k++] = r.deadline_at;
      runRows[k++] = r.created_at;
      runRows[k++] = rootTypes![i];
    }
    const nodeRunRows: unknown[] = new Array(nodeRuns.length * 14);
    const nodeRunDocs: string[] = new Array(nodeRuns.length);
    for (let i = 0, k = 0; i < nodeRuns.length; i++) {
      const n = nodeRuns[i];
      const doc = (nodeRunDocs[i] = JSON.stringify(n.node_run));
      nodeRunRows[k++] = n.node_run_id;
      nodeRunRows[k++] = n.run_id;
      nodeRunRows[k++] = n.parent_node_run_id;
      nodeRunRows[k++] = n.state;
      nodeRunRows[k++] = doc;
      nodeRunRows[k++] = n.attempt;
      nodeRunRows[k++] = n.available_at;
      nodeRunRows[k++] = n.lease_owner;
      nodeRunRows[k++] = n.lease_expires_at;
      nodeRunRows[k++] = n.approval_id;
      nodeRunRows[k++] = n.idempotency_key;
      nodeRunRows[k++] = n.spec_hash;
      nodeRunRows[k++] = n.depth;
      nodeRunRows[k++] = n.created_at;
    }
    const approvalRows: unknown[] = new Array(approvals.length * 7);
    for (let i = 0, k = 0; i < approvals.length; i++) {
      const a = approvals[i];
      approvalRows[k++] = a.approval_id;
      approvalRows[k++] = a.run_id;
      approvalRows[k++] = a.node_run_id;
      approvalRows[k++] = a.state;
      approvalRows[k++] = JSON.stringify(a.decision);
      approvalRows[k++] = a.created_at;
      approvalRows[k++] = a.resolved_at;
    }
    const nextSeq = new Map<string, number>();
    const out: RunEvent[] = new Array(events.length);
    // Each run's events of this batch, in order: one row per run, its seqs consecutive.
    const groups = new Map<string, RunEvent[]>();
    let batchRuns: Set<string> | undefined;
    for (let i = 0; i < events.length; i++) {
      const e: NewRunEvent = events[i];
      let seq = nextSeq.get(e.run_id) ?? this.nextSeq.get(e.run_id);
      if (seq === undefined) {
        batchRuns ??= new Set(runs.map((r) => r.run_id));
        if (!batchRuns.has(e.run_id) && this.stmt.runExists.get(e.run_id) === undefined) throw new UnknownRunError(e.run_id);
        const last = this.stmt.lastSeq.get(e.run_id) as number | undefined;
        seq = last === undefined ? 0 : last + 1;
      }
      nextSeq.set(e.run_id, seq + 1);
      const ev = eventWithSeq(e, seq);
      out[i] = ev;
      const group = groups.get(e.run_id);
      if (group) group.push(ev);
      else groups.set(e.run_id, [ev]);
    }
    const eventRows: unknown[] = new Array(groups.size * 7);
    let k = 0;
    for (const group of groups.values()) {
      const first = group[0];
      eventRows[k++] = first.run_id;
      eventRows[k++] = first.seq;
      eventRows[k++] = group[group.length - 1].seq;
      eventRows[k++] = first.node_run_id ?? null;
      eventRows[k++] = first.type;
      eventRows[k++] = first.time;
      eventRows[k++] = JSON.stringify(group);
    }
    return {
      rows: { runs: runRows, nodeRuns: nodeRunRows, approvals: approvalRows, events: eventRows },
      applied: { events: out, nextSeq, runDocs, nodeRunDocs },
    };
  }

  /**
   * Brings the caches in line with a batch that has just committed: an open record as written (its identity columns
   * kept from the copy in memory, when there is one; the engine never changes them after creating a record, and the
   * upserts leave them), a terminal one out of the working set, a terminal run into the few just ended.
   */
  private remember(batch: WriteBatch, applied: Applied): void {
    if (this.nextSeq.size + applied.nextSeq.size > MAX_CACHED) this.nextSeq.clear();
    for (const [runId, next] of applied.nextSeq) this.nextSeq.set(runId, next);
    const runs = batch.runs ?? [];
    for (let i = 0; i < runs.length; i++) {
      const r = runs[i];
      const cached = this.runRows.get(r.run_id) ?? this.endedRuns.get(r.run_id);
      const row: RunRow = cached
        ? { ...cached, state: r.state, doc: applied.runDocs[i], deadline_at: r.deadline_at }
        : { run_id: r.run_id, tenant_id: r.tenant_id, state: r.state, doc: applied.runDocs[i], request_hash: r.request_hash, deadline_at: r.deadline_at, created_at: r.created_at };
      if (TERMINAL_STATES.has(r.state)) {
        this.runRows.delete(r.run_id);
        this.nextSeq.delete(r.run_id);
        this.rememberEnded(row);
      } else {
        this.cacheRun(row);
      }
    }
    const nodeRuns = batch.nodeRuns ?? [];
    for (let i = 0; i < nodeRuns.length; i++) {
      const n = nodeRuns[i];
      if (TERMINAL_STATES.has(n.state)) {
        this.nodeRunRows.delete(n.node_run_id);
        continue;
      }
      const cached = this.nodeRunRows.get(n.node_run_id);
      const changed = {
        state: n.state,
        doc: applied.nodeRunDocs[i],
        attempt: n.attempt,
        available_at: n.available_at,
        lease_owner: n.lease_owner,
        lease_expires_at: n.lease_expires_at,
        approval_id: n.approval_id,
      };
      this.cacheNodeRun(
        cached
          ? { ...cached, ...changed }
          : { node_run_id: n.node_run_id, run_id: n.run_id, parent_node_run_id: n.parent_node_run_id, idempotency_key: n.idempotency_key, spec_hash: n.spec_hash, depth: n.depth, created_at: n.created_at, ...changed },
      );
    }
  }

  /** Keeps the last runs to end: the caller that waited for one (`Prefer: wait`) reads it at once. */
  private rememberEnded(row: RunRow): void {
    const had = this.endedRuns.get(row.run_id);
    if (had) {
      this.endedRuns.delete(row.run_id);
      this.endedText -= had.doc.length;
    }
    if (row.doc.length > MAX_ENDED_TEXT) return;
    this.endedRuns.set(row.run_id, row);
    this.endedText += row.doc.length;
    while (this.endedRuns.size > MAX_ENDED || this.endedText > MAX_ENDED_TEXT) {
      const [id, oldest] = this.endedRuns.entries().next().value!;
      this.endedRuns.delete(id);
      this.endedText -= oldest.doc.length;
    }
  }

  private cacheRun(row: RunRow): void {
    if (TERMINAL_STATES.has(row.state)) return;
    if (this.runRows.size >= MAX_CACHED && !this.runRows.has(row.run_id)) this.runRows.clear();
    this.runRows.set(row.run_id, row);
  }

  private cacheNodeRun(row: NodeRunRow): void {
    if (TERMINAL_STATES.has(row.state)) return;
    if (this.nodeRunRows.size >= MAX_CACHED && !this.nodeRunRows.has(row.node_run_id)) this.nodeRunRows.clear();
    this.nodeRunRows.set(row.node_run_id, row);
  }

  /** Applies a batch in one transaction and returns its events with their seq, in batch order. */
  async apply(batch: WriteBatch): Promise<RunEvent[]> {
    if (!this.thread) return this.applyOnce(batch);
    const runs = runsOfBatch(batch);
    for (;;) {
      const earlier: Promise<void>[] = [];
      for (const id of runs) {
        const p = this.applying.get(id);
        if (p) earlier.push(p);
      }
      if (earlier.length === 0) break;
      await Promise.all(earlier);
    }
    const done = this.applyOnce(batch);
    const settled = done.then(
      () => undefined,
      () => undefined,
    );
    for (const id of runs) this.applying.set(id, settled);
    void settled.then(() => {
      for (const id of runs) if (this.applying.get(id) === settled) this.applying.delete(id);
    });
    return done;
  }

  /** Batches the writer thread takes at once (see RunStore.applyConcurrency): one committing, one on its way. */
  get applyConcurrency(): number {
    return this.thread ? 2 : 1;
  }

  /** Serializes a batch, commits it (here, or on the writer thread), then brings the caches in line. */
  private async applyOnce(batch: WriteBatch): Promise<RunEvent[]> {
    // A run the batch creates must not exist (batches of the same run reach here one after the other, so what is
    // read now is what the earlier ones committed).
    if (batch.creates) {
      for (const id of batch.creates) {
        if (this.runRows.has(id) || this.endedRuns.has(id) || this.stmt.runExists.get(id) !== undefined) throw new RunExistsError(id);
      }
    }
    let applied: Applied;
    try {
      const prepared = this.serialize(batch);
      if (this.thread) await this.thread.write(prepared.rows);
      else this.writeTx(prepared.rows);
      applied = prepared.applied;
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
    let row = this.runRows.get(runId) ?? this.endedRuns.get(runId);
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
    if (limit <= 0) return [];
    const from = afterSeq + 1;
    // Every row holds at least one event, and only the first may hold some before `from`: limit + 1 rows hold
    // `limit` events after it whenever the run has that many.
    const rows = this.stmt.events.all(runId, runId, from, from, limit + 1) as Array<{ last_seq: number | null; doc: string }>;
    if (rows.length === 0) return [];
    // One parse of the joined array costs less than a parse per row: a group's array is spliced in without brackets.
    let text = "[";
    for (let i = 0; i < rows.length; i++) {
      if (i > 0) text += ",";
      text += rows[i].last_seq === null ? rows[i].doc : rows[i].doc.slice(1, -1);
    }
    const events = JSON.parse(`${text}]`) as RunEvent[];
    let start = 0;
    while (start < events.length && events[start].seq < from) start++;
    return start === 0 && events.length <= limit ? events : events.slice(start, start + limit);
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
    if (options.limit <= 0) return [];
    const rows = this.thread ? ((await this.thread.claim(claimParameters(options))) as NodeRunRow[]) : this.claimTx(options);
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
    const changes = this.thread ? await this.thread.releaseLeases(owner) : this.stmt.releaseLeases.run(owner).changes;
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
    if (this.thread) {
      await Promise.all([...this.applying.values()]);
      await this.thread.close();
    }
    this.db.close();
    this.releaseFile();
  }
}

/** Opens (creating when needed) a SQLite RunStore at `options.path`. */
export function openSqliteRunStore(options: SqliteRunStoreOptions): SqliteRunStore {
  return new SqliteRunStore(options);
}
