/**
 * Versioned migrations, applied at start. Every process that starts runs `migrate`; they may start at once, so the
 * whole check-and-apply happens in one transaction holding a transaction-level advisory lock: the first applies what is
 * missing and commits, the others wait for the lock, then find nothing to do. A failure rolls everything back, so a
 * database is always at a whole migration.
 */
import { createHash } from "node:crypto";
import { MIGRATIONS, type Migration } from "./migrations.js";

export { MIGRATIONS, type Migration } from "./migrations.js";

/**
 * The advisory lock key (int8) every fabric process takes to migrate: "NFMIGRAT" in ASCII. It is per database, so
 * processes migrating different schemas of one database also take turns; each holds it for milliseconds.
 */
export const MIGRATION_LOCK_KEY = 0x4e464d4947524154n;

/** The table that records what is applied. */
export const MIGRATIONS_TABLE = "nodefabric_migrations";

/** One connection inside an open transaction: runs a statement (or several, without parameters) and gives the rows. */
export type MigrationQuery = (sql: string, params?: readonly unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * Runs `work` in one transaction on one connection, committing when it resolves and rolling back when it throws.
 * The driver adapter (pg-migrate.ts) provides it.
 */
export type InTransaction = <T>(work: (query: MigrationQuery) => Promise<T>) => Promise<T>;

export interface MigrateOptions {
  /** The migrations to apply; by default this package's. Tests pass their own. */
  migrations?: readonly Migration[];
  /** The schema to migrate (created when missing); by default the connection's search_path. */
  schema?: string;
  /** The opt-in migrations to apply now, by their `optIn` name (see Migration.optIn). */
  enable?: readonly string[];
}

export interface MigrateResult {
  /** The versions this call applied, in order; empty when the database was already current. */
  applied: number[];
  /** The database's version afterwards: the last migration applied. */
  version: number;
  /** The migrations not applied because an opt-in one waits to be asked for (it first), in order; usually empty. */
  waiting: Migration[];
}

/** Why migrating stopped; nothing was changed. `code` tells the cases apart. */
export class MigrationError extends Error {
  constructor(
    readonly code: "FABRIC_PG_MIGRATION_CHECKSUM" | "FABRIC_PG_DATABASE_NEWER" | "FABRIC_PG_MIGRATIONS_INVALID" | "FABRIC_PG_UNKNOWN_OPT_IN",
    message: string,
  ) {
    super(message);
    this.name = "MigrationError";
  }
}

/** The checksum recorded for a migration: sha256 of its SQL, hex. */
export function migrationChecksum(migration: Migration): string {
  return createHash("sha256").update(migration.sql).digest("hex");
}

/** "1 (run, node type and candidate set stores)": how errors name a migration. */
const label = (version: number, name: string) => `${version} (${name})`;

/** A schema name as an SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function checkList(migrations: readonly Migration[]): void {
  let previous = 0;
  for (const m of migrations) {
    if (!Number.isSafeInteger(m.version) || m.version < 1) {
      throw new MigrationError("FABRIC_PG_MIGRATIONS_INVALID", `migration ${JSON.stringify(m.name)} has version ${m.version}; versions are whole numbers from 1`);
    }
    if (m.version <= previous) {
      throw new MigrationError("FABRIC_PG_MIGRATIONS_INVALID", `migration ${label(m.version, m.name)} comes after version ${previous}; versions must rise`);
    }
    if (!m.name.trim() || !m.sql.trim()) {
      throw new MigrationError("FABRIC_PG_MIGRATIONS_INVALID", `migration ${m.version} needs a name and SQL`);
    }
    if (m.optIn !== undefined && !/^[a-z][a-z0-9-]*$/.test(m.optIn)) {
      throw new MigrationError("FABRIC_PG_MIGRATIONS_INVALID", `migration ${label(m.version, m.name)} opts in as ${JSON.stringify(m.optIn)}; use lowercase letters, digits and -`);
    }
    previous = m.version;
  }
}

/**
 * Brings the database up to the last migration, inside `inTransaction`. Throws a MigrationError, changing nothing,
 * when an applied migration's checksum differs from this code's (it was edited after it was applied) or when the
 * database has a migration this code does not know (it was migrated by a newer release).
 */
export async function migrateWith(inTransaction: InTransaction, options: MigrateOptions = {}): Promise<MigrateResult> {
  const migrations = options.migrations ?? MIGRATIONS;
  checkList(migrations);
  const enable = new Set(options.enable ?? []);
  const known = migrations.flatMap((m) => (m.optIn !== undefined ? [m.optIn] : []));
  const unknown = [...enable].filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    throw new MigrationError(
      "FABRIC_PG_UNKNOWN_OPT_IN",
      `no migration of this release is enabled as ${unknown.map((n) => JSON.stringify(n)).join(", ")} (${known.length > 0 ? `it knows ${known.join(", ")}` : "it has none to enable"})`,
    );
  }
  return inTransaction(async (query) => {
    await query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    if (options.schema !== undefined) {
      await query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(options.schema)}`);
      await query(`SELECT set_config('search_path', $1, true)`, [quoteIdent(options.schema)]);
    }
    await query(
      `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now(),
         checksum text NOT NULL
       )`,
    );
    const rows = await query(`SELECT version, name, checksum FROM ${MIGRATIONS_TABLE} ORDER BY version`);
    const known = new Map(migrations.map((m) => [m.version, m]));
    for (const row of rows) {
      const version = Number(row.version);
      const mine = known.get(version);
      if (!mine) {
        const latest = migrations.at(-1);
        throw new MigrationError(
          "FABRIC_PG_DATABASE_NEWER",
          `the database has migration ${label(version, String(row.name))}, which this @nodefabric/plugin-postgres does not know ` +
            `(its last is ${latest ? label(latest.version, latest.name) : "none"}): the database was migrated by a newer release; run that release or a later one`,
        );
      }
      const checksum = migrationChecksum(mine);
      if (row.checksum !== checksum) {
        throw new MigrationError(
          "FABRIC_PG_MIGRATION_CHECKSUM",
          `migration ${label(version, mine.name)} was applied with checksum ${String(row.checksum)}, but this code's has ${checksum}: ` +
            `an applied migration was edited; restore it and put the change in a new migration`,
        );
      }
    }
    const done = new Set(rows.map((r) => Number(r.version)));
    // A database with no migration yet has no process of an earlier release reading it: its opt-ins apply at once.
    const fresh = done.size === 0;
    const applied: number[] = [];
    let version = Math.max(0, ...done);
    for (const [i, m] of migrations.entries()) {
      if (done.has(m.version)) continue;
      if (m.optIn !== undefined && !fresh && !enable.has(m.optIn)) {
        return { applied, version, waiting: migrations.slice(i).filter((w) => !done.has(w.version)) };
      }
      await query(m.sql);
      await query(`INSERT INTO ${MIGRATIONS_TABLE} (version, name, checksum) VALUES ($1, $2, $3)`, [m.version, m.name, migrationChecksum(m)]);
      applied.push(m.version);
      version = m.version;
    }
    return { applied, version, waiting: [] };
  });
}
