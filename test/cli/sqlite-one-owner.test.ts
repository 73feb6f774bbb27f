/**
 * One coordinator process per SQLite file: a second `fabric dev` on the data directory of a running one refuses to
 * start, naming the process that has it and what to do instead, and the first goes on serving; after a `kill -9` of
 * the first, the file is taken over by the next start, with the runs it held.
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };

describe("two fabric processes on one SQLite data directory", () => {
  const started: FabricProcess[] = [];
  afterAll(async () => {
    for (const f of started) await f.stop("SIGKILL");
  });

  it("refuses the second with the owner's pid, keeps the first serving, and lets a restart after kill -9 take the file over", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-owner-"));
    const first = await startFabricProcess(["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir], { cwd: repo });
    started.push(first);
    const run = await call("POST", `${first.urls["run-gateway"]}/v1/runs`, { run_id: "run_owner_1", root_node_type_ref: ECHO, input: { n: 1 } }, { prefer: "wait=20" });
    expect(run.body.state).toBe("completed");

    const second = await runFabric(["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir], { cwd: repo });
    expect(second.code).not.toBe(0);
    expect(second.stderr + second.stdout).toContain(`is in use by process ${first.child.pid}`);
    expect(second.stderr + second.stdout).toContain("PostgreSQL");

    const again = await call("GET", `${first.urls["run-gateway"]}/v1/runs/run_owner_1`);
    expect(again.status).toBe(200);
    expect(again.body.state).toBe("completed");

    await first.stop("SIGKILL");
    const third = await startFabricProcess(["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir], { cwd: repo });
    started.push(third);
    const kept = await call("GET", `${third.urls["run-gateway"]}/v1/runs/run_owner_1`);
    expect(kept.status).toBe(200);
    expect(kept.body.state).toBe("completed");
  }, 90_000);
});
