import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePortBase, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));


describe("fabric start: one service per process, wired over HTTP", () => {
  const procs: FabricProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
  });

  it("runs a node through gateway, coordinator, PDP, registry, selection and executor in six processes", async () => {
    const base = await freePortBase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-split-"));
    const common = ["--port-base", String(base), "--data-dir", dataDir];
    for (const service of ["node-registry", "pdp", "selection", "atomic-executor", "run-coordinator", "run-gateway"]) {
      procs.push(await startFabricProcess(["start", service, ...common], { cwd: repo, expect: 1 }));
    }
    const url = (name: string) => procs.find((p) => p.urls[name])!.urls[name];
    expect(url("run-gateway")).toBe(`http://127.0.0.1:${base}`);
    await eventually(async () => ((await call("GET", `${url("node-registry")}/v1/executors?node_type_id=demo.echo`)).body.length > 0 ? true : undefined), 15_000);

    const r = await call("POST", `${url("run-gateway")}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { split: true } }, { prefer: "wait=10" });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { echo: { split: true } } } });
    const ev = await readNdjson(`${url("run-gateway")}/v1/runs/${r.body.run_id}/events`);
    expect(ev.lines.filter((e) => e.type === "policy_decided")).toHaveLength(2);
    expect(ev.lines.at(-1).type).toBe("run_completed");

    const health = await call("GET", `${url("run-gateway")}/v1/health`);
    expect(health.body.checks.find((c: { name: string }) => c.name === "run-coordinator").status).not.toBe("down");
  }, 90_000);
});
