/**
 * What an executor in another process is sent to report progress with (docs/runs.md, "Progress"): the coordinator's
 * endpoint, and the NodeRun's assignment token when the coordinator checks tokens. A coordinator that authenticates
 * nobody and shares its store with no other coordinator sends no token (nothing would read one), and the reports
 * still count. The executor here is a peer's (someone else's implementation of the contract): a small server that
 * reports progress with what it was sent, then answers.
 */
import { describe, it, expect, afterAll, beforeAll } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { decodeJwt } from "jose";
import type { AtomicExecuteRequest, NodeType } from "@nodefabric/schemas";
import { buildRunCoordinator } from "../src/services/run-coordinator/index.js";
import type { NodeTypeResolver } from "../src/engine/node-type-resolver.js";
import { TokenVerifier } from "../src/http/token-verifier.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";
import { readNdjson } from "../../test/run-client.js";

const REF = { node_type_id: "peer.reporter", version: "1.0.0" };
const NODE_TYPE = { ...REF, kind: "atomic", description: "runs at a peer executor", input_schema: { type: "object" }, output_schema: { type: "object" } } as NodeType;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Json };
}

describe("the assignment token an executor in another process is sent", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "nf-peer-token-"));
  const open: FastifyInstance[] = [];
  let idp: TestIssuer;
  beforeAll(async () => {
    idp = await startTestIssuer();
  });
  afterAll(async () => {
    for (const app of open.reverse()) await app.close();
    await idp?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const listen = async (app: FastifyInstance) => {
    open.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  };

  /** A peer executor: reports progress to the coordinator it is told of, with the token it was sent, then completes. */
  async function peer() {
    const seen: Array<{ request: AtomicExecuteRequest; progress: number }> = [];
    const app = Fastify();
    app.post("/v1/atomic-node-runs::execute", async (req) => {
      const request = req.body as AtomicExecuteRequest;
      const ext = request.extensions ?? {};
      const token = ext["nodefabric.assignment_token"] as string | undefined;
      const report = await post(`${ext["nodefabric.coordinator_endpoint"] as string}/v1/node-runs/${request.node_run_id}:progress`, { progress: 1, total: 1 }, token ? { authorization: `Bearer ${token}` } : {});
      seen.push({ request, progress: report.status });
      return { node_run_id: request.node_run_id, state: "completed", outputs: { reported: report.status } };
    });
    const url = await listen(app);
    const resolver: NodeTypeResolver = { nodeType: async () => NODE_TYPE, executorFor: async () => ({ executor_instance_id: "peer", endpoint: url }) };
    return { seen, resolver };
  }

  it("with authentication required: the NodeRun's own token, which its progress report is accepted with", async () => {
    const { seen, resolver } = await peer();
    const verifier = new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer });
    const coordinator = await listen(
      await buildRunCoordinator({ logger: false, dbPath: path.join(dir, "required.db"), registryUrl: "http://127.0.0.1:9", resolver, auth: { mode: "required", verifier } }),
    );
    const client = { authorization: `Bearer ${await idp.mint({ aud: "nodefabric-run-coordinator", scope: "runs:read runs:write" })}` };
    const r = await post(`${coordinator}/v1/runs`, { root_node_type_ref: REF, input: {} }, { ...client, prefer: "wait=20" });
    expect(r.body.state, JSON.stringify(r.body)).toBe("completed");
    expect(r.body.extensions["nodefabric.outputs"]).toEqual({ reported: 204 });
    const { request } = seen[0]!;
    expect(request.extensions?.["nodefabric.coordinator_endpoint"]).toBe(coordinator);
    expect(decodeJwt(request.extensions?.["nodefabric.assignment_token"] as string)).toMatchObject({ run_id: r.body.run_id, node_run_id: r.body.root_node_run_id });
    const events = (await readNdjson(`${coordinator}/v1/runs/${r.body.run_id}/events`, client)).lines;
    expect(events.filter((e) => e.type === "node_run_progress").map((e) => e.data)).toEqual([{ progress: 1, total: 1, attempt: 1 }]);
    // Without it, the same report is refused.
    const anonymous = await post(`${coordinator}/v1/node-runs/${r.body.root_node_run_id}:progress`, { progress: 1 });
    expect(anonymous.status).toBe(401);
  }, 30_000);

  it("with authentication disabled and a store of its own: no token, and the report still counts", async () => {
    const { seen, resolver } = await peer();
    const coordinator = await listen(await buildRunCoordinator({ logger: false, dbPath: path.join(dir, "disabled.db"), registryUrl: "http://127.0.0.1:9", resolver }));
    const r = await post(`${coordinator}/v1/runs`, { root_node_type_ref: REF, input: {} }, { prefer: "wait=20" });
    expect(r.body.state, JSON.stringify(r.body)).toBe("completed");
    expect(r.body.extensions["nodefabric.outputs"]).toEqual({ reported: 204 });
    const { request } = seen[0]!;
    expect(request.extensions?.["nodefabric.coordinator_endpoint"]).toBe(coordinator);
    expect(request.extensions).not.toHaveProperty(["nodefabric.assignment_token"]);
    const events = (await readNdjson(`${coordinator}/v1/runs/${r.body.run_id}/events`)).lines;
    expect(events.filter((e) => e.type === "node_run_progress").map((e) => e.data)).toEqual([{ progress: 1, total: 1, attempt: 1 }]);
  }, 30_000);
});
