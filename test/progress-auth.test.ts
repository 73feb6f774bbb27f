import { describe, it, expect, beforeAll, afterAll, vi } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { defineAtomic, HandlerError } from "@nodefabric/sdk";
import { AssignmentTokens, SERVICE_NAMES, audienceOf, loadConfig, loadOrCreateAssignmentSecret, startFabric, type RunningFabric, type ServiceName } from "@nodefabric/core";
import { call, eventually, readNdjson } from "./run-client.js";
import { startTestIssuer, type TestIssuer } from "../core/test/support/test-issuer.js";

// node_run_progress and checkpoints with authentication required on every service: the executor reports progress
// and saves checkpoints with the NodeRun's assignment token, which acts for that NodeRun only. In one process the
// token is signed only when a handler first needs it; one that reports nothing costs none.
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const STEPS = { node_type_id: "progress.auth-steps", version: "1.0.0" };
const steps = defineAtomic({
  nodeType: { ...STEPS, description: "reports two steps", input_schema: { type: "object" }, output_schema: { type: "object" } },
  async handler(_inputs, ctx) {
    ctx.reportProgress(1, 2, "first");
    await sleep(300);
    ctx.reportProgress(2, 2, "second");
    await sleep(300);
    return {};
  },
});

const QUIET = { node_type_id: "progress.auth-quiet", version: "1.0.0" };
const quiet = defineAtomic({
  nodeType: { ...QUIET, description: "reports nothing", input_schema: { type: "object" }, output_schema: { type: "object" } },
  async handler(inputs) {
    return { got: inputs };
  },
});
const RESUMING = { node_type_id: "progress.auth-resuming", version: "1.0.0" };
const resuming = defineAtomic({
  nodeType: { ...RESUMING, description: "reports, saves a checkpoint, fails retryably, and resumes from it", input_schema: { type: "object" }, output_schema: { type: "object" } },
  async handler(_inputs, ctx) {
    if (ctx.checkpoint) return { resumed: ctx.checkpoint };
    ctx.reportProgress(1, 2, "started");
    await ctx.saveCheckpoint({ job: `job-of-${ctx.node_run_id}` });
    await ctx.saveCheckpoint({ job: `job-of-${ctx.node_run_id}`, step: 2 });
    throw new HandlerError("upstream_unavailable", "the connection dropped after the job started", { retryable: true });
  },
});

describe("progress reports with authentication required", () => {
  let idp: TestIssuer;
  let fabric: RunningFabric;
  let dataDir: string;
  const url = (s: ServiceName) => fabric.urls[s]!;
  const bearer = async (service: ServiceName, scope: string, o: Record<string, string> = {}) => ({ authorization: `Bearer ${await idp.mint({ aud: audienceOf(service), scope, ...o })}` });

  beforeAll(async () => {
    idp = await startTestIssuer();
    dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-progress-auth-"));
    const keyFile = path.join(dataDir, "signing-key.json");
    writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
    fabric = await startFabric(
      loadConfig({
        cwd: dataDir,
        env: {},
        flags: { port_base: 0, data_dir: dataDir, log_level: "silent", auth: { mode: "required", issuer: idp.issuer, jwks_url: idp.jwksUrl, signing_key_file: keyFile } } as never,
      }),
      SERVICE_NAMES,
      { definitions: [steps, quiet, resuming] },
    );
    const reg = await bearer("node-registry", "node-types:read");
    await eventually(async () => {
      const r = await call("GET", `${url("node-registry")}/v1/executors?node_type_id=${STEPS.node_type_id}`, undefined, reg);
      return r.status === 200 && r.body.length > 0 ? true : undefined;
    }, 20_000, "executor registration");
  }, 60_000);
  afterAll(async () => {
    await fabric?.close();
    await idp?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("records the executor's reports, sent with the NodeRun's assignment token", async () => {
    const headers = await bearer("run-gateway", "runs:read runs:write", { tenant_id: "acme", sub: "alice" });
    const r = await call("POST", `${url("run-gateway")}/v1/runs`, { root_node_type_ref: STEPS, input: {} }, { ...headers, prefer: "wait=20" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.state).toBe("completed");
    const ev = await readNdjson(`${url("run-gateway")}/v1/runs/${r.body.run_id}/events`, headers);
    expect(ev.lines.filter((e) => e.type === "node_run_progress").map((e) => e.data)).toEqual([
      { progress: 1, total: 2, message: "first", attempt: 1 },
      { progress: 2, total: 2, message: "second", attempt: 1 },
    ]);

    // An assignment token acts for its own NodeRun only; no token at all is a 401.
    const other = await new AssignmentTokens(loadOrCreateAssignmentSecret(path.join(dataDir, "assignment-secret")), 900).mint({ run_id: r.body.run_id, node_run_id: "nr_someone_else" });
    const refused = await call("POST", `${url("run-coordinator")}/v1/node-runs/${r.body.root_node_run_id}:progress`, { progress: 9 }, { authorization: `Bearer ${other}` });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("permission_denied");
    const anonymous = await call("POST", `${url("run-coordinator")}/v1/node-runs/${r.body.root_node_run_id}:progress`, { progress: 9 });
    expect(anonymous.status).toBe(401);
  });

  it("signs no assignment token for executions that report nothing, and one per execution that reports", async () => {
    const headers = await bearer("run-gateway", "runs:read runs:write", { tenant_id: "acme", sub: "alice" });
    const mint = vi.spyOn(AssignmentTokens.prototype, "mint");
    try {
      for (let i = 0; i < 3; i++) {
        const r = await call("POST", `${url("run-gateway")}/v1/runs`, { root_node_type_ref: QUIET, input: { i } }, { ...headers, prefer: "wait=20" });
        expect(r.body.state, JSON.stringify(r.body)).toBe("completed");
        expect(r.body.extensions["nodefabric.outputs"]).toEqual({ got: { i } });
      }
      expect(mint).not.toHaveBeenCalled();

      // The checkpoints were accepted with auth required (the retry resumed from the second), and they and the progress
      // report shared the first attempt's one token; the retry, which reports nothing, signed none.
      const r = await call("POST", `${url("run-gateway")}/v1/runs`, { root_node_type_ref: RESUMING, input: {} }, { ...headers, prefer: "wait=20" });
      expect(r.body.state, JSON.stringify(r.body)).toBe("completed");
      const job = `job-of-${r.body.root_node_run_id}`;
      expect(r.body.extensions["nodefabric.outputs"]).toEqual({ resumed: { job, step: 2 } });
      expect(mint).toHaveBeenCalledTimes(1);
      expect(mint.mock.calls[0]![0]).toEqual({ run_id: r.body.run_id, node_run_id: r.body.root_node_run_id });
    } finally {
      mint.mockRestore();
    }
  });
});
