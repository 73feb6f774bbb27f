/**
 * Migrations on the real PostgreSQL server (127.0.0.1:5432, or FABRIC_PG_URL): applied exactly once when several
 * processes start at once, a no-op when current, and a clear error, changing nothing, when an applied migration was
 * edited or the database is newer than the code. Each test works in a schema of its own, dropped afterwards.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { MIGRATIONS, MigrationError, migrate, migrationChecksum, type Migration } from "../src/index.js";

const URL = process.env.FABRIC_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

const pools: pg.Pool[] = [];
const schemas: string[] = [];

/** A schema name no other test or run uses. */
function newSchema(): string {
  const s = `nf_test_${randomBytes(6).toString("hex")}`;
  schemas.push(s);
  return s;
}

/** A pool whose connections work in `schema`, as a fabric process configured for it would open. */
function poolFor(schema: string, max = 2): pg.Pool {
  const pool = new pg.Pool({ connectionString: URL, max, options: `-c search_path=${schema}` });
  pools.push(pool);
  return pool;
}

const admin = new pg.Pool({ connectionString: URL, max: 2 });

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.end()));
  for (const s of schemas.splice(0)) await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
});
afterAll(() => admin.end());

async function tables(schema: string): Promise<string[]> {
  const { rows } = await admin.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [schema]);
  return rows.map((r) => r.table_name);
}

async function applied(schema: string): Promise<{ version: number; name: string; checksum: string; applied_at: Date }[]> {
  const { rows } = await admin.query(`SELECT version, name, checksum, applied_at FROM ${schema}.nodefabric_migrations ORDER BY version`);
  return rows;
}

const STORE_TABLES = ["approvals", "candidate_sets", "coordinators", "events", "executor_node_types", "executors", "node_runs", "node_types", "nodefabric_settings", "runs"];

describe("migrate", () => {
  it("applies every migration exactly once when 8 processes start at once", async () => {
    const schema = newSchema();
    // Eight pools, as eight fabric processes would have, all migrating at the same moment.
    const results = await Promise.all(Array.from({ length: 8 }, () => migrate(poolFor(schema), { schema })));
    const last = MIGRATIONS.at(-1)!.version;
    expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
    expect(results.find((r) => r.applied.length > 0)!.applied).toEqual(MIGRATIONS.map((m) => m.version));
    expect(results.every((r) => r.version === last)).toBe(true);
    expect((await applied(schema)).map((r) => [r.version, r.name, r.checksum])).toEqual(MIGRATIONS.map((m) => [m.version, m.name, migrationChecksum(m)]));
    expect(await tables(schema)).toEqual([...STORE_TABLES, "nodefabric_migrations"].sort());
  });

  it("does nothing when the database is current", async () => {
    const schema = newSchema();
    await migrate(poolFor(schema), { schema });
    const before = await applied(schema);
    const again = await migrate(poolFor(schema), { schema });
    expect(again).toEqual({ applied: [], version: MIGRATIONS.at(-1)!.version, waiting: [] });
    expect(await applied(schema)).toEqual(before);
  });

  it("uses the connection's search_path when no schema is given", async () => {
    const schema = newSchema();
    await admin.query(`CREATE SCHEMA ${schema}`);
    expect((await migrate(poolFor(schema))).applied).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await tables(schema)).toContain("node_runs");
  });

  it("applies only the new migrations of a later release, in order", async () => {
    const schema = newSchema();
    const first: Migration = { version: 1, name: "first", sql: "CREATE TABLE a (id int PRIMARY KEY)" };
    const second: Migration = { version: 2, name: "second", sql: "ALTER TABLE a ADD COLUMN b text; CREATE TABLE c (id int)" };
    expect((await migrate(poolFor(schema), { schema, migrations: [first] })).applied).toEqual([1]);
    const results = await Promise.all(Array.from({ length: 4 }, () => migrate(poolFor(schema), { schema, migrations: [first, second] })));
    expect(results.flatMap((r) => r.applied)).toEqual([2]);
    expect((await applied(schema)).map((r) => r.version)).toEqual([1, 2]);
    expect(await tables(schema)).toEqual(["a", "c", "nodefabric_migrations"]);
  });

  it("refuses an applied migration whose SQL changed, naming it, and applies nothing", async () => {
    const schema = newSchema();
    const first: Migration = { version: 1, name: "first", sql: "CREATE TABLE a (id int PRIMARY KEY)" };
    await migrate(poolFor(schema), { schema, migrations: [first] });
    const edited: Migration = { ...first, sql: "CREATE TABLE a (id bigint PRIMARY KEY)" };
    const next: Migration = { version: 2, name: "second", sql: "CREATE TABLE b (id int)" };
    const err = await migrate(poolFor(schema), { schema, migrations: [edited, next] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect((err as MigrationError).code).toBe("FABRIC_PG_MIGRATION_CHECKSUM");
    expect((err as Error).message).toContain("migration 1 (first) was applied with checksum " + migrationChecksum(first));
    expect((err as Error).message).toContain(migrationChecksum(edited));
    expect(await tables(schema)).toEqual(["a", "nodefabric_migrations"]);
    expect((await applied(schema)).map((r) => r.version)).toEqual([1]);
  });

  it("refuses a database that a newer release migrated, naming its migration, and applies nothing", async () => {
    const schema = newSchema();
    const first: Migration = { version: 1, name: "first", sql: "CREATE TABLE a (id int PRIMARY KEY)" };
    const third: Migration = { version: 3, name: "from the future", sql: "CREATE TABLE z (id int)" };
    await migrate(poolFor(schema), { schema, migrations: [first, third] });
    const second: Migration = { version: 2, name: "second", sql: "CREATE TABLE b (id int)" };
    const err = await migrate(poolFor(schema), { schema, migrations: [first, second] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect((err as MigrationError).code).toBe("FABRIC_PG_DATABASE_NEWER");
    expect((err as Error).message).toContain("the database has migration 3 (from the future)");
    expect((err as Error).message).toContain("its last is 2 (second)");
    expect(await tables(schema)).toEqual(["a", "nodefabric_migrations", "z"]);
    expect((await applied(schema)).map((r) => r.version)).toEqual([1, 3]);
  });

  it("rolls back a migration that fails, leaving the database at the last good one", async () => {
    const schema = newSchema();
    const first: Migration = { version: 1, name: "first", sql: "CREATE TABLE a (id int PRIMARY KEY)" };
    const broken: Migration = { version: 2, name: "broken", sql: "CREATE TABLE b (id int); SELECT * FROM no_such_table" };
    await migrate(poolFor(schema), { schema, migrations: [first] });
    await expect(migrate(poolFor(schema), { schema, migrations: [first, broken] })).rejects.toThrow(/no_such_table/);
    expect(await tables(schema)).toEqual(["a", "nodefabric_migrations"]);
    expect((await applied(schema)).map((r) => r.version)).toEqual([1]);
  });

  it("applies an opt-in migration at once to a new database, and to one in use only when asked for it, later ones after it", async () => {
    const first: Migration = { version: 1, name: "first", sql: "CREATE TABLE a (id int PRIMARY KEY)" };
    const optIn: Migration = { version: 2, name: "switch", sql: "ALTER TABLE a ADD COLUMN b text", optIn: "the-switch" };
    const third: Migration = { version: 3, name: "third", sql: "CREATE TABLE c (id int)" };
    // No migration yet: no process of an earlier release can be reading it, so the switch comes with the rest.
    const fresh = newSchema();
    expect(await migrate(poolFor(fresh), { schema: fresh, migrations: [first, optIn, third] })).toEqual({ applied: [1, 2, 3], version: 3, waiting: [] });

    // In use (at version 1): the switch and what follows it wait, at every start, until asked for.
    const used = newSchema();
    await migrate(poolFor(used), { schema: used, migrations: [first] });
    expect(await migrate(poolFor(used), { schema: used, migrations: [first, optIn, third] })).toEqual({ applied: [], version: 1, waiting: [optIn, third] });
    expect(await tables(used)).toEqual(["a", "nodefabric_migrations"]);
    const results = await Promise.all(Array.from({ length: 3 }, () => migrate(poolFor(used), { schema: used, migrations: [first, optIn, third], enable: ["the-switch"] })));
    expect(results.flatMap((r) => r.applied)).toEqual([2, 3]);
    expect((await applied(used)).map((r) => r.version)).toEqual([1, 2, 3]);
    expect(await migrate(poolFor(used), { schema: used, migrations: [first, optIn, third] })).toEqual({ applied: [], version: 3, waiting: [] });
  });

  it("refuses to enable an opt-in migration this release does not have, before touching the database", async () => {
    const schema = newSchema();
    const err = await migrate(poolFor(schema), { schema, enable: ["no-such-switch"] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect((err as MigrationError).code).toBe("FABRIC_PG_UNKNOWN_OPT_IN");
    expect((err as Error).message).toBe('no migration of this release is enabled as "no-such-switch" (it knows grouped-events)');
    expect(await tables(schema)).toEqual([]);
  });

  it("rejects a list whose versions do not rise, before touching the database", async () => {
    const schema = newSchema();
    const a: Migration = { version: 2, name: "a", sql: "CREATE TABLE a (id int)" };
    const b: Migration = { version: 1, name: "b", sql: "CREATE TABLE b (id int)" };
    await expect(migrate(poolFor(schema), { schema, migrations: [a, b] })).rejects.toThrow("migration 1 (b) comes after version 2; versions must rise");
    expect(await tables(schema)).toEqual([]);
  });
});

describe("the first migration", () => {
  it("has the columns the run, node type and candidate set stores read and write", async () => {
    const schema = newSchema();
    await migrate(poolFor(schema), { schema });
    const { rows } = await admin.query(
      `SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
      [schema],
    );
    const columns = (t: string) => Object.fromEntries(rows.filter((r) => r.table_name === t).map((r) => [r.column_name, r.data_type]));
    expect(columns("runs")).toMatchObject({
      run_id: "text", tenant_id: "text", state: "text", doc: "jsonb", request_hash: "text",
      deadline_at: "timestamp with time zone", created_at: "timestamp with time zone", last_seq: "bigint",
      lease_owner: "text", lease_expires_at: "timestamp with time zone", lease_epoch: "bigint",
    });
    expect(columns("node_runs")).toMatchObject({
      node_run_id: "text", run_id: "text", parent_node_run_id: "text", state: "text", doc: "jsonb", attempt: "integer",
      available_at: "timestamp with time zone", lease_owner: "text", lease_expires_at: "timestamp with time zone",
      lease_epoch: "bigint", approval_id: "text", idempotency_key: "text", spec_hash: "text", depth: "integer",
      created_at: "timestamp with time zone",
    });
    expect(columns("events")).toMatchObject({ run_id: "text", seq: "bigint", node_run_id: "text", type: "text", at: "timestamp with time zone", payload: "jsonb" });
    expect(columns("approvals")).toMatchObject({ approval_id: "text", run_id: "text", node_run_id: "text", state: "text", doc: "jsonb", resolved_at: "timestamp with time zone" });
    expect(columns("node_types")).toMatchObject({ node_type_id: "text", version: "text", version_key: "text", kind: "text", doc: "json", published_at: "timestamp with time zone", published_seq: "integer" });
    expect(columns("executors")).toMatchObject({ executor_instance_id: "text", doc: "jsonb", registered_at: "timestamp with time zone", last_seen_at: "timestamp with time zone" });
    expect(columns("executor_node_types")).toMatchObject({ node_type_id: "text", version: "text", executor_instance_id: "text" });
    expect(columns("candidate_sets")).toMatchObject({ candidate_set_id: "text", subtask_id: "text", doc: "json", created_at: "timestamp with time zone" });
  });

  it("supports the store's hot path: gapless seqs per run, idempotency keys, a SKIP LOCKED claim with a fencing epoch", async () => {
    const schema = newSchema();
    const pool = poolFor(schema, 4);
    await migrate(pool, { schema });
    await pool.query(`INSERT INTO runs (run_id, state, doc, request_hash, created_at) VALUES ('r1', 'running', '{}', 'h', now())`);

    // Two writers batch events of one run at once: the counter row orders them, and the seqs come out 1..6.
    const write = async (n: number) => {
      const c = await pool.connect();
      try {
        await c.query("BEGIN");
        const { rows: [{ last_seq }] } = await c.query(`UPDATE runs SET last_seq = last_seq + $2 WHERE run_id = $1 RETURNING last_seq`, ["r1", n]);
        const first = Number(last_seq) - n + 1;
        await c.query(
          `INSERT INTO events (run_id, seq, type, at, payload) SELECT 'r1', s, 'run_started', now(), '{}' FROM generate_series($1::int8, $2::int8) s`,
          [first, Number(last_seq)],
        );
        await c.query("COMMIT");
      } finally {
        c.release();
      }
    };
    await Promise.all([write(3), write(3)]);
    expect((await pool.query(`SELECT seq FROM events WHERE run_id = 'r1' ORDER BY seq`)).rows.map((r) => Number(r.seq))).toEqual([1, 2, 3, 4, 5, 6]);
    await expect(pool.query(`INSERT INTO events (run_id, seq, type, at, payload) VALUES ('r1', 6, 'x', now(), '{}')`)).rejects.toThrow(/duplicate key/);

    const nodeRun = `INSERT INTO node_runs (node_run_id, run_id, parent_node_run_id, state, doc, attempt, available_at, idempotency_key, depth, created_at)
                     VALUES ($1, 'r1', $2, 'queued', '{}', 1, now() - interval '1 second', $3, $4, now())`;
    await pool.query(nodeRun, ["n1", null, null, 0]);
    await pool.query(nodeRun, ["n2", "n1", "k", 1]);
    await expect(pool.query(nodeRun, ["n3", "n1", "k", 1])).rejects.toThrow(/node_runs_idempotency/);

    // Two claimers at once: SKIP LOCKED hands each node run to one of them, and each claim bumps the epoch.
    const claim = (owner: string) =>
      pool.query(
        `UPDATE node_runs SET lease_owner = $1, lease_expires_at = now() + interval '30 seconds', lease_epoch = lease_epoch + 1, state = 'assigned'
         WHERE node_run_id IN (SELECT node_run_id FROM node_runs
           WHERE lease_owner IS NULL AND approval_id IS NULL AND state IN ('queued', 'assigned', 'running') AND available_at <= now()
           ORDER BY created_at, node_run_id LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING node_run_id, lease_epoch`,
        [owner],
      );
    const [a, b] = await Promise.all([claim("a"), claim("b")]);
    const got = [...a.rows, ...b.rows];
    expect(got.map((r) => r.node_run_id).sort()).toEqual(["n1", "n2"]);
    expect(got.every((r) => Number(r.lease_epoch) === 1)).toBe(true);
    // A write fenced by a stale epoch changes nothing.
    const stale = await pool.query(`UPDATE node_runs SET state = 'succeeded' WHERE node_run_id = 'n1' AND lease_epoch = 0`);
    expect(stale.rowCount).toBe(0);
  });

  it("orders node type versions by byte order of version_key, whatever the database's collation", async () => {
    const schema = newSchema();
    const pool = poolFor(schema);
    await migrate(pool, { schema });
    for (const [version, key] of [["1.0.0", "a"], ["1.0.0-b", "B"], ["2.0.0", "_"]]) {
      await pool.query(`INSERT INTO node_types (node_type_id, version, version_key, kind, doc, published_at) VALUES ('t', $1, $2, 'atomic', $3, now())`, [
        version,
        key,
        `{ "b": 1, "a": 2 }`,
      ]);
    }
    const { rows } = await pool.query(`SELECT version, doc::text AS doc FROM node_types WHERE node_type_id = 't' ORDER BY version_key`);
    expect(rows.map((r) => r.version)).toEqual(["1.0.0-b", "2.0.0", "1.0.0"]);
    // Served as published: key order and spacing kept.
    expect(rows[0].doc).toBe(`{ "b": 1, "a": 2 }`);
  });
});
