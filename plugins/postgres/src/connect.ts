/**
 * Opening a store's connection pool from a store URL: `postgres://user@host:port/db?schema=<name>` puts every
 * connection (and the migrations) in that schema; without `schema`, the connection's own search_path is used.
 *
 * The database going away is an outage to wait out (docs/deploy.md, "When the database goes away"): every connection
 * has an error handler for its whole life, an error that says the database cannot be reached (refused, reset,
 * terminated by the server, timed out) reaches core as a StoreUnavailableError (503 to clients), connecting and
 * every query are bounded in time, and a store opened while the database refuses connections is handed out at once
 * and reaches it (migrates, then serves) in the background.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { StoreUnavailableError, type StoreOpenOptions } from "@nodefabric/core";
import { migrate } from "./pg-migrate.js";
import { asStoreError, isConnectionLost } from "./connection-lost.js";

export { asStoreError, isConnectionLost } from "./connection-lost.js";

/** Longest a connection may take to open (TCP, TLS and authentication), and a checkout to wait for one (ms). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/**
 * Longest the driver waits for the answer to one query before it gives the connection up (ms): what ends a query on a
 * network that holds packets without closing. Well above any statement of the stores on a loaded machine.
 */
export const DEFAULT_QUERY_TIMEOUT_MS = 30_000;
/** Idle time after which TCP keepalive probes a connection (ms): a LISTEN connection to a vanished peer ends. */
export const KEEPALIVE_DELAY_MS = 10_000;
/** A health probe (SELECT 1) answers within this or counts as down (ms), and its answer is kept this long. */
export const PING_TIMEOUT_MS = 2_000;
export const PING_CACHE_MS = 1_000;
/** Backoff of the background open of a store whose database was unreachable at start (ms). */
const OPEN_RETRY_FIRST_MS = 250;
const OPEN_RETRY_MAX_MS = 5_000;

export interface PgTarget {
  config: pg.ClientConfig;
  schema: string | undefined;
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Reads the URL and the store options into a pg configuration. Throws on a schema name that is not a plain identifier. */
export function pgTarget(url: URL, options: Partial<StoreOpenOptions> = {}): PgTarget {
  const u = new URL(url.toString());
  const schema = u.searchParams.get("schema") ?? undefined;
  u.searchParams.delete("schema");
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
    throw new Error(`the store URL's schema ${JSON.stringify(schema)} is not a plain identifier (letters, digits and _, not starting with a digit)`);
  }
  // Added to the URL's own `options`, if any (pg lets the URL's parameters win over the config object's). A plain
  // identifier needs no quoting, so the option string stays simple.
  if (schema !== undefined) u.searchParams.set("options", [u.searchParams.get("options"), `-c search_path=${schema}`].filter(Boolean).join(" "));
  const config: pg.ClientConfig = {
    connectionString: u.toString(),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
    connectionTimeoutMillis: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
  };
  if (options.statementTimeoutMs !== undefined) config.statement_timeout = options.statementTimeoutMs;
  // Above the statement timeout, so a slow statement is canceled by the server (and reported as such) first.
  const queryTimeout = options.queryTimeoutMs ?? Math.max(DEFAULT_QUERY_TIMEOUT_MS, (options.statementTimeoutMs ?? 0) + 5_000);
  if (queryTimeout > 0) config.query_timeout = queryTimeout;
  return { config, schema };
}

/** Statement names by SQL text; at most MAX_NAMED texts are named (statements built from data would not be). */
const names = new Map<string, string>();
const MAX_NAMED = 500;

function nameOf(text: string): string | undefined {
  let name = names.get(text);
  if (name === undefined && names.size < MAX_NAMED) {
    name = `nf_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * Makes every parameterized query of a connection a named prepared statement: the server parses and plans each of
 * the stores' statements once per connection instead of at every call, which is most of its CPU per statement on the
 * hot path (the apply statements are large). Queries without parameters (BEGIN, COMMIT, LISTEN) go as they are.
 */
function preparesStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (first: unknown, values?: unknown, callback?: unknown) => {
    if (typeof first === "string" && Array.isArray(values)) {
      const name = nameOf(first);
      if (name !== undefined) return query({ name, text: first, values }, callback);
    }
    return callback === undefined ? query(first, values) : query(first, values, callback);
  };
}

/** What a pool of a store knows of its database: reached yet, and why not. */
interface PoolState {
  ready: boolean;
  closed: boolean;
  /** Why the database has not been reached yet (when not ready). */
  lastError: Error | undefined;
  /** Resolves once ready, or closed. */
  settled: Promise<void>;
  settle: () => void;
  /** Work to do on the migrated database before the pool serves (a store's own setup). */
  hooks: Array<(query: RawQuery) => Promise<void>>;
  ping: { at: number; result: Promise<void> } | undefined;
}

type RawQuery = (text: string) => Promise<Array<Record<string, unknown>>>;

const states = new WeakMap<pg.Pool, PoolState>();

function stateOf(pool: pg.Pool): PoolState {
  const st = states.get(pool);
  if (!st) throw new Error("not a pool made by openPool");
  return st;
}

function notReached(st: PoolState): StoreUnavailableError {
  return new StoreUnavailableError(
    `the database has not been reached since the store was opened${st.lastError ? `: ${st.lastError.message}` : ""}`,
    st.lastError ? { cause: st.lastError } : {},
  );
}

/**
 * Runs `work` on the store's database once it is reached: now when it is, else in the background open, before the
 * pool serves anything.
 */
export async function whenOpened(pool: pg.Pool, work: (query: RawQuery) => Promise<void>): Promise<void> {
  const st = stateOf(pool);
  if (st.ready) {
    await work(async (text) => (await pool.query(text)).rows);
    return;
  }
  st.hooks.push(work);
}

/** Resolves once the pool serves (its database reached and migrated), or is closed. */
export function whenReady(pool: pg.Pool): Promise<void> {
  return stateOf(pool).settled;
}

/**
 * Whether the database answers now, for /v1/health: a `SELECT 1` that must answer within PING_TIMEOUT_MS, its answer
 * kept PING_CACHE_MS so health checks do not load the pool. Throws a StoreUnavailableError when it does not answer.
 */
export function pingPool(pool: pg.Pool): Promise<void> {
  const st = stateOf(pool);
  if (!st.ready) return Promise.reject(notReached(st));
  const now = Date.now();
  if (st.ping && now - st.ping.at < PING_CACHE_MS) return st.ping.result;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`the database did not answer within ${PING_TIMEOUT_MS} ms`)), PING_TIMEOUT_MS);
  });
  const probe = pool.query({ text: "SELECT 1", query_timeout: PING_TIMEOUT_MS } as pg.QueryConfig).then(() => undefined);
  probe.catch(() => {});
  const result = Promise.race([probe, timeout]).finally(() => clearTimeout(timer));
  result.catch(() => {});
  st.ping = { at: now, result };
  return result;
}

/**
 * Migrates the database of `target` on a connection of its own: without the query timeout, since a migration may
 * wait for another process's migration lock (the statement timeout, when set, still bounds it). Then runs `hooks`.
 */
async function migrateOnce(target: PgTarget, hooks: PoolState["hooks"]): Promise<void> {
  const config: pg.PoolConfig = { ...target.config, max: 1 };
  delete config.query_timeout;
  const pool = new pg.Pool(config);
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  try {
    await migrate(pool, target.schema === undefined ? {} : { schema: target.schema });
    for (const hook of hooks.splice(0)) await hook(async (text) => (await pool.query(text)).rows);
  } finally {
    await pool.end().catch(() => {});
  }
}

/**
 * A pool on `target`, migrated to this release's schema before it serves. When the database cannot be reached (an
 * outage: refused, reset, timed out, starting up), the pool is handed out anyway: every query fails with a
 * StoreUnavailableError until a background open, retried with backoff, has migrated the database. Any other failure
 * (a wrong password, an unknown database, a failed migration) is thrown: a configuration mistake stops the start.
 */
export async function openPool(target: PgTarget, poolSize: number | undefined, hooks: PoolState["hooks"] = []): Promise<pg.Pool> {
  const pool = new pg.Pool({ ...target.config, max: poolSize ?? 10 });
  // An idle connection the server drops must not crash the process; the next checkout opens a new one.
  pool.on("error", () => {});
  pool.on("connect", (client) => {
    // Nor one that is checked out (pg-pool removes its own listener then): the query under way, or the next one,
    // fails, the client is released as broken, and the pool opens a new connection.
    client.on("error", () => {});
    preparesStatements(client);
  });
  let settle!: () => void;
  const settled = new Promise<void>((resolve) => (settle = resolve));
  const st: PoolState = { ready: false, closed: false, lastError: undefined, settled, settle, hooks: [...hooks], ping: undefined };
  states.set(pool, st);
  guard(pool, st);
  try {
    await migrateOnce(target, st.hooks);
    st.ready = true;
    st.settle();
    return pool;
  } catch (err) {
    if (!isConnectionLost(err)) {
      await pool.end().catch(() => {});
      throw err;
    }
    st.lastError = err as Error;
  }
  void openInBackground(target, st);
  return pool;
}

/** Tries to reach and migrate the database until it works, or the pool is closed. */
async function openInBackground(target: PgTarget, st: PoolState): Promise<void> {
  let delay = OPEN_RETRY_FIRST_MS;
  while (!st.closed) {
    await new Promise<void>((resolve) => setTimeout(resolve, delay).unref());
    if (st.closed) return;
    try {
      await migrateOnce(target, st.hooks);
      st.ready = true;
      st.lastError = undefined;
      st.settle();
      return;
    } catch (err) {
      // Still down, or up but refusing us (a wrong password, a failed migration): reported by every query and by
      // /v1/health with its reason, and tried again.
      st.lastError = err as Error;
      delay = Math.min(OPEN_RETRY_MAX_MS, delay * 2);
    }
  }
}

/**
 * Makes the pool's queries and checkouts fail with a StoreUnavailableError while the database is not reached yet,
 * and turns the driver's connection errors into one.
 */
function guard(pool: pg.Pool, st: PoolState): void {
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as { query: unknown }).query = (...args: unknown[]) => {
    if (typeof args.at(-1) === "function") return query(...args);
    if (!st.ready) return Promise.reject(notReached(st));
    return (query(...args) as Promise<unknown>).catch((err: unknown) => {
      throw asStoreError(err);
    });
  };
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown;
  // pg-pool's own query() checks out with a callback: that one goes through as it is.
  (pool as { connect: unknown }).connect = (...args: unknown[]) => {
    if (typeof args[0] === "function") return connect(...args);
    if (!st.ready) return Promise.reject(notReached(st));
    return (connect() as Promise<unknown>).catch((err: unknown) => {
      throw asStoreError(err);
    });
  };
  const end = pool.end.bind(pool) as (...args: unknown[]) => unknown;
  (pool as { end: unknown }).end = (...args: unknown[]) => {
    st.closed = true;
    st.settle();
    return end(...args);
  };
}

/** SQL for an epoch-ms parameter as timestamptz (exact, no float rounding). */
export const ts = (param: string) => `('epoch'::timestamptz + ${param}::int8 * interval '1 millisecond')`;
/** SQL for a timestamptz as epoch ms (float8, so pg hands a JS number). */
export const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::float8`;
/** SQL for a timestamptz as RFC 3339 in UTC with milliseconds, as Date.toISOString writes it. */
export const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
