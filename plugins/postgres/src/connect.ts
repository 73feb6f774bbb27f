/**
 * Opening a store's connection pool from a store URL: `postgres://user@host:port/db?schema=<name>` puts every
 * connection (and the migrations) in that schema; without `schema`, the connection's own search_path is used.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import type { StoreOpenOptions } from "@nodefabric/core";
import { migrate } from "./pg-migrate.js";

/** How a store connects: what pg needs for a Pool or a Client, and the schema, if the URL names one. */
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
  const config: pg.ClientConfig = { connectionString: u.toString() };
  if (options.statementTimeoutMs !== undefined) config.statement_timeout = options.statementTimeoutMs;
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

/** A pool on `target`, migrated to this release's schema before it is handed out. */
export async function openPool(target: PgTarget, poolSize: number | undefined): Promise<pg.Pool> {
  const pool = new pg.Pool({ ...target.config, max: poolSize ?? 10 });
  // An idle connection the server drops must not crash the process; the next checkout opens a new one.
  pool.on("error", () => {});
  pool.on("connect", preparesStatements);
  try {
    await migrate(pool, target.schema === undefined ? {} : { schema: target.schema });
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  return pool;
}

/** SQL for an epoch-ms parameter as timestamptz (exact, no float rounding). */
export const ts = (param: string) => `('epoch'::timestamptz + ${param}::int8 * interval '1 millisecond')`;
/** SQL for a timestamptz as epoch ms (float8, so pg hands a JS number). */
export const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::float8`;
/** SQL for a timestamptz as RFC 3339 in UTC with milliseconds, as Date.toISOString writes it. */
export const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
