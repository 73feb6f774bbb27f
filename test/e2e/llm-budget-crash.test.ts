/**
 * Budgets the run keeps, across a crash between reservation and settlement (docs/llm.md): `fabric dev` (the built CLI)
 * runs an llm.chat under a token budget against the scripted stand-in on loopback, which holds its answer. While the
 * call is in flight, GET /v1/runs/{id} and `fabric runs get` show its reservation. The fabric is killed with SIGKILL
 * and started again on the same data: the attempt that never answered is settled at its whole reservation (the call
 * may have been billed), the retry reserves anew and settles to what it used, and nothing stays reserved. The same on
 * PostgreSQL with two `fabric dev --store postgres://…` nodes: the node holding the run is killed, and the other takes
 * the run over and settles it the same way.
 */
import { describe, it, expect, afterAll } from "vitest";
import { existsSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startLlmStandIn, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { CLI, freePortBase, runFabric, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { dropSchemas, newSchema, storeUrl } from "./pg-fabric.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const TERMINAL = new Set(["completed", "failed", "canceled"]);
const MESSAGES = [{ role: "user", content: "count the budget" }];
const MAX_OUT = 300;
/** What the coordinator reserves for the call: its prompt at 4 characters a token, plus max_output_tokens. */
const RESERVED = Math.ceil(JSON.stringify(MESSAGES).length / 4) + MAX_OUT;
const USED = { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 };

describe("a crash between a model call's reservation and its settlement", () => {
  let fabric: FabricProcess | undefined;
  let llm: LlmStandIn | undefined;
  const held: Array<() => void> = [];
  const others: FabricProcess[] = [];
  afterAll(async () => {
    await fabric?.stop("SIGKILL");
    for (const n of others) await n.stop("SIGKILL");
    for (const release of held) release();
    await llm?.close();
    await dropSchemas();
  });

  it("settles the unanswered attempt at its whole reservation, and the retry's to what it used; nothing stays reserved", async () => {
    expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
    expect(existsSync(path.join(repo, "handlers/llm/dist/index.js")), "handlers/llm must be built").toBe(true);
    // The first call is held (the process dies while it waits); every later one is answered at once.
    let calls = 0;
    llm = await startLlmStandIn({
      respond: async (): Promise<StandInStep> => {
        if (++calls === 1) await new Promise<void>((resolve) => held.push(resolve));
        return { content: "counted", usage: USED };
      },
    });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-budget-crash-"));
    const base = await freePortBase();
    const args = ["dev", "--port-base", String(base), "--data-dir", dataDir];
    const env = { FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "scripted-model", FABRIC_LLM_API_KEY: "sk-budget-crash" };
    fabric = await startFabricProcess(args, { cwd: repo, env });
    const gw = fabric.urls["run-gateway"];
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=llm.chat`);
      return r.body?.length > 0 ? true : undefined;
    }, 20_000, "llm.chat's registration");

    const budget = 2 * RESERVED + 50;
    const started = await call("POST", `${gw}/v1/runs`, {
      root_node_type_ref: { node_type_id: "llm.chat", version: "1.0.0" },
      input: { messages: MESSAGES, max_output_tokens: MAX_OUT },
      constraints: { extensions: { "nodefabric.llm.max_tokens": budget } },
    });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const runId = started.body.run_id as string;

    // In flight: the run shows the reservation, through the API and to people through the CLI.
    await eventually(async () => (llm!.calls.length === 1 ? true : undefined), 20_000, "the call reached the model");
    const during = await eventually(async () => {
      const r = await call("GET", `${gw}/v1/runs/${runId}`);
      return r.body?.extensions?.["nodefabric.usage"]?.reserved_tokens === RESERVED ? r.body : undefined;
    }, 20_000, "the reservation shown");
    expect(during.extensions["nodefabric.usage"]).toMatchObject({ tokens: 0, reserved_tokens: RESERVED });
    const shown = await runFabric(["runs", "get", runId, "--gateway", gw], { cwd: repo });
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout).run_id).toBe(runId);
    expect(shown.stderr).toContain(`model calls: tokens 0 used + ${RESERVED} reserved (budget ${budget})`);

    expect(await fabric.stop("SIGKILL")).toBe(null);
    fabric = await startFabricProcess(args, { cwd: repo, env });
    const run = await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["run-gateway"]}/v1/runs/${runId}`);
      return TERMINAL.has(r.body?.state) ? r.body : undefined;
    }, 60_000, "the run ended after the restart");
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    // The model got the call again (billed once more), and the run counted both: the first whole, the second as used.
    expect(llm.calls).toHaveLength(2);
    expect(run.extensions["nodefabric.usage"]).toMatchObject({ tokens: RESERVED + USED.total_tokens, reserved_tokens: 0, reserved_cost: 0 });
    expect(run.extensions["nodefabric.usage"].tokens).toBeLessThanOrEqual(budget);
    const nrs: Json[] = (await call("GET", `${fabric.urls["run-gateway"]}/v1/runs/${runId}/node-runs`)).body;
    expect(nrs).toHaveLength(1);
    expect(nrs[0].extensions["nodefabric.reservation"]).toBeUndefined();
    expect(nrs[0].extensions["nodefabric.attempt"]).toBe(2);
    const after = await runFabric(["runs", "get", runId, "--gateway", fabric.urls["run-gateway"]], { cwd: repo });
    expect(after.stderr).toContain(`model calls: tokens ${RESERVED + USED.total_tokens} used + 0 reserved (budget ${budget})`);
  }, 150_000);

  it("on PostgreSQL with two nodes: the node holding the run dies mid-call, the other takes the run over and settles it", async () => {
    let calls = 0;
    const pgLlm = await startLlmStandIn({
      respond: async (): Promise<StandInStep> => {
        if (++calls === 1) await new Promise<void>((resolve) => held.push(resolve));
        return { content: "counted", usage: USED };
      },
    });
    try {
      const store = storeUrl(newSchema("nf_budget"));
      const env = {
        FABRIC_LLM_BASE_URL: pgLlm.url,
        FABRIC_LLM_MODEL: "scripted-model",
        FABRIC_LLM_API_KEY: "sk-budget-pg",
        FABRIC_COORDINATOR_RUN_LEASE_MS: "2000",
        FABRIC_REGISTRY_EXECUTOR_TTL_MS: "2000",
      };
      const start = async () => {
        const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-budget-pg-"));
        const n = await startFabricProcess(["dev", "--store", store, "--port-base", String(await freePortBase()), "--data-dir", dataDir], { cwd: repo, env });
        others.push(n);
        return n;
      };
      const [one, two] = await Promise.all([start(), start()]);
      await eventually(async () => {
        const r = await call("GET", `${two.urls["node-registry"]}/v1/executors?node_type_id=llm.chat`);
        return r.body?.length === 2 ? true : undefined;
      }, 20_000, "both nodes' llm.chat in the shared directory");

      const budget = 2 * RESERVED + 50;
      const started = await call("POST", `${one.urls["run-gateway"]}/v1/runs`, {
        root_node_type_ref: { node_type_id: "llm.chat", version: "1.0.0" },
        input: { messages: MESSAGES, max_output_tokens: MAX_OUT },
        constraints: { extensions: { "nodefabric.llm.max_tokens": budget } },
      });
      expect(started.status, JSON.stringify(started.body)).toBe(200);
      const runId = started.body.run_id as string;
      await eventually(async () => (pgLlm.calls.length === 1 ? true : undefined), 20_000, "the call reached the model");
      // The other node reads the reservation from the shared database.
      const during = await eventually(async () => {
        const r = await call("GET", `${two.urls["run-gateway"]}/v1/runs/${runId}`);
        return r.body?.extensions?.["nodefabric.usage"]?.reserved_tokens === RESERVED ? r.body : undefined;
      }, 20_000, "the reservation shown on the other node");
      expect(during.extensions["nodefabric.usage"]).toMatchObject({ tokens: 0, reserved_tokens: RESERVED });

      expect(await one.stop("SIGKILL")).toBe(null);
      const run = await eventually(async () => {
        const r = await call("GET", `${two.urls["run-gateway"]}/v1/runs/${runId}`);
        return TERMINAL.has(r.body?.state) ? r.body : undefined;
      }, 60_000, "the run ended on the surviving node");
      expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
      expect(pgLlm.calls).toHaveLength(2);
      expect(run.extensions["nodefabric.usage"]).toMatchObject({ tokens: RESERVED + USED.total_tokens, reserved_tokens: 0, reserved_cost: 0 });
      const nrs: Json[] = (await call("GET", `${two.urls["run-gateway"]}/v1/runs/${runId}/node-runs`)).body;
      expect(nrs[0].extensions["nodefabric.reservation"]).toBeUndefined();
    } finally {
      for (const release of held) release();
      await pgLlm.close();
    }
  }, 150_000);
});
