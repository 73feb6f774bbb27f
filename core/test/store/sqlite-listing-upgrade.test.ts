/**
 * A run store file written before runs kept their root node type opens in place: the column is added and filled from
 * the root NodeRuns, so GET /v1/runs?node_type_id= finds the old runs too, and approvals list as on a new file.
 */
import { describe, expect, it } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { openSqliteDatabase } from "../../src/store/sqlite-driver.js";
import { SqliteRunStore } from "../../src/store/sqlite-run-store.js";
import { makeApproval, makeNodeRun, makeRun, T0 } from "./run-store-contract.js";
import { sqliteDrivers, unavailableSqliteDrivers } from "../support/sqlite-drivers.js";

for (const { name, reason } of unavailableSqliteDrivers) {
  it.skip(`SqliteRunStore (${name}) listing upgrade: not run, ${reason}`, () => {});
}

for (const driver of sqliteDrivers) {
  describe(`SqliteRunStore (${driver.name}): a file written before the listings`, () => {
    it("gains the root node type of every run, and the approval indexes, on open", async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-rs-up-"));
      const file = path.join(dir, "run-coordinator.db");
      const typed = (type: string, created_at: number) => {
        const run = makeRun({ created_at });
        const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id, created_at });
        root.node_run.node_type_ref = { node_type_id: type, version: "1.0.0" };
        return { run, root };
      };
      const a = typed("old.a", T0);
      const b = typed("old.b", T0 + 1);
      const approval = makeApproval(b.root, { created_at: T0 + 2 });
      try {
        const first = new SqliteRunStore({ path: file, ...driver.options });
        await first.apply({ runs: [a.run, b.run], nodeRuns: [a.root, b.root], approvals: [approval] });
        await first.close();
        // Make it the older schema: no root node type column, none of the listing indexes.
        const db = openSqliteDatabase(file, driver.options);
        db.exec(`DROP INDEX runs_by_root_type; DROP INDEX approvals_by_created; DROP INDEX approvals_by_state; DROP INDEX approvals_by_run;
                 ALTER TABLE runs DROP COLUMN root_node_type_id;`);
        expect((db.pragma("table_info(runs)") as Array<{ name: string }>).map((c) => c.name)).not.toContain("root_node_type_id");
        db.close();

        const store = new SqliteRunStore({ path: file, ...driver.options });
        try {
          expect(await store.listRuns({ limit: 10, root_node_type_id: "old.a" })).toEqual([a.run]);
          expect(await store.listRuns({ limit: 10, root_node_type_id: "old.b" })).toEqual([b.run]);
          expect(await store.listApprovals({ limit: 10, state: "pending" })).toEqual([
            { ...approval, tenant_id: null, node_type_ref: { node_type_id: "old.b", version: "1.0.0" } },
          ]);
          // New runs get theirs as they are written.
          const c = typed("old.a", T0 + 3);
          await store.apply({ runs: [c.run], nodeRuns: [c.root] });
          expect((await store.listRuns({ limit: 10, root_node_type_id: "old.a" })).map((r) => r.run_id)).toEqual([c.run.run_id, a.run.run_id]);
        } finally {
          await store.close();
        }
        // Opening it again changes nothing.
        const again = new SqliteRunStore({ path: file, ...driver.options });
        expect((await again.listRuns({ limit: 10, root_node_type_id: "old.b" })).map((r) => r.run_id)).toEqual([b.run.run_id]);
        await again.close();
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
