/**
 * Calling a remote A2A agent, end to end as a user would: an agent built with @a2a-js/sdk's server in a child process
 * on loopback, `fabric node-types import --from-a2a` against a `fabric dev` process, runs through the gateway's
 * POST /v1/runs, and `kill -9` of the fabric while the agent's slow task runs: after the restart the run completes and
 * the agent received exactly one message (the restarted execution resumed the remote task it had saved).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";
import { repo } from "./local-registry.mjs";

const AGENT = path.join(repo, "handlers/a2a/test/a2a-agent.mjs");

let dir: string;
let agent: ChildProcess;
let agentUrl: string;
let fabric: FabricProcess;
let fabricArgs: string[];
const env = { FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32" };

/** The agent as a child process; its slow skill works for `slowMs`. */
function startAgent(slowMs: number): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [AGENT, "0", "--slow-ms", String(slowMs)], { cwd: path.dirname(AGENT), stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`the A2A agent did not start: ${log}`)), 30_000);
    child.stderr!.on("data", (d) => (log += d));
    child.stdout!.on("data", (d) => {
      log += d;
      const m = /listening (http:\/\/\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1]! });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the A2A agent exited (${code}): ${log}`));
    });
  });
}

async function agentCounts(): Promise<{ messages: Array<{ skillId: string; messageId: string }>; cancels: number }> {
  return (await call("GET", `${agentUrl}/counts`)).body as never;
}

async function startFabric(): Promise<FabricProcess> {
  const f = await startFabricProcess(fabricArgs, { cwd: repo, env });
  await eventually(async () => ((await call("GET", `${f.urls["node-registry"]}/v1/node-types/a2a.send`)).status === 200 ? true : undefined), 30_000, "a2a.send published");
  return f;
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "nf-a2a-import-"));
  ({ child: agent, url: agentUrl } = await startAgent(8_000));
  // The same ports after the restart: the run's clients and the executor's registration find it where it was.
  fabricArgs = ["dev", "--port-base", String(await freePortBase()), "--data-dir", path.join(dir, ".fabric")];
  fabric = await startFabric();
}, 120_000);

afterAll(async () => {
  await fabric?.stop();
  agent?.kill("SIGKILL");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("fabric node-types import --from-a2a", () => {
  it("publishes one node type per skill, callable at once through the gateway", async () => {
    const dry = await runFabric(["node-types", "import", "--from-a2a", agentUrl, "--prefix", "remote", "--dry-run", "--registry", fabric.urls["node-registry"]!]);
    expect(dry.code, dry.stderr).toBe(0);
    const planned = JSON.parse(dry.stdout);
    expect(planned.agent).toMatchObject({ name: "Test Agent", protocol_version: "1.0", streaming: true });
    expect(planned.node_types.map((t: { node_type_id: string }) => t.node_type_id)).toContain("remote.slow");
    expect((await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/remote.echo`)).status).toBe(404);

    const r = await runFabric(["node-types", "import", "--from-a2a", agentUrl, "--prefix", "remote", "--registry", fabric.urls["node-registry"]!]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("of the A2A agent Test Agent 1.0.0 (A2A 1.0, streaming), run by a2a.send@1.0.0:");
    expect(r.stdout).toContain("remote.slow@1.0.0");

    const run = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: "remote.echo", version: "1.0.0" }, input: { word: "hello" } }, { prefer: "wait=30" });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    expect((run.body as any).state, JSON.stringify(run.body)).toBe("completed");
    expect((run.body as any).extensions["nodefabric.outputs"]).toMatchObject({ echo: { word: "hello" }, text: "echoed" });

    const none = await runFabric(["node-types", "import", "--from-a2a", agentUrl, "--from-mcp", "http://127.0.0.1:1/mcp", "--registry", fabric.urls["node-registry"]!]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("--from-a2a <card url>");
  }, 90_000);

  it("completes a run whose fabric was killed with SIGKILL mid-task, the agent receiving one message", async () => {
    const before = (await agentCounts()).messages.filter((m) => m.skillId === "slow").length;
    const started = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: "remote.slow", version: "1.0.0" }, input: { word: "durable" } });
    expect([200, 201, 202], JSON.stringify(started.body)).toContain(started.status);
    const { run_id: runId, root_node_run_id: nodeRunId } = started.body as { run_id: string; root_node_run_id: string };
    // The remote task's id is saved with the NodeRun: the agent is working on it.
    await eventually(
      async () => ((await call("GET", `${fabric.urls["run-gateway"]}/v1/node-runs/${nodeRunId}`)).body as any)?.extensions?.["nodefabric.checkpoint"]?.data?.a2a_task,
      30_000,
      "the remote task's id saved",
    );
    expect(await fabric.stop("SIGKILL")).toBe(null);
    expect(fabric.child.signalCode).toBe("SIGKILL");

    fabric = await startFabric();
    const done = await eventually(
      async () => {
        const run = (await call("GET", `${fabric.urls["run-gateway"]}/v1/runs/${runId}`)).body as any;
        return ["completed", "failed", "canceled"].includes(run?.state) ? run : undefined;
      },
      90_000,
      "the run ends after the restart",
    );
    expect(done.state, JSON.stringify(done)).toBe("completed");
    expect(done.extensions["nodefabric.outputs"]).toMatchObject({ echo: { word: "durable" } });
    const slow = (await agentCounts()).messages.filter((m) => m.skillId === "slow");
    expect(slow.length - before).toBe(1);
  }, 180_000);
});
