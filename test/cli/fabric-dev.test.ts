import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { validatorFor } from "@nodefabric/schemas";
import { runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

const json = call;


describe("fabric dev, as a user runs it", () => {
  let fabric: FabricProcess;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-dev-"));
    fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", dataDir], { cwd: repo });
  });
  afterAll(async () => {
    await fabric?.stop();
  });

  it("starts all seven services, each answering health and version", async () => {
    expect(Object.keys(fabric.urls).sort()).toEqual(
      ["atomic-executor", "composite-executor", "node-registry", "pdp", "run-coordinator", "run-gateway", "selection"].sort(),
    );
    for (const [name, url] of Object.entries(fabric.urls)) {
      const h = await json("GET", `${url}/v1/health`);
      expect(h.status, name).toBe(200);
      expect(validatorFor("health")(h.body), name).toBe(true);
      const v = await json("GET", `${url}/v1/version`);
      expect(v.body.service_name).toBe(name);
      expect(validatorFor("version_info")(v.body)).toBe(true);
    }
  });

  it("runs a node through the gateway, and refuses a bad composite begin with 400", async () => {
    const registry = fabric.urls["node-registry"];
    await eventually(async () => {
      const r = await json("GET", `${registry}/v1/executors?node_type_id=demo.echo`);
      return r.status === 200 && r.body.length > 0 ? true : undefined;
    });
    const r = await json("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { a: 1 } }, { prefer: "wait=10" });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { echo: { a: 1 } } } });
    const c = await json("POST", `${fabric.urls["composite-executor"]}/v1/composite-node-runs:begin`, {});
    expect(c.status).toBe(400);
    expect(c.body.error.code).toBe("invalid_request");
  });

  it("discovers the demo handlers, publishes them, and executes one", async () => {
    const registry = fabric.urls["node-registry"];
    const echo = await eventually(async () => {
      const r = await json("GET", `${registry}/v1/node-types/demo.echo`);
      return r.status === 200 ? r.body : undefined;
    });
    expect(echo).toMatchObject({ node_type_id: "demo.echo", kind: "atomic" });
    const r = await json("POST", `${fabric.urls["atomic-executor"]}/v1/atomic-node-runs:execute`, {
      run_id: "run_cli",
      node_run_id: "nr_cli",
      node_type_ref: { node_type_id: "demo.echo", version: echo.version },
      inputs: { hello: "world" },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "completed", outputs: { echo: { hello: "world" } } });
  });

  it("lists and publishes node types with `fabric node-types`", async () => {
    const registry = fabric.urls["node-registry"];
    const file = path.join(dataDir, "weather.json");
    writeFileSync(
      file,
      JSON.stringify({ node_type_id: "weather.current", version: "1.2.0", kind: "atomic", description: "Current weather for a city", input_schema: { type: "object" } }),
    );
    const pub = await runFabric(["node-types", "publish", file, "--registry", registry]);
    expect(pub.stderr).toBe("");
    expect(pub.stdout).toContain("published weather.current@1.2.0");
    expect(pub.code).toBe(0);
    const ls = await runFabric(["node-types", "ls", "weather", "--registry", registry]);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/NODE TYPE\s+VERSION\s+KIND/);
    expect(ls.stdout).toMatch(/weather\.current\s+1\.2\.0\s+atomic\s+Current weather for a city/);
    expect(ls.stdout).not.toContain("demo.echo");
    const bad = await runFabric(["node-types", "publish", file.replace("weather", "nope"), "--registry", registry]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("cannot read");
  });
});

describe("fabric CLI errors", () => {
  it("stops with exit 2 and names the bad option", async () => {
    const d = mkdtempSync(path.join(os.tmpdir(), "nf-bad-"));
    writeFileSync(path.join(d, "fabric.config.json"), JSON.stringify({ port_base: "x" }));
    const r = await runFabric(["dev"], { cwd: d });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("port_base: must be integer");
  });

  it("refuses an unknown service name for `fabric start`", async () => {
    const r = await runFabric(["start", "nonsense"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("must be one of run-gateway");
  });
});
