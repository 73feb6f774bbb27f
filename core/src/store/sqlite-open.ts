/**
 * Opening a SQLite file the way every NodeFabric store wants it, and migrating its schema.
 */
import fs from "node:fs";
import path from "node:path";
import { openSqliteDatabase, type SqliteDatabase, type SqliteOpenOptions } from "./sqlite-driver.js";

/**
 * Makes a database file (and its -wal and -shm companions, which SQLite creates with the file's own mode) readable and
 * writable by its owner only: it holds every run's inputs and outputs. A file made by an older version is tightened.
 */
function ownerOnly(file: string): void {
  try {
    fs.closeSync(fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600));
    for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
      let mode: number;
      try {
        mode = fs.statSync(f).mode;
      } catch {
        continue;
      }
      if ((mode & 0o077) !== 0) fs.chmodSync(f, 0o600);
    }
  } catch {
    // a file system without modes, or a file we may open but not change: SQLite reports what matters
  }
}

/**
 * Opens (creating its folder, 0700, and the file, 0600) a SQLite file in WAL mode, durable across a process crash, with
 * node:sqlite or better-sqlite3 (sqlite-driver.ts: `options.driver`, else FABRIC_SQLITE_DRIVER, else the Node's own).
 */
export function openSqlite(file: string, options: SqliteOpenOptions = {}): SqliteDatabase {
  if (file !== ":memory:" && !file.startsWith("file:") && file !== "") {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    ownerOnly(file);
  }
  const db = openSqliteDatabase(file, options);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  return db;
}

/**
 * Brings a file's schema up to `migrations.length`, tracked by `user_version`. The first step is idempotent
 * (`CREATE … IF NOT EXISTS`) and always replayed, so stores sharing one file never break each other; later steps
 * run once each.
 */
export function migrateSqlite(db: SqliteDatabase, migrations: readonly string[]): void {
  const current = db.pragma("user_version", { simple: true }) as number;
  const target = migrations.length;
  db.transaction(() => {
    db.exec(migrations[0]);
    for (let v = Math.max(current, 1); v < migrations.length; v++) db.exec(migrations[v]);
    if (current < target) db.pragma(`user_version = ${target}`);
  })();
}
