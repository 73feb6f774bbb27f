/**
 * Selection's CandidateSet store on SQLite (node:sqlite or better-sqlite3, WAL).
 */
import type { SqliteDatabase, SqliteDriverName, SqliteOpenOptions } from "./sqlite-driver.js";
import type { CandidateSetStore, StoredCandidateSet } from "./candidate-set-store.js";
import { migrateSqlite, openSqlite } from "./sqlite-open.js";

/** The schema version this code writes; bump it with a new step in MIGRATIONS. */

// Idempotent (IF NOT EXISTS) so a file shared with another store that also uses user_version still gets the table.
const MIGRATIONS: string[] = [
  `CREATE TABLE IF NOT EXISTS candidate_sets (
     id TEXT PRIMARY KEY,
     subtask_id TEXT NOT NULL,
     json TEXT NOT NULL,
     created_at TEXT NOT NULL
   ) WITHOUT ROWID;`,
];

/** CandidateSetStore on one SQLite file. */
export class SqliteCandidateSetStore implements CandidateSetStore {
  private readonly db: SqliteDatabase;
  private readonly stmt;
  private closed = false;

  /** The SQLite driver the file was opened with. */
  get driver(): SqliteDriverName {
    return this.db.driver;
  }

  /** `options` picks the SQLite driver (sqlite-driver.ts); by default node:sqlite where Node has it. */
  constructor(path: string, options: SqliteOpenOptions = {}) {
    this.db = openSqlite(path, options);
    migrateSqlite(this.db, MIGRATIONS);
    this.stmt = {
      insert: this.db.prepare(`INSERT INTO candidate_sets (id, subtask_id, json, created_at) VALUES (?, ?, ?, ?)`),
      get: this.db.prepare(`SELECT json FROM candidate_sets WHERE id = ?`).pluck(),
      ping: this.db.prepare(`SELECT 1`).pluck(),
    };
  }

  async insertCandidateSet(record: StoredCandidateSet): Promise<void> {
    this.stmt.insert.run(record.candidate_set_id, record.subtask_id, record.json, record.created_at);
  }

  async getCandidateSetJson(candidateSetId: string): Promise<string | undefined> {
    return this.stmt.get.get(candidateSetId) as string | undefined;
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
