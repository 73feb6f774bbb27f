/**
 * The SQLite run store's schema and how a file written by an earlier version is brought up to it: the tables, their
 * indexes, and the columns added since, each step idempotent.
 */
import type { SqliteDatabase } from "./sqlite-driver.js";
import { migrateSqlite } from "./sqlite-open.js";
import { OPEN_NODE_RUN } from "./sqlite-run-sql.js";

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
   -- read from the index, so no counter row is rewritten for every batch. A row holds the events one batch wrote for
   -- one run (see addEventGroups); seq is the first of them.
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

/**
 * Events grouped by batch: since this version a row holds every event one batch wrote for one run, seq to last_seq,
 * as a JSON array, instead of one row per event (an atomic run's nine events take two rows, not nine: measured, about
 * a tenth of a run's time on the event loop went to those inserts). Rows written before, with last_seq NULL, hold one
 * event each as a JSON object, and are read as they are. Idempotent, by the columns present.
 */
function addEventGroups(db: SqliteDatabase): void {
  const has = (db.pragma("table_info(events)") as Array<{ name: string }>).some((c) => c.name === "last_seq");
  if (!has) db.exec("ALTER TABLE events ADD COLUMN last_seq INTEGER");
}

/** Brings a SQLite file's run tables up to what this code reads and writes. */
export function migrateSqliteRunStore(db: SqliteDatabase): void {
  migrateSqlite(db, MIGRATIONS);
  addListingColumns(db);
  addEventGroups(db);
}
