/**
 * An upstream MCP task survives a kill -9 of the fabric: `fabric dev` (the built CLI, which discovers
 * @nodefabric/handler-mcp in node_modules) runs simulate-research-query of @modelcontextprotocol/server-everything
 * (from npm, Streamable HTTP on loopback, behind a recording proxy) as an MCP task. The fabric is killed with SIGKILL
 * once the task's ids are saved with the NodeRun, and started again on the same data: the run completes with the
 * research report, and the tool was called once (the restarted execution polled the same task).
 */
import { describe, it, expect, afterAll } from "vitest";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { CLI, freePortBase, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually, readNdjson } from "../run-client.js";
import { startServerEverything, type ChildServer } from "../../handlers/mcp/test/mcp-fixtures.js";
import { toolDefinitionHash } from "../../handlers/mcp/src/index.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const TERMINAL = new Set(["completed", "failed", "canceled"]);

/** A proxy to `target` on loopback that records the JSON-RPC method of every POST. */
async function recordingProxy(target: URL): Promise<{ url: string; methods: string[]; server: Server }> {
  const methods: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const m = /"method"\s*:\s*"([^"]+)"/.exec(body.toString("utf8"));
      if (m) methods.push(m[1]!);
      const up = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on("error", () => res.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`, methods, server };
}

describe("an MCP task survives a kill -9 of the fabric", () => {
  let fabric: FabricProcess | undefined;
  let everything: ChildServer | undefined;
  let proxy: Server | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    await fabric?.stop("SIGKILL");
    await everything?.stop();
    proxy?.closeAllConnections();
    proxy?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("completes the run after a restart, polling the task it started instead of calling the tool again", async () => {
    expect(existsSync(CLI), "core must be built (npm run build) for the fabric CLI").toBe(true);
    expect(existsSync(path.join(repo, "handlers/mcp/dist/index.js")), "handlers/mcp must be built").toBe(true);
    everything = await startServerEverything();
    const rec = await recordingProxy(new URL(everything.url));
    proxy = rec.server;
    const client = new Client({ name: "t", version: "1" }, { versionNegotiation: { mode: "legacy" } as never });
    await client.connect(new StreamableHTTPClientTransport(new URL(rec.url)));
    const tool = (await client.listTools()).tools.find((t) => t.name === "simulate-research-query")!;
    await client.close();

    dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-crash-"));
    const args = ["dev", "--port-base", String(await freePortBase()), "--data-dir", dataDir];
    const env = { FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32" };
    fabric = await startFabricProcess(args, { cwd: repo, env });
    await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["node-registry"]}/v1/executors?node_type_id=mcp.call`);
      return r.body?.length > 0 ? true : undefined;
    }, 20_000, "mcp.call's registration");
    const nodeType = {
      node_type_id: "everything.research",
      version: "1.0.0",
      kind: "atomic",
      description: tool.description,
      input_schema: { type: "object" },
      output_schema: { type: "object" },
      extensions: {
        "nodefabric.implementation": { node_type_id: "mcp.call", version: "1.0.0" },
        "nodefabric.mcp": { url: rec.url, tool: "simulate-research-query", tool_hash: toolDefinitionHash(tool as never) },
        "nodefabric.timeout_ms": 60_000,
      },
    };
    const published = await call("POST", `${fabric.urls["node-registry"]}/v1/node-types`, { node_type: nodeType });
    expect(published.status, JSON.stringify(published.body)).toBe(200);

    const started = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: "everything.research", version: "1.0.0" }, input: { topic: "crash-proof research" } });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    const { run_id: runId, root_node_run_id: nodeRunId } = started.body;
    const saved = await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["run-gateway"]}/v1/node-runs/${nodeRunId}`);
      return r.body?.extensions?.["nodefabric.checkpoint"]?.data?.mcp_task;
    }, 20_000, "the task's ids saved with the NodeRun");
    expect(await fabric.stop("SIGKILL")).toBe(null);
    expect(rec.methods.filter((m) => m === "tools/call")).toHaveLength(1);
    expect(rec.methods).not.toContain("tasks/result");

    fabric = await startFabricProcess(args, { cwd: repo, env });
    const run = await eventually(async () => {
      const r = await call("GET", `${fabric!.urls["run-gateway"]}/v1/runs/${runId}`);
      return TERMINAL.has(r.body?.state) ? r.body : undefined;
    }, 60_000, "the run ended after the restart");
    expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
    expect(JSON.stringify(run.extensions["nodefabric.outputs"])).toContain("crash-proof research");
    // One tools/call in all: the execution after the restart polled the saved task and fetched its result.
    expect(rec.methods.filter((m) => m === "tools/call")).toHaveLength(1);
    expect(rec.methods).toContain("tasks/result");
    const after = await call("GET", `${fabric.urls["run-gateway"]}/v1/node-runs/${nodeRunId}`);
    expect(after.body.extensions["nodefabric.checkpoint"].data.mcp_task).toEqual(saved);
    const events = await readNdjson(`${fabric.urls["run-gateway"]}/v1/runs/${runId}/events?follow=false`);
    expect(events.lines.filter((e: Json) => e.type === "node_run_retrying").map((e: Json) => e.data)).toEqual([{ attempt: 2, reason: "lease_expired" }]);
  }, 150_000);
});
