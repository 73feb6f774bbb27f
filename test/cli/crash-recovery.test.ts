import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePortBase, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));


const TERMINAL = new Set(["completed", "failed", "canceled"]);

// Both places the SQLite store's writes can run: the store's connection (the default), and a writer thread's own,
// whose commits the process acknowledges from another thread.
describe.each(["inline", "thread"])("a kill -9 of the fabric with runs in flight (FABRIC_SQLITE_WRITER=%s)", (writer) => {
  let fabric: FabricProcess | undefined;
  afterAll(async () => {
    await fabric?.stop("SIGKILL");
  });
  const env = { FABRIC_SQLITE_WRITER: writer };

  it("loses nothing: every run ends completed, no terminal state changes, and seq stays gapless", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-crash-"));
    const base = await freePortBase();
    const args = ["dev", "--port-base", String(base), "--data-dir", dataDir];
    fabric = await startFabricProcess(args, { cwd: repo, env });
    const gw = fabric.urls["run-gateway"];
    const health = await call("GET", `${fabric.urls["run-coordinator"]}/v1/health`);
    expect(health.body.checks.find((c: { name: string }) => c.name === "store").details.sqlite_writer).toBe(writer);
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=demo.sleep`);
      return r.body?.length > 0 ? true : undefined;
    }, 15_000, "executor registration");

    // Runs that end before the crash: their terminal state must survive it unchanged.
    const finished = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { i } }, { prefer: "wait=20" }),
      ),
    );
    for (const f of finished) expect(f.body.state).toBe("completed");

    // 200 runs that sleep long enough to be in flight when the process dies. How many run at once depends on how fast
    // this machine dispatches (at least 20 here needs about 7 a second, which a loaded machine still does; 50 with
    // 1.5 s sleeps needed 33 a second, and failed under load): the test needs runs in flight, not a number of them.
    const started = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.sleep", version: "1.0.0" }, input: { ms: 3000, value: i } }),
      ),
    );
    for (const s of started) expect(s.status).toBe(200);
    const ids = started.map((s) => s.body.run_id as string);
    await eventually(async () => {
      const r = await call("GET", `${gw}/v1/runs?state=running&limit=1000`);
      return r.body.length >= 20 ? true : undefined;
    }, 30_000, "runs in flight");

    const code = await fabric.stop("SIGKILL");
    expect(code).toBe(null);

    fabric = await startFabricProcess(args, { cwd: repo, env });
    const gw2 = fabric.urls["run-gateway"];
    expect(gw2).toBe(gw);

    const ended = await eventually(async () => {
      const runs = await Promise.all(ids.map((id) => call("GET", `${gw2}/v1/runs/${id}`)));
      return runs.every((r) => TERMINAL.has(r.body?.state)) ? runs.map((r) => r.body) : undefined;
    }, 60_000, "every run ended after the restart");
    for (const run of ended) {
      expect(run.state, run.run_id).toBe("completed");
      expect(run.extensions["nodefabric.outputs"].slept_ms).toBe(3000);
    }
    expect(new Set(ended.map((r) => r.extensions["nodefabric.outputs"].value)).size).toBe(200);

    for (const f of finished) {
      const again = await call("GET", `${gw2}/v1/runs/${f.body.run_id}`);
      expect(again.body).toEqual(f.body);
    }

    for (const id of [...ids, ...finished.map((f) => f.body.run_id as string)]) {
      const ev = await readNdjson(`${gw2}/v1/runs/${id}/events?follow=false`);
      expect(ev.lines.map((e) => e.seq), id).toEqual(ev.lines.map((_, i) => i));
      expect(ev.lines.filter((e) => e.type === "run_completed"), id).toHaveLength(1);
      expect(ev.lines.at(-1).type, id).toBe("run_completed");
      expect(ev.lines.filter((e) => e.type === "node_run_completed"), id).toHaveLength(1);
    }
  }, 120_000);
});
