/**
 * The Node Registry's store on PostgreSQL. A version's sort key is computed once, when it is published (core's
 * node-type-version-order: semver by semver, any other version just above the highest semver published before it),
 * under a per-node-type advisory lock so that two registries publishing versions of one node type at once take
 * turns. Node type JSON is kept in a json column and served byte for byte.
 */
import type pg from "pg";
import { cursorKey, orderKey, type NodeTypeStore } from "@nodefabric/core";
import { iso, pingPool } from "./connect.js";
import { inTransaction } from "./pg-migrate.js";

type StoredNodeType = Parameters<NodeTypeStore["insertNodeType"]>[0];
type NodeKind = StoredNodeType["kind"];
type NodeTypeListQuery = Parameters<NodeTypeStore["listNodeTypes"]>[0];
type NodeTypeListPage = Awaited<ReturnType<NodeTypeStore["listNodeTypes"]>>;
type ExecutorRecord = Parameters<NodeTypeStore["putExecutor"]>[0];
type ExecutorFilter = NonNullable<Parameters<NodeTypeStore["listExecutors"]>[0]>;

const COLUMNS = `node_type_id, version, kind, doc::text AS json, ${iso("published_at")} AS published_at`;

/** The advisory lock class of node type publication ("NFNT"); the second key is the node type id's hash. */
const PUBLISH_LOCK = 0x4e464e54;

/** NodeTypeStore on one PostgreSQL schema. */
export class PgNodeTypeStore implements NodeTypeStore {
  private closing: Promise<void> | undefined;

  constructor(private readonly pool: pg.Pool) {}

  async insertNodeType(record: StoredNodeType): Promise<{ inserted: boolean; stored: StoredNodeType }> {
    return inTransaction(this.pool, async (c) => {
      await c.query(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, [PUBLISH_LOCK, record.node_type_id]);
      const existing = await c.query<StoredNodeType>(`SELECT ${COLUMNS} FROM node_types WHERE node_type_id = $1 AND version = $2`, [
        record.node_type_id,
        record.version,
      ]);
      if (existing.rows[0]) return { inserted: false, stored: existing.rows[0] };
      const top = await c.query<{ seq: number | null; key: string | null }>(
        `SELECT max(published_seq) AS seq, max(version_key) AS key FROM node_types WHERE node_type_id = $1`,
        [record.node_type_id],
      );
      const seq = top.rows[0]?.seq == null ? 0 : top.rows[0].seq + 1;
      const key = orderKey(record.version, seq, top.rows[0]?.key ?? undefined);
      await c.query(
        `INSERT INTO node_types (node_type_id, version, version_key, kind, doc, published_at, published_seq)
         VALUES ($1, $2, $3, $4, $5::json, $6::timestamptz, $7)`,
        [record.node_type_id, record.version, key, record.kind, record.json, record.published_at, seq],
      );
      return { inserted: true, stored: { ...record } };
    });
  }

  async getNodeType(nodeTypeId: string, version: string): Promise<StoredNodeType | undefined> {
    const { rows } = await this.pool.query<StoredNodeType>(`SELECT ${COLUMNS} FROM node_types WHERE node_type_id = $1 AND version = $2`, [
      nodeTypeId,
      version,
    ]);
    return rows[0];
  }

  async latestNodeType(nodeTypeId: string): Promise<StoredNodeType | undefined> {
    const { rows } = await this.pool.query<StoredNodeType>(
      `SELECT ${COLUMNS} FROM node_types WHERE node_type_id = $1 ORDER BY version_key DESC LIMIT 1`,
      [nodeTypeId],
    );
    return rows[0];
  }

  async listVersions(nodeTypeId: string): Promise<string[]> {
    const { rows } = await this.pool.query<{ version: string }>(`SELECT version FROM node_types WHERE node_type_id = $1 ORDER BY version_key`, [
      nodeTypeId,
    ]);
    return rows.map((r) => r.version);
  }

  async listNodeTypes(query: NodeTypeListQuery): Promise<NodeTypeListPage> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.kind !== undefined) where.push(`kind = $${params.push(query.kind)}`);
    if (query.q !== undefined && query.q !== "") where.push(`strpos(lower(node_type_id), $${params.push(query.q.toLowerCase())}) > 0`);
    if (query.after) {
      const id = `$${params.push(query.after.node_type_id)}`;
      const version = `$${params.push(query.after.version)}`;
      const fallback = `$${params.push(cursorKey(query.after.version))}`;
      where.push(
        `(node_type_id, version_key) > (${id}::text, coalesce(
           (SELECT version_key FROM node_types WHERE node_type_id = ${id} AND version = ${version}), ${fallback}::text))`,
      );
    }
    const filter = where.length > 0 ? `WHERE ${where.join(" AND ")}` : "";
    // One extra row tells whether another page follows.
    const { rows } = await this.pool.query<StoredNodeType>(
      `SELECT ${COLUMNS} FROM node_types ${filter} ORDER BY node_type_id, version_key LIMIT $${params.push(query.limit + 1)}`,
      params,
    );
    const more = rows.length > query.limit;
    if (more) rows.length = query.limit;
    return { items: rows, more };
  }

  async latestNodeTypes(kind?: NodeKind): Promise<StoredNodeType[]> {
    const { rows } = await this.pool.query<StoredNodeType>(
      `SELECT ${COLUMNS} FROM (
         SELECT DISTINCT ON (node_type_id) * FROM node_types ORDER BY node_type_id, version_key DESC) latest
       WHERE ($1::text IS NULL OR kind = $1)
       ORDER BY node_type_id`,
      [kind ?? null],
    );
    return rows;
  }

  async putExecutor(record: ExecutorRecord): Promise<ExecutorRecord> {
    await inTransaction(this.pool, async (c) => {
      await c.query(
        `INSERT INTO executors (executor_instance_id, doc, registered_at, last_seen_at) VALUES ($1, $2::jsonb, $3::timestamptz, $3::timestamptz)
         ON CONFLICT (executor_instance_id) DO UPDATE SET doc = excluded.doc, registered_at = excluded.registered_at,
           last_seen_at = excluded.last_seen_at`,
        [record.executor_instance_id, JSON.stringify(record), record.registered_at],
      );
      // Two statements: within one, the INSERT would still see the rows the DELETE removes, and skip them.
      await c.query(`DELETE FROM executor_node_types WHERE executor_instance_id = $1`, [record.executor_instance_id]);
      await c.query(
        `INSERT INTO executor_node_types (node_type_id, version, executor_instance_id)
         SELECT DISTINCT t.node_type_id, t.version, $1 FROM unnest($2::text[], $3::text[]) AS t(node_type_id, version)
         ON CONFLICT DO NOTHING`,
        [record.executor_instance_id, record.node_types.map((t) => t.node_type_id), record.node_types.map((t) => t.version)],
      );
    });
    return record;
  }

  async listExecutors(filter: ExecutorFilter = {}): Promise<ExecutorRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.node_type_id !== undefined) {
      const id = `$${params.push(filter.node_type_id)}`;
      const version = filter.version !== undefined ? `AND x.version = $${params.push(filter.version)}` : "";
      where.push(
        `EXISTS (SELECT 1 FROM executor_node_types x
                 WHERE x.executor_instance_id = e.executor_instance_id AND x.node_type_id = ${id} ${version})`,
      );
    }
    if (filter.seen_since !== undefined) where.push(`e.last_seen_at >= $${params.push(filter.seen_since)}::timestamptz`);
    const { rows } = await this.pool.query<{ doc: ExecutorRecord }>(
      `SELECT e.doc FROM executors e ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY e.executor_instance_id`,
      params,
    );
    return rows.map((r) => r.doc);
  }

  async touchExecutor(executorInstanceId: string, at: string): Promise<boolean> {
    const res = await this.pool.query(
      `UPDATE executors SET last_seen_at = greatest(last_seen_at, $2::timestamptz) WHERE executor_instance_id = $1`,
      [executorInstanceId, at],
    );
    return (res.rowCount ?? 0) > 0;
  }

  async pruneExecutors(before: string): Promise<number> {
    const res = await this.pool.query(`DELETE FROM executors WHERE last_seen_at < $1::timestamptz`, [before]);
    return res.rowCount ?? 0;
  }

  /** Whether the database answers now (for /v1/health; see pingPool). */
  ping(): Promise<void> {
    return pingPool(this.pool);
  }

  async close(): Promise<void> {
    this.closing ??= this.pool.end();
    return this.closing;
  }
}

