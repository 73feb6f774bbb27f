import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

const SERVICES = ["node-registry", "pdp", "selection", "atomic-executor", "run-coordinator", "run-gateway"];

/** Starts each service with `fabric start <service> <args>` in its own process; returns the URL of a service. */
async function startSplit(procs: FabricProcess[], services: string[], args: string[], env: Record<string, string> = {}): Promise<(name: string) => string> {
  for (const service of services) procs.push(await startFabricProcess(["start", service, ...args], { cwd: repo, env, expect: 1 }));
  return (name: string) => procs.find((p) => p.urls[name])!.urls[name];
}

describe("fabric start: one service per process, wired over HTTP", () => {
  const procs: FabricProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
  });

  it("runs a node through gateway, coordinator, PDP, registry, selection and executor in six processes", async () => {
    const base = await freePortBase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-split-"));
    const url = await startSplit(procs, SERVICES, ["--auth", "disabled", "--port-base", String(base), "--data-dir", dataDir]);
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

describe("fabric start with authentication required: service tokens over real HTTP", () => {
  const procs: FabricProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
  });

  it("completes an atomic and a composite run through seven processes for a client with a token, and refuses one without", async () => {
    const base = await freePortBase();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-split-auth-"));
    const keysDir = path.join(dataDir, "keys");
    const keys = await runFabric(["keys", "generate", "--out", keysDir], { cwd: repo });
    expect(keys.code).toBe(0);
    // Every process, the token minting included, reads the same auth configuration from the environment.
    const env = {
      FABRIC_AUTH_ISSUER: "https://issuer.split.test",
      FABRIC_AUTH_JWKS_FILE: path.join(keysDir, "jwks.json"),
      FABRIC_AUTH_SIGNING_KEY_FILE: path.join(keysDir, "signing-key.json"),
    };
    const url = await startSplit(procs, [...SERVICES.slice(0, 4), "composite-executor", ...SERVICES.slice(4)], ["--auth", "required", "--port-base", String(base), "--data-dir", dataDir], env);
    for (const p of procs) await eventually(async () => (p.output().includes("auth: required") ? true : undefined), 5_000, "the auth line of the banner");

    const minted = await runFabric(["token", "mint", "--aud", "run-gateway", "--aud", "node-registry", "--scope", "runs:read runs:write node-types:read"], { cwd: repo, env });
    expect(minted.stderr).toBe("");
    expect(minted.code).toBe(0);
    const bearer = { authorization: `Bearer ${minted.stdout.trim()}` };

    // The executor announces itself to the registry with its own service token.
    expect((await call("GET", `${url("node-registry")}/v1/executors`)).status).toBe(401);
    await eventually(async () => ((await call("GET", `${url("node-registry")}/v1/executors?node_type_id=demo.echo`, undefined, bearer)).body.length > 0 ? true : undefined), 15_000);

    const request = { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { split: "auth" } };
    const refused = await call("POST", `${url("run-gateway")}/v1/runs`, request, { prefer: "wait=10" });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe("unauthenticated");
    expect(refused.headers["www-authenticate"]).toContain("Bearer");

    // Gateway → coordinator → PDP, registry and executor: each hop carries the caller's service token.
    const r = await call("POST", `${url("run-gateway")}/v1/runs`, request, { prefer: "wait=10", ...bearer });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { echo: { split: "auth" } } } });
    const ev = await readNdjson(`${url("run-gateway")}/v1/runs/${r.body.run_id}/events`, bearer);
    expect(ev.status).toBe(200);
    expect(ev.lines.filter((e) => e.type === "policy_decided")).toHaveLength(2);
    expect(ev.lines.at(-1).type).toBe("run_completed");
    expect((await readNdjson(`${url("run-gateway")}/v1/runs/${r.body.run_id}/events`)).status).toBe(401);

    // A composite in its own process: the coordinator's token for :begin, the executor's assignment token for its
    // children, its own tokens for the registry.
    const fanout = await call("POST", `${url("run-gateway")}/v1/runs`, { root_node_type_ref: { node_type_id: "examples.fanout", version: "1.0.0" }, input: { items: ["a", "b"] } }, { prefer: "wait=20", ...bearer });
    expect(fanout.status).toBe(200);
    expect(fanout.body.state, JSON.stringify(fanout.body.extensions)).toBe("completed");
    const nodeRuns = await call("GET", `${url("run-gateway")}/v1/runs/${fanout.body.run_id}/node-runs`, undefined, bearer);
    expect(nodeRuns.body).toHaveLength(3);

    // ctx.select in its own process: Selection with the executor's token, then the PDP over HTTP with it too, for each
    // candidate (node.run.create), before the composite sees the set.
    const picked = await call(
      "POST",
      `${url("run-gateway")}/v1/runs`,
      { root_node_type_ref: { node_type_id: "examples.pick-and-run", version: "1.0.0" }, input: { goal: "echo the inputs back", inputs: { hello: "split" }, allowed_node_type_ids: ["demo.echo"] } },
      { prefer: "wait=20", ...bearer },
    );
    expect(picked.status).toBe(200);
    expect(picked.body.state, JSON.stringify(picked.body.extensions)).toBe("completed");
    expect(picked.body.extensions["nodefabric.outputs"]).toMatchObject({ outputs: { echo: { hello: "split" } } });
  }, 120_000);
});
