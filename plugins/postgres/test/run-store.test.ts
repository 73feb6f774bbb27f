/**
 * The RunStore contract (core's suite) against the real PostgreSQL server, each test in a fresh schema, and what
 * only a store several processes share must add: concurrent writers of the same runs, foreign keys.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RunRecord } from "@nodefabric/core";
import { makeEvent, makeNodeRun, makeRun, runStoreContract, T0 } from "../../../core/test/store/run-store-contract.js";
import pg from "pg";
import { openPgRunStore, type PgRunStore } from "../src/index.js";
import { QUEUE_STATS_SQL } from "../src/pg-run-sql.js";
import { dropSchema, newSchema, OPEN_OPTIONS, PG_URL, storeUrl } from "./support/pg.js";

runStoreContract("PostgreSQL", async () => {
  const schema = newSchema();
  return {
    store: await openPgRunStore(storeUrl(schema), OPEN_OPTIONS),
    reopen: () => openPgRunStore(storeUrl(schema), OPEN_OPTIONS),
    cleanup: () => dropSchema(schema),
  };
});

describe("PgRunStore on the server", () => {
  const schemas: string[] = [];
  const stores: PgRunStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const s of schemas.splice(0)) await dropSchema(s);
  });

  it("counts ready work for the metrics from the claim's index ranges, not by reading every NodeRun ever stored", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const store = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
    stores.push(store);
    const run = makeRun({ state: "running" });
    await store.apply({ runs: [run], nodeRuns: [makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id })] });
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      await client.query(`SET search_path TO ${schema}`);
      // 10,000 ended runs and NodeRuns, as a fabric that has served a while holds, and fresh statistics.
      await client.query(`INSERT INTO runs SELECT (jsonb_populate_record(r, jsonb_build_object('run_id', r.run_id || '_' || g, 'state', 'completed'))).*
                          FROM runs r, generate_series(1, 10000) g`);
      await client.query(`INSERT INTO node_runs SELECT (jsonb_populate_record(n, jsonb_build_object('node_run_id', n.node_run_id || '_' || g, 'run_id', n.run_id || '_' || g, 'state', 'completed'))).*
                          FROM node_runs n, generate_series(1, 10000) g`);
      await client.query("ANALYZE runs; ANALYZE node_runs");
      const { rows } = await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${QUEUE_STATS_SQL}`, [T0 + 1_000]);
      const plan = rows.map((r) => r["QUERY PLAN"]).join("\n");
      expect(plan).not.toMatch(/Seq Scan on node_runs/);
      expect(plan).toMatch(/node_runs_unleased/);
    } finally {
      await client.end();
    }
    expect(await store.queueStats(T0 + 1_000)).toEqual({ depth: 1, oldestAvailableAt: T0 });
  });

  it("lets two processes write the same runs at once, in opposite orders, without deadlock or a gap in any run's seqs", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const [a, b] = [await openPgRunStore(storeUrl(schema), OPEN_OPTIONS), await openPgRunStore(storeUrl(schema), OPEN_OPTIONS)];
    stores.push(a, b);
    const runs = Array.from({ length: 12 }, () => makeRun({ state: "running" }));
    await a.apply({ runs });
    const reversed = [...runs].reverse();
    const writer = async (store: PgRunStore, order: RunRecord[], rounds: number) => {
      for (let i = 0; i < rounds; i++) {
        // Run upserts and events over every run, listed in this writer's order.
        await store.apply({ runs: order.map((r) => ({ ...r, deadline_at: T0 + i })), events: order.flatMap((r) => [makeEvent(r.run_id), makeEvent(r.run_id)]) });
      }
    };
    await Promise.all([writer(a, runs, 15), writer(b, reversed, 15), writer(a, reversed, 15), writer(b, runs, 15)]);
    for (const r of runs) {
      const events = await b.listEvents(r.run_id, -1, 1000);
      expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 120 }, (_, i) => i));
    }
  });

  it("refuses a NodeRun of a run that does not exist, changing nothing", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const store = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
    stores.push(store);
    const run = makeRun();
    const orphan = makeNodeRun({ run_id: "run_nowhere" });
    await expect(store.apply({ runs: [run], nodeRuns: [orphan] })).rejects.toThrow(/foreign key/);
    expect(await store.getRun(run.run_id)).toBeUndefined();
    expect(await store.getNodeRun(orphan.node_run_id)).toBeUndefined();
  });
});
