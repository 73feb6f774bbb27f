/**
 * Selection's CandidateSet store on real SQLite files, once per SQLite driver this Node can run.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteCandidateSetStore } from "../src/store/candidate-set-sqlite-store.js";
import { sqliteDrivers, unavailableSqliteDrivers } from "./support/sqlite-drivers.js";

for (const { name, reason } of unavailableSqliteDrivers) {
  it.skip(`SqliteCandidateSetStore (${name}): not run, ${reason}`, () => {});
}

for (const driver of sqliteDrivers) {
  describe(`SqliteCandidateSetStore (${driver.name})`, () => {
    const dirs: string[] = [];
    const stores: SqliteCandidateSetStore[] = [];
    afterEach(async () => {
      for (const s of stores.splice(0)) await s.close();
      for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
    });
    function open(file?: string): { store: SqliteCandidateSetStore; file: string } {
      if (!file) {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-cs-"));
        dirs.push(dir);
        file = path.join(dir, "selection.db");
      }
      const store = new SqliteCandidateSetStore(file, driver.options);
      stores.push(store);
      return { store, file };
    }
    const record = (id: string) => ({
      candidate_set_id: id,
      subtask_id: "s1",
      json: JSON.stringify({ candidate_set_id: id, subtask_id: "s1", candidates: [{ node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" } }] }),
      created_at: "2026-11-25T12:00:00.000Z",
    });

    it("keeps a candidate set's JSON as written, across a reopen, and knows no other", async () => {
      const { store, file } = open();
      expect(store.driver).toBe(driver.name);
      await store.insertCandidateSet(record("cs_1"));
      expect(await store.getCandidateSetJson("cs_1")).toBe(record("cs_1").json);
      expect(await store.getCandidateSetJson("cs_unknown")).toBeUndefined();
      await store.ping();
      await store.close();
      const again = open(file).store;
      expect(await again.getCandidateSetJson("cs_1")).toBe(record("cs_1").json);
    });

    it("refuses a second set with the same id and keeps the first", async () => {
      const { store } = open();
      await store.insertCandidateSet(record("cs_1"));
      await expect(store.insertCandidateSet({ ...record("cs_1"), json: "{}" })).rejects.toThrow(/UNIQUE constraint failed/);
      expect(await store.getCandidateSetJson("cs_1")).toBe(record("cs_1").json);
    });

    it("closing twice is harmless", async () => {
      const { store } = open();
      await store.close();
      await store.close();
    });
  });
}
