/**
 * The SQLite RunStore's writes on a worker thread (sqlite-writer.mjs): one connection of its own to the same file,
 * which runs the store's writes in the order they were asked and answers each once its COMMIT has returned. Reads
 * stay on the store's connection: in WAL mode they see every commit as soon as it returns, and never wait for one.
 *
 * The thread keeps the process alive only while a write is on its way, so a store left open does not hold a process
 * that has nothing else to do. Should the thread die, every write on its way and every later one fails with a clear
 * error; nothing it had not acknowledged was committed.
 */
import { Worker } from "node:worker_threads";
import type { SqliteDriverName } from "./sqlite-driver.js";
import type { WriteRows } from "./sqlite-writer.mjs";

/** Where the SQLite RunStore's writes run: `thread`, a connection of their own on a worker thread; `inline`, the store's. */
export type SqliteWriterMode = "thread" | "inline";

/** The value of FABRIC_SQLITE_WRITER: a mode, undefined when unset or empty, an error naming the choices otherwise. */
export function parseSqliteWriter(value: string | undefined): SqliteWriterMode | undefined {
  if (value === undefined || value === "") return undefined;
  if (value === "thread" || value === "inline") return value;
  throw new Error(`FABRIC_SQLITE_WRITER must be "thread" or "inline", not ${JSON.stringify(value)}`);
}

/**
 * The mode a store at `file` writes in: the one asked (options, else FABRIC_SQLITE_WRITER), else `inline`. A database
 * only in memory has no file a second connection could open, so it is always written inline.
 *
 * `inline` is the default because, measured on 2 cores (docs/performance.md), the thread takes about a sixth of the
 * event loop's time per run off it and halves the longest stall of a 10,000-child fan-out, but gains no throughput
 * there (the loop then waits on the commits' round trips) and costs 25 to 35 MB more peak RSS.
 */
export function chooseSqliteWriter(file: string, asked?: SqliteWriterMode): SqliteWriterMode {
  if (file === "" || file === ":memory:" || file.startsWith("file:")) return "inline";
  return asked ?? parseSqliteWriter(process.env.FABRIC_SQLITE_WRITER) ?? "inline";
}

/** SQLite's error, as the thread reported it: its message and its code (SQLITE_CONSTRAINT_…). */
export class SqliteWriteError extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
    this.name = "SqliteWriteError";
  }
}

/** What the thread needs to open the file as the store did, and the SQL of each statement it runs. */
export interface SqliteWriterThreadOptions {
  file: string;
  driver: SqliteDriverName;
  nativeBinding?: string;
  /** runs, nodeRuns, approvals and events (positional parameters), claim (named) and releaseLeases (one owner). */
  sql: Record<"runs" | "nodeRuns" | "approvals" | "events" | "claim" | "releaseLeases", string>;
}

interface Pending {
  resolve: (value: Reply) => void;
  reject: (err: Error) => void;
}

interface Reply {
  id: number;
  error?: { name: string; message: string; code?: string };
  rows?: unknown[];
  changes?: number;
}

/** The worker's script, beside this module in core/src/store and in core/dist alike. */
const SCRIPT = new URL("./sqlite-writer.mjs", import.meta.url);

export class SqliteWriterThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private dead: Error | undefined;

  constructor(options: SqliteWriterThreadOptions) {
    this.worker = new Worker(SCRIPT, { workerData: { nodefabricSqliteWriter: options } });
    this.worker.unref();
    this.worker.on("message", (reply: Reply) => {
      const p = this.pending.get(reply.id);
      if (!p) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) this.worker.unref();
      if (reply.error) p.reject(new SqliteWriteError(reply.error.message, reply.error.code));
      else p.resolve(reply);
    });
    this.worker.on("error", (err) => this.fail(new Error(`the SQLite writer thread failed: ${err.message}`, { cause: err })));
    this.worker.on("exit", (code) => this.fail(new Error(`the SQLite writer thread stopped (exit code ${code})`)));
  }

  private fail(err: Error): void {
    this.dead ??= err;
    for (const p of this.pending.values()) p.reject(this.dead);
    this.pending.clear();
  }

  private ask(message: Record<string, unknown>): Promise<Reply> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id });
    });
  }

  /** Commits a batch of rows in one transaction. */
  async write(rows: WriteRows): Promise<void> {
    await this.ask({ op: "apply", rows });
  }

  /** Runs the claim statement in one transaction; the rows it returned. */
  async claim(options: { owner: string; expires: number; now: number; limit: number }): Promise<unknown[]> {
    return (await this.ask({ op: "claim", options })).rows ?? [];
  }

  /** Runs the release statement; how many rows it changed. */
  async releaseLeases(owner: string): Promise<number> {
    return (await this.ask({ op: "release", owner })).changes ?? 0;
  }

  /** Closes the thread's connection once the writes asked before are done, and lets the thread end. */
  async close(): Promise<void> {
    if (this.dead) return;
    await this.ask({ op: "close" });
    await new Promise<void>((resolve) => {
      if (this.dead) resolve();
      else this.worker.once("exit", () => resolve());
    });
  }
}
