/**
 * Opening a SQLite file the way every NodeFabric store wants it, and migrating its schema.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";

/** Opens (creating its folder) a SQLite file in WAL mode, durable across a process crash. */
export function openSqlite(file: string): Database.Database {
  if (file !== ":memory:" && !file.startsWith("file:")) fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
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
export function migrateSqlite(db: Database.Database, migrations: readonly string[]): void {
  const current = db.pragma("user_version", { simple: true }) as number;
  const target = migrations.length;
  db.transaction(() => {
    db.exec(migrations[0]);
    for (let v = Math.max(current, 1); v < migrations.length; v++) db.exec(migrations[v]);
    if (current < target) db.pragma(`user_version = ${target}`);
  })();
}
