/**
 * SqliteRunStore.listOpenNodeRuns: what a composite's end reads instead of every NodeRun of its run — the NodeRuns
 * still open, oldest first, as committed (including after a reopen), never another run's.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, expect, it } from "vitest";
import { openSqliteRunStore, type SqliteRunStore } from "../src/store/sqlite-run-store.js";
import { makeNodeRun, makeRun, T0 } from "./store/run-store-contract.js";

const dirs: string[] = [];
const stores: SqliteRunStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function open(file: string): SqliteRunStore {
  const store = openSqliteRunStore({ path: file });
  stores.push(store);
  return store;
}

it("answers the open NodeRuns of one run, oldest first, as the last commit left them, after a reopen too", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-open-"));
  dirs.push(dir);
  const file = path.join(dir, "runs.db");
  const store = open(file);
  const run = makeRun({ state: "running" });
  const other = makeRun({ state: "running" });
  const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id, state: "running", created_at: T0 });
  const children = ["queued", "assigned", "running", "completed", "failed", "canceled"].map((state, i) =>
    makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id, state: state as never, depth: 1, created_at: T0 + 10 - i }),
  );
  const elsewhere = makeNodeRun({ run_id: other.run_id, node_run_id: other.run.root_node_run_id, state: "running" });
  await store.apply({ runs: [run, other], nodeRuns: [root, ...children, elsewhere] });

  const ids = async (s: SqliteRunStore) => (await s.listOpenNodeRuns(run.run_id)).map((n) => [n.node_run_id, n.state]);
  // Oldest first: the running child was created before the assigned one, which was created before the queued one.
  expect(await ids(store)).toEqual([
    [root.node_run_id, "running"],
    [children[2].node_run_id, "running"],
    [children[1].node_run_id, "assigned"],
    [children[0].node_run_id, "queued"],
  ]);

  // A child that ends leaves the answer with the commit that ends it.
  children[2].state = "completed";
  children[2].node_run.state = "completed";
  await store.apply({ nodeRuns: [children[2]] });
  expect(await ids(store)).toEqual([
    [root.node_run_id, "running"],
    [children[1].node_run_id, "assigned"],
    [children[0].node_run_id, "queued"],
  ]);
  const full = (await store.listOpenNodeRuns(run.run_id))[1];
  expect(full).toEqual(await store.getNodeRun(children[1].node_run_id));

  await store.close();
  expect(await ids(open(file))).toEqual([
    [root.node_run_id, "running"],
    [children[1].node_run_id, "assigned"],
    [children[0].node_run_id, "queued"],
  ]);
  expect(await (stores.at(-1) as SqliteRunStore).listOpenNodeRuns("run_unknown")).toEqual([]);
});
