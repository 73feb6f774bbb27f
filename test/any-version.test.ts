import { describe, it, expect, beforeAll, afterAll, vi } from "vitest";
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { validatorFor } from "@nodefabric/schemas";
import { loadConfig, startFabric, type RunningFabric } from "@nodefabric/core";
import { runCommand } from "../core/src/cli/run-command.js";
import { call, eventually } from "./run-client.js";

// Issue 10, invariant 7: a NodeType's version is any string. Node types whose versions are not semver are published
// (by an executor loading a handler package, and at run time), run through the gateway, and named by `fabric run`.
const repo = fileURLToPath(new URL("..", import.meta.url));
const versionFixtures = path.join(repo, "test/fixtures/version-handlers");
const isRun = validatorFor("run");

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe("any version string, through the whole fabric", () => {
  let fabric: RunningFabric;
  let gw: string;
  let registry: string;

  beforeAll(async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-any-version-"));
    fabric = await startFabric(
      loadConfig({
        cwd: repo,
        env: {},
        flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples", versionFixtures] } as never,
      }),
    );
    gw = fabric.urls["run-gateway"]!;
    registry = fabric.urls["node-registry"]!;
    // The atomic executor publishes its node types, then registers as serving them: 2024-01 must be publishable.
    await eventually(
      async () => ((await call("GET", `${registry}/v1/executors?node_type_id=fixture.dated&version=2024-01`)).body.length > 0 ? true : undefined),
      15_000,
      "registration of fixture.dated@2024-01",
    );
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
  });

  /** The node_type_ref of a run's root NodeRun. */
  async function rootRef(run: Json): Promise<Json> {
    const r = await call("GET", `${gw}/v1/runs/${run.run_id}/node-runs`);
    expect(r.status).toBe(200);
    return (r.body as Json[]).find((n) => n.node_run_id === run.root_node_run_id)!.node_type_ref;
  }

  async function runToEnd(root: { node_type_id: string; version: string }, input: Json): Promise<Json> {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: root, input }, { prefer: "wait=30" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(isRun(r.body), JSON.stringify(isRun.errors)).toBe(true);
    expect(r.body.state, JSON.stringify(r.body.extensions)).toBe("completed");
    expect(await rootRef(r.body)).toEqual(root);
    return r.body;
  }

  it("publishes a handler package's node type at version 2024-01 and runs it", async () => {
    const g = await call("GET", `${registry}/v1/node-types/fixture.dated?version=2024-01`);
    expect(g.status).toBe(200);
    expect((await call("GET", `${registry}/v1/node-types/fixture.dated/versions`)).body).toEqual(["2024-01"]);
    const run = await runToEnd({ node_type_id: "fixture.dated", version: "2024-01" }, { x: 1 });
    expect(run.extensions["nodefabric.outputs"]).toEqual({ version: "2024-01", inputs: { x: 1 } });
  });

  it("runs a node type published at run time as v1, implemented by a template at version tpl-1", async () => {
    const hello = (version: string, greeting: string) => ({
      node_type_id: "fixture.hello",
      version,
      kind: "atomic",
      description: `Greets (${version})`,
      input_schema: { type: "object", properties: { name: { type: "string" } } },
      constraints: { gates: { side_effect_class: "read" } },
      extensions: { "nodefabric.implementation": { node_type_id: "fixture.greeter", version: "tpl-1" }, "fixture.greeting": greeting },
    });
    for (const [v, greeting] of [["1.0.0", "Hello"], ["v1", "Hi"]] as const) {
      const p = await call("POST", `${registry}/v1/node-types`, { node_type: hello(v, greeting) });
      expect(p.status, JSON.stringify(p.body)).toBe(200);
    }
    expect((await call("GET", `${registry}/v1/node-types/fixture.hello`)).body.version).toBe("v1");
    const run = await runToEnd({ node_type_id: "fixture.hello", version: "v1" }, { name: "Ada" });
    expect(run.extensions["nodefabric.outputs"]).toEqual({ text: "Hi, Ada!", ran: "fixture.hello@v1" });
    const older = await runToEnd({ node_type_id: "fixture.hello", version: "1.0.0" }, { name: "Ada" });
    expect(older.extensions["nodefabric.outputs"]).toEqual({ text: "Hello, Ada!", ran: "fixture.hello@1.0.0" });
  });

  it("runs a declarative plan published at run time as v1, whose steps name a 2024-01 node type", async () => {
    const plan = JSON.parse(readFileSync(path.join(repo, "handlers/examples/node-types/plan-greet.json"), "utf8"));
    plan.node_type_id = "fixture.plan-greet";
    plan.version = "v1";
    plan.extensions["nodefabric.plan"].steps[1].node_type_ref = { node_type_id: "fixture.dated", version: "2024-01" };
    plan.extensions["nodefabric.plan"].outputs.count = "{% steps.count.outputs.inputs.greeted %}";
    const p = await call("POST", `${registry}/v1/node-types`, { node_type: plan });
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    const run = await runToEnd({ node_type_id: "fixture.plan-greet", version: "v1" }, { names: ["Ada", "Linus"], greeting: "Hello" });
    expect(run.extensions["nodefabric.outputs"]).toEqual({ greetings: ["Hello, Ada!", "Hello, Linus!"], count: 2 });
    const nodeRuns = (await call("GET", `${gw}/v1/runs/${run.run_id}/node-runs`)).body as Json[];
    expect(nodeRuns.map((n) => n.node_type_ref)).toContainEqual({ node_type_id: "fixture.dated", version: "2024-01" });
  });

  it("answers 404 for a version that is not published, listing those that are", async () => {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: { node_type_id: "fixture.hello", version: "v9" }, input: {} }, { prefer: "wait=10" });
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(r.body)).toContain("v9");
  });

  it("runs `fabric run id@v1`, and `fabric run id` takes the latest, v1", async () => {
    const out: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk: unknown) => {
      out.push(String(chunk));
      return true;
    });
    const errWrite = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const lastRun = () => (JSON.parse(out.join("").trimEnd().split("\n").at(-1)!) as { run: Json }).run;
    try {
      const code = await runCommand("fixture.hello@v1", { gateway: gw, registry, input: '{"name":"Grace"}', follow: true });
      expect(code, out.join("")).toBe(0);
      expect(await rootRef(lastRun())).toEqual({ node_type_id: "fixture.hello", version: "v1" });
      expect(lastRun().extensions["nodefabric.outputs"]).toEqual({ text: "Hi, Grace!", ran: "fixture.hello@v1" });

      out.length = 0;
      const latest = await runCommand("fixture.hello", { gateway: gw, registry, input: '{"name":"Grace"}', follow: false });
      expect(latest, out.join("")).toBe(0);
      expect(await rootRef(lastRun())).toEqual({ node_type_id: "fixture.hello", version: "v1" });

      out.length = 0;
      const dated = await runCommand("fixture.dated@2024-01", { gateway: gw, registry, input: "{}", follow: true });
      expect(dated, out.join("")).toBe(0);
      expect(lastRun().extensions["nodefabric.outputs"]).toEqual({ version: "2024-01", inputs: {} });
    } finally {
      write.mockRestore();
      errWrite.mockRestore();
    }
  });
});
