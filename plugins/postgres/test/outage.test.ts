/**
 * The database going away, as the stores see it (docs/deploy.md, "When the database goes away"), through a TCP proxy
 * in front of the real server (support/pg-proxy.ts): connections cut under load, ended by the server, or held by a
 * network that passes nothing, and a store opened while the database refuses connections. The process never crashes
 * (an unhandled 'error' would fail the file), every failure is a StoreUnavailableError that core answers with 503,
 * the health probe says so quickly, and the stores work again by themselves once the database is back.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { StoreUnavailableError, toErrorResponse, type RunStore } from "@nodefabric/core";
import plugin, { openPgRunStore, type PgRunStore } from "../src/index.js";
import { asStoreError, isConnectionLost } from "../src/connect.js";
import { inTransaction } from "../src/pg-migrate.js";
import type pg from "pg";
import { dropSchema, newSchema, OPEN_OPTIONS, PG_URL } from "./support/pg.js";
import { PgProxy } from "./support/pg-proxy.js";

const schemas: string[] = [];
const closers: Array<() => Promise<void>> = [];
let proxy: PgProxy;

beforeAll(async () => {
  proxy = await PgProxy.start();
});
afterEach(async () => {
  await proxy.restore();
  proxy.unstall();
  for (const close of closers.splice(0)) await close().catch(() => {});
});
afterAll(async () => {
  await proxy.close();
  for (const s of schemas.splice(0)) await dropSchema(s);
});

/** A store URL of a fresh schema, through the proxy. */
function viaProxy(): URL {
  const schema = newSchema();
  schemas.push(schema);
  const u = proxy.url();
  u.searchParams.set("schema", schema);
  return u;
}

async function open(options: Partial<typeof OPEN_OPTIONS & { queryTimeoutMs: number; connectTimeoutMs: number }> = {}): Promise<PgRunStore> {
  const store = await openPgRunStore(viaProxy(), { ...OPEN_OPTIONS, ...options });
  closers.push(() => store.close());
  return store;
}

/** Polls `check` until it holds (generous deadline: the machine may be loaded). */
async function eventually<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a rejection");
}

const listing = (store: RunStore) => store.listRuns({ limit: 1 });

describe("which errors are an outage", () => {
  it("counts refused, reset, terminated and timed-out connections, and never an SQL error or a wrong name", () => {
    for (const code of ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "57P01", "57P03", "08006", "53300"]) {
      expect(isConnectionLost(Object.assign(new Error("x"), { code })), code).toBe(true);
    }
    for (const message of ["Connection terminated unexpectedly", "Query read timeout", "timeout exceeded when trying to connect"]) {
      expect(isConnectionLost(new Error(message)), message).toBe(true);
    }
    // Bugs and configuration mistakes: a syntax error, a unique violation, a wrong password, an unknown database or host.
    for (const code of ["42601", "23505", "28P01", "3D000", "ENOTFOUND", "40001"]) {
      expect(isConnectionLost(Object.assign(new Error("x"), { code })), code).toBe(false);
    }
  });
});

describe("what a client is answered", () => {
  it("is a 503 unavailable with Retry-After for a lost connection, and still a 500 for an SQL error", () => {
    const lost = toErrorResponse(asStoreError(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })));
    expect(lost.status).toBe(503);
    expect(lost.headers["retry-after"]).toBe("2");
    expect(lost.body.error).toMatchObject({ code: "unavailable", retryable: true });
    // Where the database is stays with the operator (health, logs), not the client.
    expect(lost.body.error.message).not.toMatch(/127\.0\.0\.1/);
    const bug = toErrorResponse(asStoreError(Object.assign(new Error('syntax error at or near "SELEC"'), { code: "42601" })));
    expect(bug.status).toBe(500);
    expect(bug.body.error.code).toBe("internal_error");
  });
});

describe("the database going away under a store", () => {
  it("survives a cut under load: every failure is a StoreUnavailableError, and the store works again once restored", async () => {
    const store = await open();
    expect(await listing(store)).toEqual([]);
    // Queries and transactions in flight when every connection is reset.
    const load = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? listing(store) : store.sharedSecret("s")));
    await proxy.cut();
    const outcomes = await Promise.allSettled(load);
    for (const o of outcomes) if (o.status === "rejected") expect(StoreUnavailableError.is(o.reason), String(o.reason)).toBe(true);
    // While cut: refused at once, as unavailable; the health probe says so.
    expect(StoreUnavailableError.is(await rejection(listing(store)))).toBe(true);
    const down = await rejection(store.ping());
    expect(StoreUnavailableError.is(down)).toBe(true);
    expect(down.message).toMatch(/database/);
    await proxy.restore();
    await eventually(async () => (await listing(store)) && true, "queries working again");
    await eventually(async () => (await store.ping(), true), "the health probe passing again");
  });

  it("survives the server terminating every connection, in the middle of a transaction too", async () => {
    const url = viaProxy();
    const store = await openPgRunStore(url, OPEN_OPTIONS);
    const types = await plugin.stores!.nodeTypes!(url, OPEN_OPTIONS);
    closers.push(() => store.close(), () => types.close());
    await listing(store);
    await store.sharedSecret("warm");
    expect(await proxy.terminateBackends()).toBeGreaterThan(0);
    // Each connection the pool had is dead: a query on one fails cleanly at most once, and the pool replaces it.
    await eventually(async () => (await listing(store)) && true, "a query after the terminations");
    await eventually(async () => (await types.latestNodeTypes()) && true, "the node type store after the terminations");
    expect(await listing(store)).toEqual([]);
    // A connection ended while its transaction is open: the transaction fails as unavailable, the connection is
    // dropped rather than handed to the next caller, and the pool goes on with new ones.
    const pool = (store as unknown as { pool: pg.Pool }).pool;
    const err = await rejection(
      inTransaction(pool, async (c) => {
        await c.query("INSERT INTO nodefabric_settings (name, value) VALUES ('half-done', 'x')");
        await proxy.terminateBackends();
        await c.query("SELECT 1");
      }),
    );
    expect(StoreUnavailableError.is(err), String(err)).toBe(true);
    expect(pool.totalCount).toBeLessThanOrEqual(pool.options.max);
    // Nothing of it was committed.
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM nodefabric_settings WHERE name = 'half-done'`);
    expect(rows[0].n).toBe(0);
  });

  it("ends a query the network holds within the query timeout, as unavailable, and recovers when traffic flows", async () => {
    const store = await open({ queryTimeoutMs: 500, connectTimeoutMs: 1_000 });
    await listing(store);
    proxy.stall();
    const started = Date.now();
    const err = await rejection(listing(store));
    expect(StoreUnavailableError.is(err), String(err)).toBe(true);
    // The query timeout, or the connect timeout of a new connection: well under the test's patience either way.
    expect(Date.now() - started).toBeLessThan(5_000);
    const probe = Date.now();
    expect(StoreUnavailableError.is(await rejection(store.ping()))).toBe(true);
    expect(Date.now() - probe).toBeLessThan(4_000);
    proxy.unstall();
    await eventually(async () => (await listing(store)) && true, "queries working again after the stall");
  });

  it("opens while the database refuses connections, answers unavailable, and migrates and serves once it accepts", async () => {
    await proxy.cut();
    const store = await open();
    const err = await rejection(listing(store));
    expect(StoreUnavailableError.is(err)).toBe(true);
    expect(err.message).toMatch(/has not been reached.*ECONNREFUSED/s);
    expect(StoreUnavailableError.is(await rejection(store.ping()))).toBe(true);
    // Commit notices wait for the database too.
    store.onCommit(() => undefined);
    await proxy.restore();
    await eventually(async () => (await listing(store)) && true, "the store migrated and serving", 30_000);
    await store.ping();
    await store.whenListening(20_000);
  });

  it("still refuses to start on a configuration mistake: an unknown database is not an outage", async () => {
    const u = new URL(PG_URL);
    u.pathname = "/nf_no_such_database";
    const err = await rejection(openPgRunStore(u, OPEN_OPTIONS));
    expect(StoreUnavailableError.is(err)).toBe(false);
    expect(err.message).toMatch(/does not exist/);
  });
});
