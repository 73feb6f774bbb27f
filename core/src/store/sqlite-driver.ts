/**
 * The one face the SQLite stores talk to, over either driver: Node's own `node:sqlite` (Node 22.13 and later, nothing
 * to compile) or `better-sqlite3` (an optional peer dependency, for older Node). Both run the same SQL on the same
 * file format, so a database written by one opens with the other. The face is better-sqlite3's, cut to what the
 * stores use: positional or named (`@name`, object keys without the prefix) parameters, integers as JS numbers, BLOBs
 * as Buffers, `pluck()`, and transaction functions with `.immediate`.
 *
 * `FABRIC_SQLITE_DRIVER=node|better-sqlite3` forces one; by default node:sqlite where Node has it. Measured on Node 24
 * with the run store's tick (test/bench/sqlite-drivers.mjs), node:sqlite runs at 0.96-1.02x better-sqlite3; and
 * better-sqlite3 12 built against Node 24.19+ headers can abort the process when the garbage collector frees one of
 * its objects (nodejs/node#65446), which node:sqlite cannot.
 */
import { createRequire } from "node:module";

/** A driver's name, as FABRIC_SQLITE_DRIVER spells it. */
export type SqliteDriverName = "node" | "better-sqlite3";

/** What a write statement reports. */
export interface SqliteRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

/** A prepared statement. Parameters: values in order, or one object of named values. */
export interface SqliteStatement {
  run(...params: unknown[]): SqliteRunResult;
  /** The first row, or undefined when there is none. */
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
  /** From now on, rows are their first column's value. Returns the statement. */
  pluck(): SqliteStatement;
}

/** A transaction function: calling it runs the body in a DEFERRED transaction (a savepoint when nested). */
export interface SqliteTransaction<A extends unknown[], R> {
  (...args: A): R;
  /** The same body in a transaction that takes the write lock at BEGIN. */
  immediate(...args: A): R;
}

/** An open SQLite database. */
export interface SqliteDatabase {
  /** The driver that opened it. */
  readonly driver: SqliteDriverName;
  exec(sql: string): void;
  prepare(sql: string): SqliteStatement;
  /** Wraps `fn` so each call commits what it wrote, or rolls it all back when it throws. */
  transaction<A extends unknown[], R>(fn: (...args: A) => R): SqliteTransaction<A, R>;
  /** `PRAGMA <source>`: every row, or with `simple` the first row's first value. */
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): void;
}

/** How to open a file; by default, the driver FABRIC_SQLITE_DRIVER names, else the one this Node prefers. */
export interface SqliteOpenOptions {
  driver?: SqliteDriverName;
  /**
   * better-sqlite3 only: the `better_sqlite3.node` to load instead of the installed one (one built for another Node,
   * as CI does for its second Node; see .ci/better-sqlite3.sh).
   */
  nativeBinding?: string;
}

/** A driver that cannot be used, with the way out in its message. */
export class SqliteDriverError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SqliteDriverError";
  }
}

const DRIVERS: readonly SqliteDriverName[] = ["node", "better-sqlite3"];
const load = createRequire(import.meta.url);

/** The value of FABRIC_SQLITE_DRIVER: a driver's name, undefined when unset or empty, an error for anything else. */
export function parseSqliteDriver(value: string | undefined): SqliteDriverName | undefined {
  if (value === undefined || value === "") return undefined;
  if ((DRIVERS as readonly string[]).includes(value)) return value as SqliteDriverName;
  throw new SqliteDriverError(`FABRIC_SQLITE_DRIVER must be "node" or "better-sqlite3", not ${JSON.stringify(value)}`);
}

/** Whether this Node has node:sqlite without a flag: 22.13 and later on the 22 line, 23.4 and later. */
export function nodeHasSqlite(version: string = process.versions.node): boolean {
  const [major, minor] = version.split(".").map(Number);
  return major > 23 || (major === 23 && minor >= 4) || (major === 22 && minor >= 13);
}

/** The driver a store opens with: the one asked for (options, else FABRIC_SQLITE_DRIVER), else node:sqlite where Node has it. */
export function chooseSqliteDriver(asked?: SqliteDriverName): SqliteDriverName {
  const driver = asked ?? parseSqliteDriver(process.env.FABRIC_SQLITE_DRIVER);
  if (driver) return driver;
  return nodeHasSqlite() ? "node" : "better-sqlite3";
}

/** Opens `file` (":memory:" too) with the chosen driver; the caller sets pragmas. */
export function openSqliteDatabase(file: string, options: SqliteOpenOptions = {}): SqliteDatabase {
  const driver = chooseSqliteDriver(options.driver);
  return driver === "node" ? openWithNodeSqlite(file) : openWithBetterSqlite3(file, options.nativeBinding);
}

// ------------------------------------------------------------------ transactions, the same on both drivers

interface Runner {
  exec(sql: string): void;
  inTransaction(): boolean;
}

let savepoints = 0;

function makeTransaction<A extends unknown[], R>(db: Runner, fn: (...args: A) => R): SqliteTransaction<A, R> {
  const run = (begin: string, args: A): R => {
    // Nested: a savepoint inside the outer transaction, released or rolled back on its own.
    const nested = db.inTransaction();
    const name = nested ? `nf_sp_${++savepoints}` : "";
    db.exec(nested ? `SAVEPOINT ${name}` : begin);
    let result: R;
    try {
      result = fn(...args);
      if (result instanceof Promise) throw new TypeError("a transaction function cannot return a promise");
      // Inside the try: a COMMIT that fails (the file busy past busy_timeout) leaves the transaction open, to roll back.
      db.exec(nested ? `RELEASE ${name}` : "COMMIT");
    } catch (err) {
      // SQLite may already have rolled the whole transaction back (a full disk, an interrupt): then there is nothing
      // left to undo, and the body's error is the one to report.
      try {
        if (nested) {
          db.exec(`ROLLBACK TO ${name}`);
          db.exec(`RELEASE ${name}`);
        } else if (db.inTransaction()) {
          db.exec("ROLLBACK");
        }
      } catch {
        // see above
      }
      throw err;
    }
    return result;
  };
  const tx = ((...args: A) => run("BEGIN", args)) as SqliteTransaction<A, R>;
  tx.immediate = (...args: A) => run("BEGIN IMMEDIATE", args);
  return tx;
}

function pragmaOf(all: (sql: string) => unknown[], source: string, simple?: boolean): unknown {
  const rows = all(`PRAGMA ${source}`);
  if (!simple) return rows;
  const row = rows[0] as Record<string, unknown> | undefined;
  if (row === undefined) return undefined;
  for (const k in row) return row[k];
  return undefined;
}

// ------------------------------------------------------------------ node:sqlite

/** The parts of node:sqlite used here (its types are not in @types/node 20). */
interface NodeSqliteStatement {
  run(...params: unknown[]): SqliteRunResult;
  get(...params: unknown[]): Record<string, unknown> | undefined;
  all(...params: unknown[]): Record<string, unknown>[];
  iterate?(...params: unknown[]): IterableIterator<Record<string, unknown>>;
  setReturnArrays?(enabled: boolean): void;
}
interface NodeSqliteDatabase {
  exec(sql: string): void;
  prepare(sql: string): NodeSqliteStatement;
  close(): void;
  readonly isTransaction?: boolean;
}
interface NodeSqliteModule {
  DatabaseSync: new (file: string, options?: Record<string, unknown>) => NodeSqliteDatabase;
}

let nodeSqlite: NodeSqliteModule | undefined;

/**
 * node:sqlite, loaded once. Node 22 and 24 mark it experimental and warn on first load; that one warning is dropped,
 * every other warning still goes through.
 */
function loadNodeSqlite(): NodeSqliteModule {
  if (nodeSqlite) return nodeSqlite;
  if (!nodeHasSqlite()) {
    throw new SqliteDriverError(
      `FABRIC_SQLITE_DRIVER=node needs node:sqlite, in Node 22.13 or later; this is Node ${process.version}. ` +
        "Upgrade Node, or leave FABRIC_SQLITE_DRIVER unset (with better-sqlite3 installed) to use better-sqlite3",
    );
  }
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const message = typeof warning === "string" ? warning : warning?.message;
    const type = typeof warning === "string" ? (typeof rest[0] === "string" ? rest[0] : (rest[0] as { type?: string } | undefined)?.type) : warning?.name;
    if (type === "ExperimentalWarning" && /SQLite/i.test(String(message))) return;
    return (emitWarning as (...a: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    nodeSqlite = load("node:sqlite") as NodeSqliteModule;
  } finally {
    process.emitWarning = emitWarning;
  }
  return nodeSqlite;
}

/** node:sqlite gives BLOBs as Uint8Array; the stores, like better-sqlite3, see Buffers. */
function withBuffers<T>(row: T): T {
  if (row === undefined || row === null) return row;
  const r = row as Record<string, unknown>;
  for (const k in r) {
    const v = r[k];
    if (v instanceof Uint8Array && !Buffer.isBuffer(v)) r[k] = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  }
  return row;
}

function firstColumn(row: Record<string, unknown> | undefined): unknown {
  if (row === undefined) return undefined;
  for (const k in row) return withBuffers(row)[k];
  return undefined;
}

function asBuffer(v: unknown): unknown {
  return v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v;
}

class NodeStatement implements SqliteStatement {
  private plucked = false;
  private arrays = false;
  constructor(private readonly s: NodeSqliteStatement) {}

  run(...params: unknown[]): SqliteRunResult {
    return this.s.run(...params);
  }
  get(...params: unknown[]): unknown {
    const row = this.s.get(...params);
    if (!this.plucked) return withBuffers(row);
    if (row === undefined) return undefined;
    return this.arrays ? asBuffer((row as unknown as unknown[])[0]) : firstColumn(row);
  }
  all(...params: unknown[]): unknown[] {
    const rows = this.s.all(...params);
    if (!this.plucked) {
      for (const r of rows) withBuffers(r);
      return rows;
    }
    const out = new Array<unknown>(rows.length);
    for (let i = 0; i < rows.length; i++) out[i] = this.arrays ? asBuffer((rows[i] as unknown as unknown[])[0]) : firstColumn(rows[i]);
    return out;
  }
  *iterate(...params: unknown[]): IterableIterator<unknown> {
    if (this.s.iterate) {
      for (const row of this.s.iterate(...params)) {
        yield this.plucked ? (this.arrays ? asBuffer((row as unknown as unknown[])[0]) : firstColumn(row)) : withBuffers(row);
      }
    } else {
      yield* this.all(...params);
    }
  }
  pluck(): SqliteStatement {
    this.plucked = true;
    // Arrays skip building an object per row, where this Node can (24, 22.16).
    if (this.s.setReturnArrays) {
      this.s.setReturnArrays(true);
      this.arrays = true;
    }
    return this;
  }
}

function openWithNodeSqlite(file: string): SqliteDatabase {
  const { DatabaseSync } = loadNodeSqlite();
  // Foreign keys and double-quoted string literals as better-sqlite3 builds SQLite: keys enforced, "x" an identifier.
  const db = new DatabaseSync(file, { enableForeignKeyConstraints: true, enableDoubleQuotedStringLiterals: false });
  let depth = 0;
  // The statements every transaction runs, prepared once.
  const control = new Map(["BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"].map((sql) => [sql, db.prepare(sql)]));
  const runner: Runner = {
    exec: (sql) => {
      const prepared = control.get(sql);
      try {
        if (prepared) prepared.run();
        else db.exec(sql);
      } finally {
        // A failed ROLLBACK means no transaction was left to roll back.
        if (sql === "ROLLBACK") depth = 0;
      }
      if (sql === "BEGIN" || sql === "BEGIN IMMEDIATE") depth = 1;
      else if (sql === "COMMIT") depth = 0;
    },
    // isTransaction (Node 24, 22.16) sees a rollback SQLite did by itself; older Node counts what was begun here.
    inTransaction: () => (db.isTransaction ?? depth > 0) === true,
  };
  const all = (sql: string) => db.prepare(sql).all();
  return {
    driver: "node",
    exec: (sql) => db.exec(sql),
    prepare: (sql) => new NodeStatement(db.prepare(sql)),
    transaction: (fn) => makeTransaction(runner, fn),
    pragma: (source, options) => pragmaOf(all, source, options?.simple),
    close: () => db.close(),
  };
}

// ------------------------------------------------------------------ better-sqlite3

interface BetterStatement {
  run(...params: unknown[]): SqliteRunResult;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
  pluck(on?: boolean): BetterStatement;
}
interface BetterDatabase {
  exec(sql: string): void;
  prepare(sql: string): BetterStatement;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): SqliteTransaction<A, R>;
  pragma(source: string, options: { simple: boolean }): unknown;
  close(): void;
}
type BetterConstructor = new (file: string, options?: { nativeBinding?: string }) => BetterDatabase;

let better: BetterConstructor | undefined;

function loadBetterSqlite3(): BetterConstructor {
  if (better) return better;
  try {
    better = load("better-sqlite3") as BetterConstructor;
  } catch (err) {
    if ((err as { code?: string }).code !== "MODULE_NOT_FOUND") throw err;
    const asked = parseSqliteDriver(process.env.FABRIC_SQLITE_DRIVER) === "better-sqlite3";
    throw new SqliteDriverError(
      asked || nodeHasSqlite()
        ? "FABRIC_SQLITE_DRIVER=better-sqlite3, but better-sqlite3 is not installed: npm install better-sqlite3"
        : `the embedded store needs SQLite: Node ${process.version} has no node:sqlite and better-sqlite3 is not ` +
            "installed. Upgrade Node to 22.13 or later (node:sqlite is built in), or npm install better-sqlite3",
    );
  }
  return better;
}

function openWithBetterSqlite3(file: string, nativeBinding?: string): SqliteDatabase {
  const Database = loadBetterSqlite3();
  let db: BetterDatabase;
  try {
    db = new Database(file, nativeBinding ? { nativeBinding } : {});
  } catch (err) {
    const message = (err as Error).message ?? "";
    // The native module is loaded at the first open: one built for another Node fails here.
    // ERR_DLOPEN_FAILED: another Node's ABI (the first time; "did not self-register" after), another platform's file.
    if ((err as { code?: string }).code === "ERR_DLOPEN_FAILED" || /NODE_MODULE_VERSION|Could not locate the bindings/.test(message)) {
      throw new SqliteDriverError(
        `better-sqlite3 cannot load its native module in Node ${process.version}: npm rebuild better-sqlite3` +
          (nodeHasSqlite() ? ", or leave FABRIC_SQLITE_DRIVER unset to use node:sqlite" : "") +
          ` (${message.split("\n")[0]})`,
      );
    }
    throw err;
  }
  return {
    driver: "better-sqlite3",
    exec: (sql) => db.exec(sql),
    // better-sqlite3's own statements and transaction functions already have this face: no layer in between.
    prepare: (sql) => db.prepare(sql),
    transaction: (fn) => db.transaction(fn),
    pragma: (source, options) => db.pragma(source, { simple: options?.simple === true }),
    close: () => db.close(),
  };
}
