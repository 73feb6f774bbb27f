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
 *
 * Events are written one row per event until the database has migration 4 (`grouped-events`), and from then on one
 * row per run and transaction; both forms are read everywhere (pg-run-events.ts). Which runs a coordinator holds, and
 * the fencing, are pg-run-ownership.ts; the notices of commits to the other processes, pg-commit-notices.ts.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import {
  byAge,
  clock,
  RunExistsError,
  rootTypesOf,
  rowMappers,
  UnknownRunError,
  type ApprovalListing,
  type ApprovalListQuery,
  type ApprovalRecord,
  type ApprovalRow as ApprovalRowOf,
  type ClaimOptions,
  type CoordinatorRecord,
  type NodeRunRecord,
  type NodeRunRow as NodeRunRowOf,
  type RunListQuery,
  type RunOwner,
  type RunRecord,
  type RunRow as RunRowOf,
  type RunStore,
  type SharedRunStore,
  type WriteBatch,
} from "@nodefabric/core";
import { ms, pingPool, ts, whenOpened, type PgTarget } from "./connect.js";
import { inTransaction } from "./pg-migrate.js";
import { channelOf, notices, PgCommitNotices, type CommitListener } from "./pg-commit-notices.js";
import { PgRunOwnership } from "./pg-run-ownership.js";
import { eventRows, eventsFrom, insertEventsSql, LIST_EVENTS_SQL } from "./pg-run-events.js";
import { GROUPED_EVENTS_VERSION } from "./migrations.js";
import { APPROVAL_COLUMNS, NODE_RUN_COLUMNS, OPEN_NODE_RUN, OPEN_RUN, QUEUE_STATS_SQL, RUN_COLUMNS } from "./pg-run-sql.js";

type RunEvent = Awaited<ReturnType<RunStore["apply"]>>[number];

// Rows hold each record's document as jsonb, which arrives parsed.
type RunRow = RunRowOf<RunRecord["run"]>;
type NodeRunRow = NodeRunRowOf<NodeRunRecord["node_run"]>;
type ApprovalRow = ApprovalRowOf<ApprovalRecord["decision"]>;
const { toRun, toNodeRun, toApproval } = rowMappers<unknown>((doc) => doc);

/** The last record of each id, in id order (one upsert statement may not touch a row twice). */
function lastById<T>(records: readonly T[] | undefined, id: (r: T) => string): T[] {
  if (!records || records.length === 0) return [];
  const m = new Map<string, T>();
  for (const r of records) m.set(id(r), r);
  return [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
}

/** RunStore and SharedRunStore on one PostgreSQL schema. */
export class PgRunStore implements RunStore, SharedRunStore {
  private readonly ownership: PgRunOwnership;
  private readonly notices: PgCommitNotices;
  private closing: Promise<void> | undefined;
  /**
   * Whether the database has migration 4, so events are written grouped: learnt at open and, until then, by every
   * batch's first statement (an operator enables it while the coordinators run). Never turned back off.
   */
  private grouped = false;

  /** Opens the store: `pool` is migrated already; `channel` names the channel of commit notices. */
  constructor(
    private readonly pool: pg.Pool,
    target: PgTarget,
    channel: string,
  ) {
    this.ownership = new PgRunOwnership(pool);
    this.notices = new PgCommitNotices(pool, target, () => this.ownership.owner);
    this.notices.channel = channel;
  }

  /**
   * Opens a store on a pool of openPool, finding the schema it works in: now, or, when the database could not be
   * reached yet, once the pool reaches it (before it serves anything).
   */
  static async open(pool: pg.Pool, target: PgTarget): Promise<PgRunStore> {
    const store = new PgRunStore(pool, target, "");
    await whenOpened(pool, async (query) => {
      const rows = await query(
        `SELECT current_schema() AS schema, EXISTS (SELECT 1 FROM nodefabric_migrations WHERE version = ${GROUPED_EVENTS_VERSION}) AS grouped`,
      );
      store.notices.channel = channelOf((rows[0]?.schema as string | undefined) ?? "public");
      if (rows[0]?.grouped === true) store.grouped = true;
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

  /** Whether this store writes a transaction's events of a run in one row (the database has migration 4). */
  get writesGroupedEvents(): boolean {
    return this.grouped;
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
    const owner = this.ownership.owner;

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
      // Until events are known to be grouped, the statement also asks whether migration 4 was applied meanwhile.
      const askGrouped = this.grouped
        ? ""
        : `\n         UNION ALL SELECT 'g', NULL, NULL, NULL, NULL, NULL FROM nodefabric_migrations WHERE version = ${GROUPED_EVENTS_VERSION}`;
      const { rows } = await c.query<{ k: "f" | "u" | "s" | "g"; run_id: string; lease_owner: string | null; epoch: number | null; last_seq: number | null; inserted: boolean | null }>(
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
         UNION ALL SELECT 's', run_id, NULL, NULL, last_seq, NULL FROM sq${askGrouped}`,
        [
          JSON.stringify(runRows),
          owner ?? null,
          owner !== undefined ? clock.now() + this.ownership.leaseMs : null,
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
        this.ownership.fence(owner, rows.filter((r) => r.k === "f"));
      }
      // The first seq of every run that takes some: its new counter minus its events in the batch.
      const next = new Map<string, number>();
      const inserted: string[] = [];
      for (const r of rows) {
        if (r.k === "g") this.grouped = true;
        if (r.k === "f" || r.k === "g") continue;
        const n = counts.get(r.run_id);
        if (n !== undefined) next.set(r.run_id, r.last_seq! - n);
        if (r.inserted) inserted.push(r.run_id);
      }
      const missing = others.find((id) => !next.has(id));
      if (missing !== undefined) throw new UnknownRunError(missing);

      // Statement 2: NodeRuns, approvals, events and the commit notice.
      if (nodeRuns.length === 0 && approvals.length === 0 && events.length === 0) return { out: [], inserted };
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
      const grouped = this.grouped;
      const { rows: evRows, out } = eventRows(events, next, grouped);
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
           ${insertEventsSql(grouped)})
         SELECT pg_notify($4, p) FROM unnest($5::text[]) AS p`,
        [JSON.stringify(nodeRunRows), JSON.stringify(approvalRows), JSON.stringify(evRows), this.notices.channel, notify],
      );
      return { out, inserted };
    });
    this.ownership.committed(owner, result.inserted, runs);
    return result.out;
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
    const mine = this.ownership.owner !== undefined ? `AND lease_owner = $1` : "";
    const { rows } = await this.pool.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM runs WHERE ${OPEN_RUN} ${mine} ORDER BY run_id`,
      this.ownership.owner !== undefined ? [this.ownership.owner] : [],
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

  /** Reads both forms of event rows (pg-run-events.ts): from the row holding afterSeq + 1, however many it holds. */
  async listEvents(runId: string, afterSeq: number, limit: number): Promise<RunEvent[]> {
    if (limit <= 0) return [];
    const from = afterSeq + 1;
    const { rows } = await this.pool.query<{ payload: RunEvent | RunEvent[] }>(LIST_EVENTS_SQL, [runId, from, limit]);
    return eventsFrom(rows, from, limit);
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
    if (this.ownership.owner === undefined) {
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
      params.push(this.ownership.owner);
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
    const mine = this.ownership.owner !== undefined ? `AND run_id IN (SELECT run_id FROM runs WHERE lease_owner = $${params.push(this.ownership.owner)} AND ${OPEN_RUN})` : "";
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
    const mine = this.ownership.owner !== undefined ? `AND lease_owner = $${params.push(this.ownership.owner)}` : "";
    const { rows } = await this.pool.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM runs
       WHERE ${OPEN_RUN} AND deadline_at IS NOT NULL AND deadline_at < ${ts("$1")} ${mine}
       ORDER BY deadline_at LIMIT $2`,
      params,
    );
    return rows.map(toRun);
  }

  // ---- SharedRunStore: pg-run-ownership.ts and pg-commit-notices.ts --------------------------------------------

  attach(owner: string, leaseMs: number): void {
    this.ownership.attach(owner, leaseMs);
  }

  holds(runId: string): boolean {
    return this.ownership.holds(runId);
  }

  renew(now: number): Promise<{ lost: string[] }> {
    return this.ownership.renew(now);
  }

  takeOver(now: number, limit: number, runIds?: string[]): Promise<string[]> {
    return this.ownership.takeOver(now, limit, runIds);
  }

  ownerOf(runId: string): Promise<RunOwner | undefined> {
    return this.ownership.ownerOf(runId);
  }

  release(now: number): Promise<string[]> {
    return this.ownership.release(now);
  }

  announce(endpoint: string | null, now: number, ttlMs: number): Promise<void> {
    return this.ownership.announce(endpoint, now, ttlMs);
  }

  coordinators(now: number): Promise<CoordinatorRecord[]> {
    return this.ownership.coordinators(now);
  }

  onCommit(listener: CommitListener): () => void {
    return this.notices.onCommit(listener);
  }

  /** Resolves once the LISTEN connection is up (after the first onCommit); tests wait on it before committing. */
  whenListening(timeoutMs = 10_000): Promise<void> {
    return this.notices.whenListening(timeoutMs);
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
      const listener = this.notices.close();
      this.closing = (async () => {
        await listener;
        await this.pool.end();
      })();
    }
    return this.closing;
  }
}
