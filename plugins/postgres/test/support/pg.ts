/**
 * The real PostgreSQL server the tests use (127.0.0.1:5432, or FABRIC_PG_URL), and fresh schemas on it: each test
 * works in a schema of its own, dropped afterwards.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

export const PG_URL = process.env.FABRIC_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** A schema name no other test or run uses. */
export function newSchema(): string {
  return `nf_test_${randomBytes(6).toString("hex")}`;
}

/** The store URL of a schema. */
export function storeUrl(schema: string): URL {
  const u = new URL(PG_URL);
  u.searchParams.set("schema", schema);
  return u;
}

/** Drops a schema and everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await admin.end();
  }
}

export const OPEN_OPTIONS = { poolSize: 4, dataDir: "/nonexistent", service: "run-coordinator" } as const;
