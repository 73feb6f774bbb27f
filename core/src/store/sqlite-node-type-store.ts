/**
 * The Node Registry's store on SQLite (node:sqlite or better-sqlite3, WAL). Versions are ordered by a sort key computed once, when a
 * version is published (node-type-version-order.ts: semver by semver, any other version just above the highest semver
 * published before it), so listing and keyset pagination are plain index scans. `published_seq` numbers the versions
 * of each node type in publication order; with the versions, it is all the keys are computed from.
 */
import type { SqliteDatabase, SqliteDriverName, SqliteOpenOptions } from "./sqlite-driver.js";
import { migrateSqlite, openSqlite } from "./sqlite-open.js";
import type {
  ExecutorFilter,
  ExecutorRecord,
  NodeKind,
  NodeTypeListPage,
  NodeTypeListQuery,
  NodeTypeStore,
  StoredNodeType,
} from "./node-type-store.js";
import { cursorKey, orderKey, orderKeys } from "./node-type-version-order.js";

/** The schema version this code writes; bump it with a new step in MIGRATIONS. */

// Each step is idempotent (IF NOT EXISTS) so a file shared with another store that also uses
// user_version still gets these tables.
const MIGRATIONS: string[] = [
  `CREATE TABLE IF NOT EXISTS node_types (
     node_type_id TEXT NOT NULL,
     version TEXT NOT NULL,
     version_key TEXT NOT NULL,
     kind TEXT NOT NULL,
     json TEXT NOT NULL,
     published_at TEXT NOT NULL,
     published_seq INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (node_type_id, version)
   ) WITHOUT ROWID;
   CREATE UNIQUE INDEX IF NOT EXISTS node_types_by_order ON node_types (node_type_id, version_key);
   CREATE TABLE IF NOT EXISTS executors (
     executor_instance_id TEXT PRIMARY KEY,
     json TEXT NOT NULL,
     registered_at TEXT NOT NULL,
     last_seen INTEGER
   ) WITHOUT ROWID;
   CREATE TABLE IF NOT EXISTS executor_node_types (
     node_type_id TEXT NOT NULL,
     version TEXT NOT NULL,
     executor_instance_id TEXT NOT NULL,
     PRIMARY KEY (node_type_id, version, executor_instance_id)
   ) WITHOUT ROWID;
   CREATE INDEX IF NOT EXISTS executor_node_types_by_executor ON executor_node_types (executor_instance_id);`,
];

/**
 * Brings a node_types table written before versions other than semver were allowed (no `published_seq`, and sort keys
 * in an older encoding) up to date: numbers each node type's versions by `published_at`, recomputes every sort key, and
 * rebuilds the order index (dropped first: an old key may equal another version's new key). Runs once, in one write
 * transaction; a store opening the file at the same time waits for it, then finds nothing to do.
 */
function upgradeVersionOrder(db: SqliteDatabase): void {
  const current = () => (db.pragma("table_info(node_types)") as Array<{ name: string }>).some((c) => c.name === "published_seq");
  if (current()) return;
  db.transaction(() => {
    if (current()) return;
    db.exec(`ALTER TABLE node_types ADD COLUMN published_seq INTEGER NOT NULL DEFAULT 0`);
    const rows = db
      .prepare(`SELECT node_type_id, version FROM node_types ORDER BY node_type_id, published_at, version_key`)
      .all() as Array<{ node_type_id: string; version: string }>;
    const byId = new Map<string, string[]>();
    for (const r of rows) {
      const list = byId.get(r.node_type_id);
      if (list) list.push(r.version);
      else byId.set(r.node_type_id, [r.version]);
    }
    db.exec(`DROP INDEX IF EXISTS node_types_by_order`);
    const update = db.prepare(`UPDATE node_types SET published_seq = ?, version_key = ? WHERE node_type_id = ? AND version = ?`);
    for (const [id, versions] of byId) {
      const keys = orderKeys(versions);
      versions.forEach((v, seq) => update.run(seq, keys.get(v), id, v));
    }
    db.exec(`CREATE UNIQUE INDEX node_types_by_order ON node_types (node_type_id, version_key)`);
  }).immediate();
}

/**
 * Gives an executors table written before heartbeats its `last_seen` column (ms since the epoch, so instants written
 * in any RFC 3339 form compare as times), counting each registration as the last sign of life. A column check rather
 * than a user_version step: stores sharing one file share user_version, so a numbered step could be skipped.
 */
function upgradeExecutorLastSeen(db: SqliteDatabase): void {
  const current = () => (db.pragma("table_info(executors)") as Array<{ name: string }>).some((c) => c.name === "last_seen");
  const indexed = () => (db.pragma("index_list(executors)") as Array<{ name: string }>).some((i) => i.name === "executors_by_last_seen");
  // Checked before taking the write lock, so opening an up-to-date file writes nothing.
  if (current() && indexed() && db.prepare(`SELECT 1 FROM executors WHERE last_seen IS NULL LIMIT 1`).get() === undefined) return;
  db.transaction(() => {
    if (!current()) db.exec(`ALTER TABLE executors ADD COLUMN last_seen INTEGER`);
    const rows = db.prepare(`SELECT executor_instance_id, registered_at FROM executors WHERE last_seen IS NULL`).all() as Array<{
      executor_instance_id: string;
      registered_at: string;
    }>;
    const set = db.prepare(`UPDATE executors SET last_seen = ? WHERE executor_instance_id = ?`);
    for (const r of rows) set.run(Date.parse(r.registered_at) || 0, r.executor_instance_id);
    db.exec(`CREATE INDEX IF NOT EXISTS executors_by_last_seen ON executors (last_seen)`);
  }).immediate();
}

/** An RFC 3339 instant as ms since the epoch; anything else is a caller's bug. */
function instantMs(at: string, what: string): number {
  const ms = Date.parse(at);
  if (!Number.isFinite(ms)) throw new TypeError(`${what} is not an RFC 3339 instant: ${JSON.stringify(at)}`);
  return ms;
}

interface Row {
  node_type_id: string;
  version: string;
  kind: NodeKind;
  json: string;
  published_at: string;
}

const COLUMNS = "node_type_id, version, kind, json, published_at";

/** NodeTypeStore on one SQLite file. */
export class SqliteNodeTypeStore implements NodeTypeStore {
  private readonly db: SqliteDatabase;
  private readonly stmt;
  private readonly insertTx;
  private closed = false;

  /** The SQLite driver the file was opened with. */
  get driver(): SqliteDriverName {
    return this.db.driver;
  }

  /** `options` picks the SQLite driver (sqlite-driver.ts); by default node:sqlite where Node has it. */
  constructor(path: string, options: SqliteOpenOptions = {}) {
    this.db = openSqlite(path, options);
    migrateSqlite(this.db, MIGRATIONS);
    upgradeVersionOrder(this.db);
    upgradeExecutorLastSeen(this.db);
    const db = this.db;
    this.stmt = {
      insert: db.prepare(
        `INSERT INTO node_types (node_type_id, version, version_key, kind, json, published_at, published_seq)
         VALUES (@node_type_id, @version, @version_key, @kind, @json, @published_at, @published_seq)
         ON CONFLICT (node_type_id, version) DO NOTHING`,
      ),
      top: db.prepare(`SELECT max(published_seq) AS seq, max(version_key) AS key FROM node_types WHERE node_type_id = ?`),
      get: db.prepare(`SELECT ${COLUMNS} FROM node_types WHERE node_type_id = ? AND version = ?`),
      latest: db.prepare(`SELECT ${COLUMNS} FROM node_types WHERE node_type_id = ? ORDER BY version_key DESC LIMIT 1`),
      versions: db.prepare(`SELECT version FROM node_types WHERE node_type_id = ? ORDER BY version_key`).pluck(),
      list: db.prepare(
        `SELECT ${COLUMNS} FROM node_types
         WHERE (@kind IS NULL OR kind = @kind)
           AND (@q IS NULL OR instr(lower(node_type_id), @q) > 0)
           AND (@after_id IS NULL OR (node_type_id, version_key) > (@after_id, coalesce(
                 (SELECT version_key FROM node_types WHERE node_type_id = @after_id AND version = @after_version), @after_key)))
         ORDER BY node_type_id, version_key
         LIMIT @limit`,
      ),
      latestAll: db.prepare(
        `SELECT ${COLUMNS} FROM node_types t
         WHERE t.version_key = (SELECT max(u.version_key) FROM node_types u WHERE u.node_type_id = t.node_type_id)
           AND (@kind IS NULL OR t.kind = @kind)
         ORDER BY t.node_type_id`,
      ),
      putExecutor: db.prepare(
        `INSERT INTO executors (executor_instance_id, json, registered_at, last_seen) VALUES (?, ?, ?, ?)
         ON CONFLICT (executor_instance_id) DO UPDATE
           SET json = excluded.json, registered_at = excluded.registered_at, last_seen = excluded.last_seen`,
      ),
      // max(): heartbeats relayed by several registries may arrive out of order; a late one never ages an executor.
      touchExecutor: db.prepare(`UPDATE executors SET last_seen = max(coalesce(last_seen, 0), ?) WHERE executor_instance_id = ?`),
      staleExecutors: db.prepare(`SELECT executor_instance_id FROM executors WHERE coalesce(last_seen, 0) < ?`).pluck(),
      deleteExecutor: db.prepare(`DELETE FROM executors WHERE executor_instance_id = ?`),
      clearServed: db.prepare(`DELETE FROM executor_node_types WHERE executor_instance_id = ?`),
      addServed: db.prepare(
        `INSERT INTO executor_node_types (node_type_id, version, executor_instance_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
      ),
      allExecutors: db.prepare(
        `SELECT json FROM executors WHERE (@seen_since IS NULL OR last_seen >= @seen_since) ORDER BY executor_instance_id`,
      ).pluck(),
      executorsServing: db.prepare(
        `SELECT e.json FROM executors e
         WHERE (@seen_since IS NULL OR e.last_seen >= @seen_since)
           AND EXISTS (SELECT 1 FROM executor_node_types x
                       WHERE x.executor_instance_id = e.executor_instance_id
                         AND x.node_type_id = @node_type_id
                         AND (@version IS NULL OR x.version = @version))
         ORDER BY e.executor_instance_id`,
      ).pluck(),
      ping: db.prepare(`SELECT 1`).pluck(),
    };
    this.insertTx = this.makeInsertTx();
  }

  async insertNodeType(record: StoredNodeType): Promise<{ inserted: boolean; stored: StoredNodeType }> {
    // One write transaction: the sort key depends on the versions published before this one.
    return this.insertTx.immediate(record);
  }

  private makeInsertTx() {
    return this.db.transaction((record: StoredNodeType): { inserted: boolean; stored: StoredNodeType } => {
      const existing = this.stmt.get.get(record.node_type_id, record.version) as Row | undefined;
      if (existing) return { inserted: false, stored: existing };
      const top = this.stmt.top.get(record.node_type_id) as { seq: number | null; key: string | null };
      const seq = top.seq === null ? 0 : top.seq + 1;
      const { node_type_id, version, kind, json, published_at } = record;
      this.stmt.insert.run({
        node_type_id,
        version,
        kind,
        json,
        published_at,
        published_seq: seq,
        version_key: orderKey(version, seq, top.key ?? undefined),
      });
      return { inserted: true, stored: record };
    });
  }

  async getNodeType(nodeTypeId: string, version: string): Promise<StoredNodeType | undefined> {
    return this.stmt.get.get(nodeTypeId, version) as Row | undefined;
  }

  async latestNodeType(nodeTypeId: string): Promise<StoredNodeType | undefined> {
    return this.stmt.latest.get(nodeTypeId) as Row | undefined;
  }

  async listVersions(nodeTypeId: string): Promise<string[]> {
    return this.stmt.versions.all(nodeTypeId) as string[];
  }

  async listNodeTypes(query: NodeTypeListQuery): Promise<NodeTypeListPage> {
    const rows = this.stmt.list.all({
      kind: query.kind ?? null,
      q: query.q === undefined || query.q === "" ? null : query.q.toLowerCase(),
      after_id: query.after?.node_type_id ?? null,
      after_version: query.after?.version ?? null,
      after_key: query.after ? cursorKey(query.after.version) : null,
      // One extra row tells whether another page follows.
      limit: query.limit + 1,
    }) as Row[];
    const more = rows.length > query.limit;
    if (more) rows.length = query.limit;
    return { items: rows, more };
  }

  async latestNodeTypes(kind?: NodeKind): Promise<StoredNodeType[]> {
    return this.stmt.latestAll.all({ kind: kind ?? null }) as Row[];
  }

  async putExecutor(record: ExecutorRecord): Promise<ExecutorRecord> {
    const lastSeen = instantMs(record.registered_at, "registered_at");
    this.db.transaction(() => {
      this.stmt.putExecutor.run(record.executor_instance_id, JSON.stringify(record), record.registered_at, lastSeen);
      this.stmt.clearServed.run(record.executor_instance_id);
      for (const ref of record.node_types) this.stmt.addServed.run(ref.node_type_id, ref.version, record.executor_instance_id);
    })();
    return record;
  }

  async listExecutors(filter: ExecutorFilter = {}): Promise<ExecutorRecord[]> {
    const seen_since = filter.seen_since === undefined ? null : instantMs(filter.seen_since, "seen_since");
    const rows = (filter.node_type_id === undefined
      ? this.stmt.allExecutors.all({ seen_since })
      : this.stmt.executorsServing.all({ node_type_id: filter.node_type_id, version: filter.version ?? null, seen_since })) as string[];
    return rows.map((json) => JSON.parse(json) as ExecutorRecord);
  }

  async touchExecutor(executorInstanceId: string, at: string): Promise<boolean> {
    return this.stmt.touchExecutor.run(instantMs(at, "at"), executorInstanceId).changes > 0;
  }

  async pruneExecutors(before: string): Promise<number> {
    const cutoff = instantMs(before, "before");
    return this.db.transaction(() => {
      const ids = this.stmt.staleExecutors.all(cutoff) as string[];
      for (const id of ids) {
        this.stmt.clearServed.run(id);
        this.stmt.deleteExecutor.run(id);
      }
      return ids.length;
    })();
  }

  async ping(): Promise<void> {
    this.stmt.ping.get();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
