/**
 * HeldRunCache in front of the PostgreSQL run store, as a coordinator uses it: the records of the runs it holds are
 * answered from memory, exactly as stored, and never changed by a caller's mutations or by a write that failed;
 * runs it does not hold, or lost, are read from the database.
 */
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { FencedError, HeldRunCache } from "@nodefabric/core";
import { makeEvent, makeNodeRun, makeRun } from "../../../core/test/store/run-store-contract.js";
import { openPgRunStore, type PgRunStore } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, PG_URL, storeUrl } from "./support/pg.js";

const LEASE = 5_000;
const schemas: string[] = [];
const stores: PgRunStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const s of schemas.splice(0)) await dropSchema(s);
});

async function two(): Promise<[PgRunStore, PgRunStore, string]> {
  const schema = newSchema();
  schemas.push(schema);
  const out: PgRunStore[] = [];
  for (const owner of ["coord-a", "coord-b"]) {
    const s = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
    stores.push(s);
    s.attach(owner, LEASE);
    out.push(s);
  }
  return [out[0], out[1], schema];
}

describe("HeldRunCache", () => {
  it("answers held records from memory as stored, unchanged by callers' mutations or by a failed write", async () => {
    const [a, , schema] = await two();
    const cache = new HeldRunCache(a);
    const run = makeRun({ state: "running" });
    const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
    await cache.apply({ runs: [run], nodeRuns: [root], events: [makeEvent(run.run_id, { type: "run_started", data: {} })] });

    // The database is changed behind the cache's back (no coordinator would: this shows the read is from memory).
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      await admin.query(`UPDATE ${schema}.node_runs SET attempt = 9 WHERE node_run_id = $1`, [root.node_run_id]);
    } finally {
      await admin.end();
    }
    const read = (await cache.getNodeRun(root.node_run_id))!;
    expect(read.attempt).toBe(1);
    read.attempt = 5;
    read.node_run.state = "failed";
    expect((await cache.getNodeRun(root.node_run_id))!.attempt).toBe(1);
    expect(await cache.getRun(run.run_id)).toEqual(await a.getRun(run.run_id));

    // A write that fails (an event of an unknown run) leaves the cache as it was.
    const changed = { ...(await cache.getRun(run.run_id))!, state: "canceled" as const };
    await expect(cache.apply({ runs: [changed], events: [makeEvent("run_nobody_has")] })).rejects.toThrow();
    expect((await cache.getRun(run.run_id))!.state).toBe("running");

    // A claim's leases are what the cache answers next.
    const claimed = await cache.claim({ owner: "coord-a", now: Date.now() + 60_000, limit: 10, leaseMs: 1000 });
    expect(claimed.map((n) => n.node_run_id)).toEqual([root.node_run_id]);
    expect((await cache.getNodeRun(root.node_run_id))!.lease_owner).toBe("coord-a");
  });

  it("reads from the database the runs it does not hold, and forgets the ones it lost", async () => {
    const [a, b] = await two();
    const cacheA = new HeldRunCache(a);
    const cacheB = new HeldRunCache(b);
    const run = makeRun({ state: "running" });
    const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
    await cacheA.apply({ runs: [run], nodeRuns: [root], events: [makeEvent(run.run_id, { type: "run_started", data: {} })] });
    expect(await cacheB.getRun(run.run_id)).toEqual(await a.getRun(run.run_id));

    // b takes the run over and writes; a's cache, once a knows it lost the run, reads what b wrote.
    expect(await b.takeOver(Date.now() + LEASE + 1000, 10)).toEqual([run.run_id]);
    const moved = { ...(await cacheB.getRun(run.run_id))!, state: "completed" as const };
    moved.run = { ...moved.run, state: "completed" };
    await cacheB.apply({ runs: [moved], events: [makeEvent(run.run_id, { type: "run_completed", data: { state: "completed" } })] });
    await expect(cacheA.apply({ events: [makeEvent(run.run_id)] })).rejects.toSatisfy(FencedError.is);
    const { lost } = await a.renew(Date.now());
    expect(lost).toEqual([run.run_id]);
    cacheA.forget(lost);
    expect((await cacheA.getRun(run.run_id))!.state).toBe("completed");
  });

  it("lists a run's open NodeRuns with the store's own query, so the engine never reads the ended ones", async () => {
    const [a] = await two();
    const cache = new HeldRunCache(a);
    const run = makeRun({ state: "running" });
    const open = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
    const ended = makeNodeRun({ run_id: run.run_id, parent_node_run_id: open.node_run_id, depth: 1, state: "completed" });
    await cache.apply({ runs: [run], nodeRuns: [open, ended], events: [makeEvent(run.run_id, { type: "run_started", data: {} })] });
    // Without it, the engine would fall back to listNodeRuns and parse every NodeRun of the run.
    expect(cache.listOpenNodeRuns).toBeTypeOf("function");
    expect(await cache.listOpenNodeRuns!(run.run_id)).toEqual([open]);
    expect(await a.listOpenNodeRuns(run.run_id)).toEqual([open]);
  });

  it("answers an ended run from memory: it never changes again", async () => {
    const [a, , schema] = await two();
    const cache = new HeldRunCache(a);
    const run = makeRun({ state: "running" });
    await cache.apply({ runs: [run], events: [makeEvent(run.run_id, { type: "run_started", data: {} })] });
    const ended = { ...run, state: "completed" as const, run: { ...run.run, state: "completed" as const } };
    await cache.apply({ runs: [ended], events: [makeEvent(run.run_id, { type: "run_completed", data: { state: "completed" } })] });

    // Even with the row gone from the database, the ended run reads as it was committed.
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      await admin.query(`DELETE FROM ${schema}.events WHERE run_id = $1`, [run.run_id]);
      await admin.query(`DELETE FROM ${schema}.runs WHERE run_id = $1`, [run.run_id]);
    } finally {
      await admin.end();
    }
    const read = (await cache.getRun(run.run_id))!;
    expect(read.state).toBe("completed");
    expect(read.run.state).toBe("completed");
    read.run.state = "failed";
    expect((await cache.getRun(run.run_id))!.run.state).toBe("completed");
    // A run it never saw is read from the database.
    expect(await cache.getRun("run_nobody_has")).toBeUndefined();
  });
});

