/**
 * Fabrics on the real PostgreSQL server for end-to-end tests: a database schema per test (dropped afterwards), and
 * `fabric start <service>` processes pointed at it, each on its own port range.
 */
import { appendFileSync, mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { freePortBase, startFabricProcess, type FabricProcess } from "./fabric-cli.js";

/** The server the tests use (FABRIC_PG_URL overrides it). */
export const PG_URL = process.env.FABRIC_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** A store URL whose connections work in `schema` (see plugins/postgres/README.md). */
export function storeUrl(schema: string): string {
  const u = new URL(PG_URL);
  u.searchParams.set("schema", schema);
  return u.toString();
}

/** A fresh schema name; `dropSchemas` removes every one made. */
const made: string[] = [];
export function newSchema(prefix: string): string {
  const s = `${prefix}_${randomBytes(4).toString("hex")}`;
  made.push(s);
  return s;
}

export async function dropSchemas(): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    for (const s of made.splice(0)) await client.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  } finally {
    await client.end();
  }
}

/** Runs one query on the server (for looking at what the stores wrote). */
export async function pgQuery<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

export interface ServiceProcess extends FabricProcess {
  url: string;
  base: number;
}

/** Starts `fabric start <service>` on a port range of its own; resolves once it listens. */
export async function startService(
  service: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; logLevel?: string },
): Promise<ServiceProcess> {
  const base = await freePortBase();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `nf-${service}-`));
  const p = await startFabricProcess(["start", service, "--port-base", String(base), "--data-dir", dataDir, ...args], {
    cwd: options.cwd,
    expect: 1,
    env: { FABRIC_LOG_LEVEL: options.logLevel ?? "warn", ...options.env },
  });
  return Object.assign(p, { url: p.urls[service]!, base });
}

/** Every handler execution the scale fixtures recorded: Idempotency-Key → how many times it ran. */
export function executionsIn(logFile: string): Map<string, number> {
  const counts = new Map<string, number>();
  let text = "";
  try {
    text = readFileSync(logFile, "utf8");
  } catch {
    return counts;
  }
  for (const line of text.split("\n")) {
    const key = line.split(" ")[0];
    if (key) counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** A log file for the scale fixtures' executions. */
export function executionLog(): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "nf-exec-")), "executions.log");
  appendFileSync(file, "");
  return file;
}
