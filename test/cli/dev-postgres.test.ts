/**
 * `fabric dev --store postgres://…` as a user tries it: two processes on different port bases and the same database
 * act as two nodes of one fabric. Runs started on the first are read and followed on the second; after a SIGKILL of
 * the first, the second finishes them all.
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePortBase, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually, followNdjson, readNdjson } from "../run-client.js";
import { dropSchemas, newSchema, storeUrl } from "../e2e/pg-fabric.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const SLEEP = { node_type_id: "demo.sleep", version: "1.0.0" };
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe("two `fabric dev --store postgres://…` processes", () => {
  const nodes: FabricProcess[] = [];
  afterAll(async () => {
    for (const n of nodes) await n.stop("SIGKILL");
    await dropSchemas();
  });

  it("act as two nodes of one fabric, and the survivor finishes the runs of the one killed", async () => {
    const store = storeUrl(newSchema("nf_dev"));
    const env = { FABRIC_COORDINATOR_RUN_LEASE_MS: "2000", FABRIC_REGISTRY_EXECUTOR_TTL_MS: "2000" };
    const start = async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-devpg-"));
      const n = await startFabricProcess(["dev", "--store", store, "--port-base", String(await freePortBase()), "--data-dir", dataDir], { cwd: repo, env });
      nodes.push(n);
      return n;
    };
    const [one, two] = await Promise.all([start(), start()]);
    // The banner names the store after the services' URLs, which is when the start resolved.
    await eventually(async () => (/store: postgres:\/\//.test(one.output()) ? true : undefined), 5_000, "the banner names the store");
    const gw1 = one.urls["run-gateway"];
    const gw2 = two.urls["run-gateway"];
    await eventually(async () => {
      const r = await call("GET", `${two.urls["node-registry"]}/v1/executors?node_type_id=demo.sleep`);
      return r.body?.length === 2 ? true : undefined;
    }, 20_000, "both nodes' executors in the shared directory");

    // A run started on node one is read, and followed to its end, on node two.
    const quick = await call("POST", `${gw1}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 400, value: "followed" } });
    expect(quick.status).toBe(200);
    const followed = await followNdjson(`${gw2}/v1/runs/${quick.body.run_id}/events?follow=true`, (e) => e.type === "run_completed");
    expect(followed.map((e) => e.seq)).toEqual(followed.map((_, i) => i));
    expect(followed.at(-1)).toMatchObject({ type: "run_completed", data: { state: "completed" } });
    const read = await call("GET", `${gw2}/v1/runs/${quick.body.run_id}`);
    expect(read.body).toEqual((await call("GET", `${gw1}/v1/runs/${quick.body.run_id}`)).body);
    expect(read.body.extensions["nodefabric.outputs"]).toEqual({ slept_ms: 400, value: "followed" });

    // Runs in flight on node one when it dies: node two takes them over and finishes every one.
    const echoed = await call("POST", `${gw1}/v1/runs`, { root_node_type_ref: ECHO, input: { before: "the crash" } }, { prefer: "wait=10" });
    expect(echoed.body.state).toBe("completed");
    const started = await Promise.all(
      Array.from({ length: 40 }, (_, i) => call("POST", `${gw1}/v1/runs`, { root_node_type_ref: SLEEP, input: { ms: 3000, value: i } })),
    );
    for (const s of started) expect(s.status).toBe(200);
    const ids = started.map((s) => s.body.run_id as string);
    await eventually(async () => {
      const r = await call("GET", `${gw2}/v1/runs?state=running&limit=100`);
      return r.body.length >= 10 ? true : undefined;
    }, 15_000, "runs in flight");
    expect(await one.stop("SIGKILL")).toBe(null);

    const ended = await eventually(async () => {
      const runs = await Promise.all(ids.map((id) => call("GET", `${gw2}/v1/runs/${id}`)));
      return runs.every((r) => ["completed", "failed", "canceled"].includes(r.body?.state)) ? runs.map((r) => r.body as Json) : undefined;
    }, 60_000, "node two finished every run");
    for (const run of ended) expect(run.state, run.run_id).toBe("completed");
    expect(new Set(ended.map((r) => r.extensions["nodefabric.outputs"].value)).size).toBe(40);
    for (const id of ids) {
      const ev = await readNdjson(`${gw2}/v1/runs/${id}/events?follow=false`);
      expect(ev.lines.map((e) => e.seq), id).toEqual(ev.lines.map((_, i) => i));
      expect(ev.lines.filter((e) => e.type === "run_completed"), id).toHaveLength(1);
    }
    // What ended before the crash stays as it was.
    expect((await call("GET", `${gw2}/v1/runs/${echoed.body.run_id}`)).body).toEqual(echoed.body);
  }, 150_000);
});
