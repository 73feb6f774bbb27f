import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { decodeJwt } from "jose";
import { AssignmentTokens, TokenVerifier, buildNodeRegistry, buildRunCoordinator } from "@nodefabric/core";
import { call, eventually } from "./run-client.js";
import { startTestIssuer, type TestIssuer } from "../core/test/support/test-issuer.js";

// An assignment token is short-lived, but a composite may live longer: while it makes progress, the coordinator
// sends it a fresh token (a repeated `:begin`) before the current one expires. The test plays the composite executor.
const MANUAL = { node_type_id: "test.long-composite", version: "1.0.0" };
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
// The tokens' lifetime. The renewal comes at half of it, so half of it is what a busy machine's event loop may lag
// before a token runs out unrenewed: 1 s (a 2 s lifetime) was not enough under CI's load.
const LIFETIME_S = 4;

describe("assignment tokens outlive themselves only by being renewed", () => {
  const apps: FastifyInstance[] = [];
  let idp: TestIssuer;
  afterAll(async () => {
    for (const a of apps.reverse()) await a.close();
    await idp?.close();
  });

  async function listen(app: FastifyInstance): Promise<string> {
    apps.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  }

  it("sends a live composite a fresh token at half its lifetime; the old one stops working when it expires", async () => {
    idp = await startTestIssuer();
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-assign-"));
    const begins: Array<{ node_run_id: string; assignment_token: string }> = [];
    const stub = Fastify();
    stub.post("/v1/composite-node-runs:begin", async (req) => {
      begins.push(req.body as (typeof begins)[number]);
      return { accepted: true };
    });
    const stubUrl = await listen(stub);
    const registryUrl = await listen(await buildNodeRegistry({ logger: false, dbPath: path.join(dir, "registry.db") }));
    for (const nt of [
      { ...MANUAL, kind: "composite", output_schema: { type: "object" } },
      { ...ECHO, kind: "atomic" },
    ]) {
      expect((await call("POST", `${registryUrl}/v1/node-types`, { node_type: nt })).status).toBe(200);
    }
    const coordinator = await listen(
      await buildRunCoordinator({
        logger: false,
        dbPath: path.join(dir, "runs.db"),
        registryUrl,
        compositeExecutorUrl: stubUrl,
        tickMs: 20,
        leaseMs: 200,
        compositeLeaseMs: 200,
        assignmentTokens: new AssignmentTokens(undefined, LIFETIME_S),
        auth: { mode: "required", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }) },
      }),
    );
    const client = { authorization: `Bearer ${await idp.mint({ aud: "nodefabric-run-coordinator", scope: "runs:write runs:read" })}` };
    const run = await call("POST", `${coordinator}/v1/runs`, { root_node_type_ref: MANUAL, input: {} }, client);
    expect(run.status).toBe(200);
    const root = run.body.root_node_run_id as string;
    const first = await eventually(async () => begins.find((b) => b.node_run_id === root));
    const firstClaims = decodeJwt(first.assignment_token);
    expect(firstClaims.exp! - firstClaims.iat!).toBe(LIFETIME_S);

    // Keep the composite visibly alive: a child every 150 ms, with whatever token it holds last.
    let key = 0;
    const latest = () => begins.filter((b) => b.node_run_id === root).at(-1)!.assignment_token;
    const create = (token: string) =>
      call("POST", `${coordinator}/v1/node-runs`, { run_id: run.body.run_id, parent_node_run_id: root, node_runs: [{ node_type_ref: ECHO, inputs: {}, idempotency_key: `k${key++}` }] }, { authorization: `Bearer ${token}` });
    const started = Date.now();
    while (Date.now() - started < LIFETIME_S * 1000 + 600) {
      const res = await create(latest());
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      await new Promise((r) => setTimeout(r, 150));
    }
    const tokens = begins.filter((b) => b.node_run_id === root).map((b) => b.assignment_token);
    expect(new Set(tokens).size).toBeGreaterThan(1);
    // The first token has expired by now; the renewed one still works.
    const old = await create(first.assignment_token);
    expect(old.status).toBe(401);
    expect(old.body.error.message).toMatch(/expired/);
    expect((await create(latest())).status).toBe(200);
    const done = await call("POST", `${coordinator}/v1/node-runs/${root}:complete`, { state: "completed", outputs: {} }, { authorization: `Bearer ${latest()}` });
    expect(done.status).toBe(204);
  }, 60_000);
});
