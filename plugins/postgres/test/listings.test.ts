/**
 * The listings on the real PostgreSQL server: migration 3 gives the runs of an older database their root node type,
 * and coordinators sharing a database each list every approval and run of it, whoever holds the runs.
 */
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { HeldRunCache } from "@nodefabric/core";
import { makeApproval, makeNodeRun, makeRun, T0 } from "../../../core/test/store/run-store-contract.js";
import { MIGRATIONS, migrate, openPgRunStore, type PgRunStore } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, PG_URL, storeUrl } from "./support/pg.js";

const schemas: string[] = [];
const stores: PgRunStore[] = [];
const pools: pg.Pool[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const p of pools.splice(0)) await p.end();
  for (const s of schemas.splice(0)) await dropSchema(s);
});

function fresh(): string {
  const s = newSchema();
  schemas.push(s);
  return s;
}

describe("listings on PostgreSQL", () => {
  it("migration 3 fills in the root node type of the runs already there", async () => {
    const schema = fresh();
    const pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    pools.push(pool);
    await migrate(pool, { schema, migrations: MIGRATIONS.filter((m) => m.version <= 2) });
    const run = makeRun({ created_at: T0 });
    const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
    root.node_run.node_type_ref = { node_type_id: "old.type", version: "1.0.0" };
    // Written as a coordinator of the previous release did, without the column.
    await pool.query(
      `INSERT INTO ${schema}.runs (run_id, tenant_id, state, doc, request_hash, created_at) VALUES ($1, NULL, $2, $3, $4, to_timestamp($5 / 1000.0))`,
      [run.run_id, run.state, JSON.stringify(run.run), run.request_hash, run.created_at],
    );
    await pool.query(
      `INSERT INTO ${schema}.node_runs (node_run_id, run_id, state, doc, attempt, available_at, depth, created_at)
       VALUES ($1, $2, 'queued', $3, 1, now(), 0, now())`,
      [root.node_run_id, run.run_id, JSON.stringify(root.node_run)],
    );

    expect((await migrate(pool, { schema })).applied).toEqual([3]);
    const store = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
    stores.push(store);
    expect((await store.listRuns({ limit: 10, root_node_type_id: "old.type" })).map((r) => r.run_id)).toEqual([run.run_id]);
    expect(await store.listRuns({ limit: 10, root_node_type_id: "other.type" })).toEqual([]);
  });

  it("each coordinator of a shared database lists every run and approval, held by it or by another", async () => {
    const schema = fresh();
    const held: HeldRunCache[] = [];
    for (const owner of ["coord-a", "coord-b"]) {
      const s = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
      stores.push(s);
      s.attach(owner, 5_000);
      held.push(new HeldRunCache(s));
    }
    const [a, b] = held;
    const seed = async (store: HeldRunCache, tenant: string | null, created_at: number) => {
      const run = makeRun({ tenant_id: tenant, created_at, state: "running" });
      const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id, created_at });
      const approval = makeApproval(root, { created_at });
      await store.apply({ runs: [run], nodeRuns: [root], approvals: [approval] });
      return { run, approval };
    };
    const one = await seed(a, "t1", T0);
    const two = await seed(b, "t1", T0 + 1);
    const three = await seed(b, null, T0 + 2);

    for (const store of [a, b]) {
      expect((await store.listApprovals({ limit: 10 })).map((x) => x.approval_id)).toEqual([three, two, one].map((x) => x.approval.approval_id));
      expect((await store.listApprovals({ limit: 10, tenant_id: "t1" })).map((x) => x.run_id)).toEqual([two.run.run_id, one.run.run_id]);
      expect((await store.listRuns({ limit: 10, root_node_type_id: "test.echo", created_after: T0 })).map((r) => r.run_id)).toEqual([three.run.run_id, two.run.run_id]);
    }
    // A decision written by the holder shows in the other's listing at once.
    await a.apply({ approvals: [{ ...one.approval, state: "approved", resolved_at: T0 + 5 }] });
    expect((await b.listApprovals({ limit: 10, state: "approved" })).map((x) => x.approval_id)).toEqual([one.approval.approval_id]);
  });
});
