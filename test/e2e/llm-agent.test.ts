/**
 * llm.agent as a user runs it, in `fabric dev` (the built CLI, which discovers @nodefabric/handler-llm and the demo
 * handlers in node_modules), with the scripted OpenAI-compatible stand-in and a recording upstream both in this test's
 * process, outside the fabric:
 * - `kill -9` of the fabric in the middle of the loop (a tool call in flight), then a restart on the same data: the
 *   run ends completed, every model call and every tool call that completed before the kill reached the model and the
 *   upstream once, and no child NodeRun is duplicated;
 * - a tool the policy gates for approval: the run waits, a person approves it in the console (Debian's chromium), with
 *   the model's arguments shown, and the loop goes on to the model's answer.
 */
import { describe, it, expect, afterAll } from "vitest";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { startLlmStandIn, type ChatRequestBody, type LlmStandIn, type StandInStep } from "@nodefabric/sdk/testing";
import { CLI, freePortBase, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { REPO, launchBrowser, open, tid, waitForText, type ConsoleBrowser, type ConsoleFabric } from "./console/harness.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const TERMINAL = new Set(["completed", "failed", "canceled"]);
const AGENT = { node_type_id: "llm.agent", version: "1.0.0" };

const goalOf = (body: ChatRequestBody) => String((body.messages ?? []).find((m) => m.role === "user")?.content ?? "");
const turnOf = (body: ChatRequestBody) => (body.messages ?? []).filter((m) => m.role === "assistant").length;
const clean = () => Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FABRIC_LLM_") || k.startsWith("ARP_LLM_")).map((k) => [k, undefined]));

async function servesAgent(f: FabricProcess): Promise<void> {
  await eventually(async () => {
    const r = await call("GET", `${f.urls["node-registry"]}/v1/executors?node_type_id=llm.agent`);
    return r.body?.length > 0 ? true : undefined;
  }, 30_000, "llm.agent's registration");
}

describe("llm.agent survives a kill -9 of the fabric", () => {
  let fabric: FabricProcess | undefined;
  let llm: LlmStandIn | undefined;
  let upstream: Server | undefined;
  afterAll(async () => {
    await fabric?.stop("SIGKILL");
    await llm?.close();
    upstream?.closeAllConnections();
    await new Promise((r) => upstream?.close(r) ?? r(undefined));
  });

  it("continues from its last stored step: no model call and no tool call completed before the kill is made again", async () => {
    expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
    expect(existsSync(path.join(REPO, "handlers/llm/dist/index.js")), "handlers/llm must be built").toBe(true);

    // The recording upstream the agent's tool (demo.upstream) GETs: /slow never answers before the kill (so the kill
    // always finds it in flight), the rest at once.
    const hits: string[] = [];
    let killed = false;
    upstream = createServer((req, res) => {
      hits.push(req.url!);
      if (req.url === "/slow" && !killed) return;
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ path: req.url }));
    });
    await new Promise<void>((r) => upstream!.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

    // The model: two tool calls side by side, then the slow one, then one more, then its answer.
    const script: Record<number, StandInStep> = {
      0: { tool_calls: [{ name: "demo_upstream", arguments: { url: `${base}/a` } }, { name: "demo_upstream", arguments: { url: `${base}/b` } }] },
      1: { tool_calls: [{ name: "demo_upstream", arguments: { url: `${base}/slow` } }] },
      2: { tool_calls: [{ name: "demo_upstream", arguments: { url: `${base}/c` } }] },
      3: { content: "fetched a, b, slow and c" },
    };
    llm = await startLlmStandIn({ respond: (b) => script[turnOf(b)] });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-agent-crash-"));
    const args = ["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir];
    const env = { ...clean(), FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "scripted-model", FABRIC_LLM_API_KEY: "sk-agent-crash", FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32" };
    fabric = await startFabricProcess(args, { cwd: REPO, env });
    await servesAgent(fabric);

    const started = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: AGENT, input: { goal: "fetch them all", tools: ["demo.upstream"] } });
    expect(started.status, JSON.stringify(started.body)).toBeLessThan(300);
    const runId = started.body.run_id as string;
    // The slow tool call is in flight: two model calls and three tool calls were made, and the first two completed.
    await eventually(async () => (hits.includes("/slow") ? true : undefined), 30_000, "the slow tool call");
    expect(await fabric.stop("SIGKILL")).toBe(null);
    killed = true;
    const modelCallsBefore = llm.calls.map((c) => turnOf(c.body));
    expect(modelCallsBefore).toEqual([0, 1]);
    expect([...hits].sort()).toEqual(["/a", "/b", "/slow"]);

    fabric = await startFabricProcess(args, { cwd: REPO, env });
    const run = await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["run-gateway"]}/v1/runs/${runId}`);
      return TERMINAL.has(r.body?.state) ? r.body : undefined;
    }, 90_000, "the run ended after the restart");
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out).toMatchObject({ answer: "fetched a, b, slow and c", ended_by: "final", usage: { model_calls: 4, tool_calls: 4 } });

    // Each model call reached the model once; each completed tool call reached the upstream once. Only the call in
    // flight at the kill (/slow, never answered) was made again, once.
    expect(llm.calls.map((c) => turnOf(c.body))).toEqual([0, 1, 2, 3]);
    expect(llm.calls.every((c) => goalOf(c.body) === "fetch them all")).toBe(true);
    expect(hits.filter((h) => h === "/a")).toHaveLength(1);
    expect(hits.filter((h) => h === "/b")).toHaveLength(1);
    expect(hits.filter((h) => h === "/c")).toHaveLength(1);
    expect(hits.filter((h) => h === "/slow")).toHaveLength(2);

    const nrs: Json[] = (await call("GET", `${fabric.urls["run-gateway"]}/v1/runs/${runId}/node-runs`)).body;
    const children = nrs.filter((n) => n.parent_node_run_id === run.root_node_run_id);
    expect(children.filter((n) => n.node_type_ref.node_type_id === "llm.chat")).toHaveLength(4);
    const tools = children.filter((n) => n.node_type_ref.node_type_id === "demo.upstream");
    expect(tools.map((n) => new URL(n.inputs.url).pathname).sort()).toEqual(["/a", "/b", "/c", "/slow"]);
    expect(children.every((n) => n.state === "completed")).toBe(true);
  }, 180_000);
});

describe("llm.agent: a tool call approved in the console", () => {
  let fabric: FabricProcess | undefined;
  let llm: LlmStandIn | undefined;
  let browser: ConsoleBrowser | undefined;
  afterAll(async () => {
    await browser?.close();
    await fabric?.stop();
    await llm?.close();
  });

  it("waits for a person with the model's arguments shown; approved in the console, the loop goes on", async () => {
    llm = await startLlmStandIn({
      respond: (b) => (turnOf(b) === 0 ? { tool_calls: [{ name: "console_gate", arguments: { note: "release 7 to production" } }] } : { content: `released: ${(b.messages ?? []).at(-1)?.content}` }),
    });
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-llm-agent-console-"));
    const policy = path.join(dataDir, "policy.cedar");
    writeFileSync(
      policy,
      [
        '@id("allow-all")',
        "permit(principal, action, resource);",
        '@id("approve-console-gate")',
        '@require_approval("true")',
        'permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"console.gate");',
        "",
      ].join("\n"),
    );
    const args = ["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir, "--policy", policy, "--handlers", "@nodefabric/handler-llm", path.join(REPO, "test/fixtures/console-handlers")];
    fabric = await startFabricProcess(args, { cwd: REPO, env: { ...clean(), FABRIC_LLM_BASE_URL: llm.url, FABRIC_LLM_MODEL: "scripted-model" } });
    await servesAgent(fabric);
    const gateway = fabric.urls["run-gateway"];
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=console.gate`);
      return r.body?.length > 0 ? true : undefined;
    }, 30_000, "console.gate's registration");

    const started = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: AGENT, input: { goal: "Release 7 to production", tools: ["console.gate"] } });
    expect(started.status, JSON.stringify(started.body)).toBeLessThan(300);
    const runId = started.body.run_id as string;
    const approval = await eventually(async () => {
      const r = await call("GET", `${gateway}/v1/approvals?run_id=${runId}&state=pending`);
      return r.body?.length === 1 ? r.body[0] : undefined;
    }, 30_000, "the approval of the tool call");
    expect(approval.node_type_ref.node_type_id).toBe("console.gate");
    expect(llm.calls).toHaveLength(1);

    browser = await launchBrowser();
    const { page } = await browser.newPage();
    const f = { consoleUrl: `${gateway}/console/` } as ConsoleFabric;
    await open(page, f, `#/runs/${runId}?node=${approval.node_run_id}`);
    const panel = tid(page, "node-panel");
    await panel.waitFor();
    await panel.getByTestId("node-waiting-approval").waitFor();
    await waitForText(panel.getByTestId("node-inputs"), /release 7 to production/);
    await panel.getByTestId("node-approve").click();

    const run = await eventually(async () => {
      const r = await call("GET", `${gateway}/v1/runs/${runId}`);
      return TERMINAL.has(r.body?.state) ? r.body : undefined;
    }, 30_000, "the run's end after the approval");
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    const out = run.extensions["nodefabric.outputs"];
    expect(out.ended_by).toBe("final");
    expect(out.answer).toContain("release 7 to production");
    expect(out.steps[0].tool_calls[0]).toMatchObject({ name: "console_gate", state: "completed", arguments: { note: "release 7 to production" } });
    expect(llm.calls).toHaveLength(2);
    await open(page, f, `#/runs/${runId}`);
    await waitForText(tid(page, "run-state"), /completed/);
    expect(browser.takeErrors()).toEqual([]);
  }, 150_000);
});
