/**
 * The SQLite run store's statements: the columns it reads, the writes (which the writer thread, sqlite-writer.mjs,
 * prepares too), the claim, and every read, prepared on one connection.
 */
import type { SqliteDatabase } from "./sqlite-driver.js";
import type { ClaimOptions } from "./run-store.js";

// In v1 the non-terminal states are exactly these; every "open" query and partial index spells them the same way,
// because SQLite only uses a partial index when the query repeats the index's WHERE terms.
export const OPEN_RUN = `state IN ('queued', 'running')`;
export const OPEN_NODE_RUN = `state IN ('queued', 'assigned', 'running')`;

export const RUN_COLUMNS = "run_id, tenant_id, state, doc, request_hash, deadline_at, created_at";
export const NODE_RUN_COLUMNS =
  "node_run_id, run_id, parent_node_run_id, state, doc, attempt, available_at, lease_owner, lease_expires_at, " +
  "approval_id, idempotency_key, spec_hash, depth, created_at";
export const APPROVAL_COLUMNS = "approval_id, run_id, node_run_id, state, doc, created_at, resolved_at";

/**
 * The statements that write, as SQL: the store prepares them on its own connection, and the writer thread
 * (sqlite-writer.mjs) on its own. Identity columns (tenant, request hash, parent, idempotency key, spec hash, depth,
 * created_at) never change after creation, so the upserts leave them, and the indexes built on them, untouched.
 */
export const WRITE_SQL = {
  runs: `INSERT INTO runs (run_id, tenant_id, state, doc, request_hash, deadline_at, created_at, root_node_type_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, deadline_at = excluded.deadline_at`,
  nodeRuns: `INSERT INTO node_runs (${NODE_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (node_run_id) DO UPDATE SET state = excluded.state, doc = excluded.doc, attempt = excluded.attempt,
       available_at = excluded.available_at, lease_owner = excluded.lease_owner,
       lease_expires_at = excluded.lease_expires_at, approval_id = excluded.approval_id`,
  approvals: `INSERT INTO approvals (${APPROVAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (approval_id) DO UPDATE SET state = excluded.state, doc = excluded.doc,
       resolved_at = excluded.resolved_at`,
  // One row per run and batch: seq and last_seq bound its events, node_run_id, type and time are its first event's.
  events: `INSERT INTO events (run_id, seq, last_seq, node_run_id, type, time, doc) VALUES (?, ?, ?, ?, ?, ?, ?)`,
  // Two index ranges, each already in the order wanted: unleased work by age, and expired leases. The update sets
  // the lease on at most `limit` of their union, oldest first.
  claim: `UPDATE node_runs SET lease_owner = @owner, lease_expires_at = @expires
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
  releaseLeases: `UPDATE node_runs SET lease_owner = NULL, lease_expires_at = NULL
     WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_owner = ?`,
};

/**
 * Ready work for the metrics (RunStore.queueStats): the two index ranges of the claim, counted. One statement with
 * `lease_owner IS NULL OR …` matches neither partial index, and SQLite then scans every NodeRun ever stored, on the
 * event loop, at every metrics scrape (a 2-million-NodeRun file: most of a second).
 */
export const QUEUE_STATS_SQL = `SELECT sum(n) AS depth, min(oldest) AS oldest FROM (
     SELECT count(*) AS n, min(available_at) AS oldest FROM node_runs
     WHERE lease_owner IS NULL AND approval_id IS NULL AND ${OPEN_NODE_RUN} AND available_at <= @now
     UNION ALL
     SELECT count(*), min(available_at) FROM node_runs
     WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < @now
       AND approval_id IS NULL AND available_at <= @now)`;

/** Every statement of the store, prepared on `db`. */
export function prepareAll(db: SqliteDatabase) {
  return {
    write: {
      runs: db.prepare(WRITE_SQL.runs),
      nodeRuns: db.prepare(WRITE_SQL.nodeRuns),
      approvals: db.prepare(WRITE_SQL.approvals),
      events: db.prepare(WRITE_SQL.events),
    },
    claim: db.prepare(WRITE_SQL.claim),
    releaseLeases: db.prepare(WRITE_SQL.releaseLeases),
    runExists: db.prepare(`SELECT 1 FROM runs WHERE run_id = ?`).pluck(),
    lastSeq: db.prepare(`SELECT coalesce(last_seq, seq) FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`).pluck(),

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
    expiredLeases: db.prepare(
      `SELECT ${NODE_RUN_COLUMNS} FROM node_runs
       WHERE lease_owner IS NOT NULL AND ${OPEN_NODE_RUN} AND lease_expires_at < ?
       ORDER BY lease_expires_at LIMIT ?`,
    ),

    // From the row holding the first event wanted (the last row starting at or before it), onwards.
    events: db.prepare(
      `SELECT last_seq, doc FROM events
       WHERE run_id = ? AND seq >= coalesce((SELECT seq FROM events WHERE run_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1), ?)
       ORDER BY seq LIMIT ?`,
    ),
    queueStats: db.prepare(QUEUE_STATS_SQL),

    getApproval: db.prepare(`SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE approval_id = ?`),
  };
}

/** The claim statement's named parameters. */
export function claimParameters(o: ClaimOptions): { owner: string; expires: number; now: number; limit: number } {
  return { owner: o.owner, expires: o.now + o.leaseMs, now: o.now, limit: o.limit };
}
