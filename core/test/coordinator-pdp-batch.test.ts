/**
 * A run's first two policy questions in one exchange (docs/pdp.md, "Several decisions in one request"), across real
 * services on loopback: a registry and an atomic executor, two PDPs counting the requests they get (one current, one
 * from before POST /v1/policy:decideBatch, which answers it 404), and a coordinator on each. A run asks the current
 * PDP once; the older PDP is asked one question at a time, as every PDP was before, and that fallback is remembered.
 * Either way the run records the same events: what a run records does not depend on how its questions travelled.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import { buildPdp } from "../src/services/pdp/index.js";
import { buildRunCoordinator } from "../src/services/run-coordinator/index.js";
import { baseOf, call, until } from "./support/gateway-http.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const echoRef = { node_type_id: "demo.echo", version: "1.0.0" };
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Each tenant meets one outcome at one checkpoint; every other question is allowed. */
const POLICY = `
@id("forbid-start")
forbid(principal, action == NodeFabric::Action::"run.start", resource) when { principal has tenant_id && principal.tenant_id == "deny-start" };

@id("forbid-execute")
forbid(principal, action == NodeFabric::Action::"node.run.execute", resource) when { principal has tenant_id && principal.tenant_id == "deny-execute" };

@id("approve-start")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"run.start", resource) when { principal has tenant_id && principal.tenant_id == "approve-start" };

@id("approve-execute")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource) when { principal has tenant_id && principal.tenant_id == "approve-execute" };

@id("allow-all")
permit(principal, action, resource);
`;

/** Ids differ from run to run; everything else an event says must not. */
function normalized(events: Json[]): Json[] {
  const names = new Map<string, string>();
  const rename = (v: unknown): unknown => {
    if (typeof v === "string") {
      return v.replace(/\b(run|nr|apr)_[0-9a-z]{20,}\b/g, (id, kind: string) => {
        if (!names.has(id)) names.set(id, `<${kind}${[...names.keys()].filter((k) => k.startsWith(kind)).length}>`);
        return names.get(id)!;
      });
    }
    if (Array.isArray(v)) return v.map(rename);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === "duration_ms" ? "<ms>" : rename(x)]));
    return v;
  };
  return events.map(({ time: _time, ...e }) => rename(e) as Json);
}

describe("a run's run.start and node.run.execute questions in one request to the PDP", () => {
  let fabric: RunningFabric;
  let dataDir: string;
  const apps: FastifyInstance[] = [];
  /** The requests each PDP got, by path. */
  const seen = { current: [] as string[], older: [] as string[] };
  let current: string;
  let older: string;
  /** The current PDP's URL. */
  let currentPdp: string;

  async function listen(app: FastifyInstance): Promise<string> {
    apps.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    return baseOf(app);
  }

  async function coordinatorOn(pdpUrl: string, name: string): Promise<string> {
    return listen(
      await buildRunCoordinator({ logger: false, dbPath: path.join(dataDir, `${name}.db`), registryUrl: fabric.urls["node-registry"]!, atomicExecutorUrl: fabric.urls["atomic-executor"], pdpUrl }),
    );
  }

  /** Starts an echo run of `tenant` on a coordinator; waits for its end unless it is to wait for a person. */
  async function runOn(coordinator: string, tenant: string, wait = true): Promise<Json> {
    const r = await call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: echoRef, input: { tenant }, run_context: { tenant_id: tenant } }, wait ? { prefer: "wait=20" } : {});
    expect(r.status, r.text).toBe(200);
    return r.body;
  }

  async function eventsOf(coordinator: string, runId: string): Promise<Json[]> {
    const r = await call("GET", `${coordinator}/v1/runs/${runId}/events?follow=false`);
    expect(r.status).toBe(200);
    return r.text.trim().split("\n").map((l) => JSON.parse(l));
  }

  async function ended(coordinator: string, runId: string): Promise<Json> {
    return until("the run's end", async () => {
      const r = await call("GET", `${coordinator}/v1/runs/${runId}`);
      return ["completed", "failed", "canceled"].includes(r.body?.state) ? r.body : undefined;
    }, 20_000);
  }

  /** What each PDP is asked while `fn` runs. */
  async function asked(fn: () => Promise<void>): Promise<{ current: string[]; older: string[] }> {
    seen.current.length = 0;
    seen.older.length = 0;
    await fn();
    return { current: [...seen.current], older: [...seen.older] };
  }

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-pdp-batch-"));
    const policyFile = path.join(dataDir, "policy.cedar");
    fs.writeFileSync(policyFile, POLICY);
    const config = loadConfig({ cwd: repoRoot, env: {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"] } });
    fabric = await startFabric(config, ["node-registry", "atomic-executor"]);
    await until("demo node types published", async () => ((await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/demo.echo`)).status === 200 ? true : undefined));

    const counting = (into: string[], older: boolean) => (app: FastifyInstance) =>
      app.addHook("onRequest", async (req, reply) => {
        if (!req.url.startsWith("/v1/policy:")) return;
        into.push(req.url);
        // A PDP from before the batch endpoint: that route answers as an unknown route does.
        if (older && req.url === "/v1/policy:decideBatch") await reply.code(404).send({ error: { code: "route_not_found", message: `no route ${req.method} ${req.url}` } });
      });
    const currentApp = await buildPdp({ policyFile });
    counting(seen.current, false)(currentApp);
    const olderPdp = await buildPdp({ policyFile });
    counting(seen.older, true)(olderPdp);
    currentPdp = await listen(currentApp);
    current = await coordinatorOn(currentPdp, "current");
    older = await coordinatorOn(await listen(olderPdp), "older");
  }, 60_000);

  afterAll(async () => {
    for (const app of apps.reverse()) await app.close();
    await fabric?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("asks the PDP once per echo run, and records the two decisions as before; a PDP without the batch endpoint is asked twice, remembered", async () => {
    const runs: Json[] = [];
    const first = await asked(async () => {
      runs.push(await runOn(current, "acme"));
      runs.push(await runOn(older, "acme"));
    });
    expect(first).toEqual({ current: ["/v1/policy:decideBatch"], older: ["/v1/policy:decideBatch", "/v1/policy:decide", "/v1/policy:decide"] });
    // The older PDP's 404 is remembered: the next runs ask it one question at a time without trying the batch again.
    const next = await asked(async () => {
      runs.push(await runOn(current, "acme"));
      runs.push(await runOn(older, "acme"));
    });
    expect(next).toEqual({ current: ["/v1/policy:decideBatch"], older: ["/v1/policy:decide", "/v1/policy:decide"] });

    for (const r of runs) expect(r.state, JSON.stringify(r)).toBe("completed");
    const [viaBatch, viaSingles] = [await eventsOf(current, runs[0]!.run_id), await eventsOf(older, runs[1]!.run_id)];
    expect(normalized(viaBatch)).toEqual(normalized(viaSingles));
    expect(viaBatch.map((e) => e.type)).toEqual([
      "run_started",
      "node_run_created",
      "policy_decided",
      "policy_decided",
      "node_run_assigned",
      "node_run_started",
      "atomic_executed",
      "node_run_completed",
      "run_completed",
    ]);
    const root = runs[0]!.root_node_run_id;
    expect(viaBatch.filter((e) => e.type === "policy_decided").map((e) => [e.node_run_id, e.data])).toEqual([
      [undefined, { action: "run.start", decision: "allow", reason_code: "policy:allow-all", message: "allowed by policy allow-all" }],
      [root, { action: "node.run.execute", decision: "allow", reason_code: "policy:allow-all", message: "allowed by policy allow-all" }],
    ]);
  });

  it("fails the run policy_denied on a deny at either checkpoint, as before", async () => {
    for (const [tenant, action, events] of [
      ["deny-start", "run.start", ["run_started", "node_run_created", "policy_decided", "node_run_completed", "run_completed"]],
      ["deny-execute", "node.run.execute", ["run_started", "node_run_created", "policy_decided", "policy_decided", "node_run_completed", "run_completed"]],
    ] as const) {
      let viaBatch: Json = {};
      let viaSingles: Json = {};
      const requests = await asked(async () => {
        viaBatch = await runOn(current, tenant);
        viaSingles = await runOn(older, tenant);
      });
      expect(requests.current, tenant).toEqual(["/v1/policy:decideBatch"]);
      // One at a time, the PDP is not asked about executing a run that may not start.
      expect(requests.older, tenant).toEqual(tenant === "deny-start" ? ["/v1/policy:decide"] : ["/v1/policy:decide", "/v1/policy:decide"]);
      for (const r of [viaBatch, viaSingles]) {
        expect(r.state, tenant).toBe("failed");
        expect(r.extensions["nodefabric.error"], tenant).toMatchObject({ code: "policy_denied", details: { action, reason_code: `denied_by:forbid-${tenant.slice(5)}` } });
      }
      const batchEvents = await eventsOf(current, viaBatch.run_id);
      expect(batchEvents.map((e) => e.type), tenant).toEqual(events);
      expect(normalized(batchEvents), tenant).toEqual(normalized(await eventsOf(older, viaSingles.run_id)));
      expect(batchEvents.filter((e) => e.type === "policy_decided").at(-1)!.data, tenant).toMatchObject({ action, decision: "deny" });
    }
  });

  it("parks the run for approval at either checkpoint, as before; once approved, only a question not yet answered is asked", async () => {
    for (const [tenant, afterApproval] of [
      // Approved at run.start: the root is dispatched later, and its node.run.execute question is asked then.
      ["approve-start", ["/v1/policy:decide"]],
      // Approved at node.run.execute: nothing is left to ask.
      ["approve-execute", []],
    ] as const) {
      const parked: Json[] = [];
      const requests = await asked(async () => {
        parked.push(await runOn(current, tenant, false));
        parked.push(await runOn(older, tenant, false));
      });
      expect(requests.current, tenant).toEqual(["/v1/policy:decideBatch"]);
      expect(requests.older, tenant).toEqual(tenant === "approve-start" ? ["/v1/policy:decide"] : ["/v1/policy:decide", "/v1/policy:decide"]);
      const [batchWaiting, singlesWaiting] = [await eventsOf(current, parked[0]!.run_id), await eventsOf(older, parked[1]!.run_id)];
      expect(batchWaiting.at(-1)!.type, tenant).toBe("approval_requested");
      expect(normalized(batchWaiting), tenant).toEqual(normalized(singlesWaiting));

      const approvedRequests = await asked(async () => {
        for (const [coordinator, run, events] of [[current, parked[0]!, batchWaiting], [older, parked[1]!, singlesWaiting]] as const) {
          const approval = events.at(-1)!.data.approval_id;
          expect((await call("POST", `${coordinator}/v1/approvals/${approval}:approve`, {})).status, tenant).toBe(204);
          expect((await ended(coordinator, run.run_id)).state, tenant).toBe("completed");
        }
      });
      expect(approvedRequests, tenant).toEqual({ current: afterApproval, older: afterApproval });
      expect(normalized(await eventsOf(current, parked[0]!.run_id)), tenant).toEqual(normalized(await eventsOf(older, parked[1]!.run_id)));
    }
  });

  it("with coordinator.embedded_pdp, decides in the coordinator's process: no request to the PDP service, the same events", async () => {
    const policyFile = path.join(dataDir, "policy.cedar");
    const config = loadConfig({
      cwd: repoRoot,
      env: { FABRIC_COORDINATOR_EMBEDDED_PDP: "true" },
      flags: {
        port_base: 0,
        data_dir: path.join(dataDir, "embedded"),
        log_level: "silent",
        policy: policyFile,
        // The PDP service is there, and configured: the coordinator does not ask it.
        services: { "node-registry": { url: fabric.urls["node-registry"] }, "atomic-executor": { url: fabric.urls["atomic-executor"] }, pdp: { url: currentPdp } },
      } as never,
    });
    expect(config.coordinator?.embedded_pdp).toBe(true);
    const alone = await startFabric(config, ["run-coordinator"]);
    try {
      const coordinator = alone.urls["run-coordinator"]!;
      const runs: Json[] = [];
      const requests = await asked(async () => {
        runs.push(await runOn(coordinator, "acme"));
        runs.push(await runOn(coordinator, "deny-execute"));
        runs.push(await runOn(current, "acme"));
        runs.push(await runOn(current, "deny-execute"));
      });
      expect(requests.current).toEqual(["/v1/policy:decideBatch", "/v1/policy:decideBatch"]);
      expect(runs.map((r) => r.state)).toEqual(["completed", "failed", "completed", "failed"]);
      expect(normalized(await eventsOf(coordinator, runs[0]!.run_id))).toEqual(normalized(await eventsOf(current, runs[2]!.run_id)));
      expect(normalized(await eventsOf(coordinator, runs[1]!.run_id))).toEqual(normalized(await eventsOf(current, runs[3]!.run_id)));
    } finally {
      await alone.close();
    }
  });

  it("fails the run pdp_unavailable when the PDP cannot be reached, as before", async () => {
    const s = http.createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const port = (s.address() as AddressInfo).port;
    await new Promise<void>((r) => s.close(() => r()));
    const coordinator = await coordinatorOn(`http://127.0.0.1:${port}`, "unreachable");
    const run = await runOn(coordinator, "acme");
    expect(run.state).toBe("failed");
    expect(run.extensions["nodefabric.error"]).toMatchObject({ code: "pdp_unavailable", retryable: true });
    const events = await eventsOf(coordinator, run.run_id);
    expect(events.map((e) => e.type)).toEqual(["run_started", "node_run_created", "policy_decided", "node_run_completed", "run_completed"]);
    expect(events[2]!.data).toMatchObject({ action: "run.start", decision: "deny", reason_code: "pdp_unavailable" });
    expect(events[2]!.data.message).toMatch(/^the PDP could not be reached: /);
  });
});
