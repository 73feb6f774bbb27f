// POST /v1/policy:decideBatch (an extension of the PDP): several questions in one request, each answered as POST
// /v1/policy:decide answers it, in order; a bad request refuses the whole batch before anything is decided. And
// HttpPolicyClient.decideMany, which tells its caller to ask one question at a time when the PDP has no batch endpoint
// (remembered for a while), or finds the questions too large together.
import { describe, it, expect, beforeAll, afterAll, afterEach } from "vitest";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { TokenVerifier } from "@nodefabric/core";
import { buildPdp } from "../src/services/pdp/index.js";
import { HttpPolicyClient, MAX_DECISION_BATCH } from "../src/clients/pdp-client.js";
import { observed } from "../src/observe/channels.js";
import { setClock } from "../src/clock.js";
import { checkedCall as call } from "./support/checked-call.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";

const EXAMPLE = fileURLToPath(new URL("../policies/example.cedar", import.meta.url));
const isBatchAnswer = validatorFor("policy_decision_batch_response");
const isDecision = validatorFor("policy_decision");

async function start(options: Parameters<typeof buildPdp>[0] = {}, before?: (app: FastifyInstance) => void): Promise<{ app: FastifyInstance; base: string }> {
  const app = await buildPdp({ logger: false, ...options });
  before?.(app);
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

const alice = { tenant_id: "acme", actor: { type: "user", id: "alice" } };
const weather = { node_type_id: "weather.current", version: "1.0.0" };
const transfer = { node_type_id: "payments.transfer", version: "2.0.0" };
/** Questions the example policy answers each way: allow, allow, deny (forbid), deny (no permit), require_approval. */
const QUESTIONS = [
  { action: "run.start", run_id: "run_1", node_type_ref: weather, run_context: alice },
  { action: "node.run.execute", run_id: "run_1", node_run_id: "nr_1", node_type_ref: weather, run_context: alice, constraints: { gates: { side_effect_class: "read" } } },
  { action: "run.start", run_id: "run_2", run_context: { tenant_id: "tenant-suspended" } },
  { action: "node.run.execute", node_type_ref: weather, run_context: alice, constraints: { gates: { side_effect_class: "write" } } },
  { action: "node.run.execute", run_id: "run_3", node_run_id: "nr_3", node_type_ref: transfer, run_context: alice, constraints: { gates: { side_effect_class: "irreversible" } } },
];

/** A decision without its approval id, which is new with every decision. */
const sansApprovalId = (d: any) => (d.approval_ref ? { ...d, approval_ref: { ...d.approval_ref, approval_id: "<new>" } } : d);

/** Counts the decisions the PDP of this process makes while `fn` runs (the pdpDecision channel, one per decision). */
async function decisionsDuring(fn: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const listen = (m: unknown) => seen.push((m as { action: string }).action);
  observed.pdpDecision.subscribe(listen);
  try {
    await fn();
  } finally {
    observed.pdpDecision.unsubscribe(listen);
  }
  return seen;
}

describe("POST /v1/policy:decideBatch", () => {
  let pdp: { app: FastifyInstance; base: string };
  beforeAll(async () => {
    pdp = await start({ policyFile: EXAMPLE });
  });
  afterAll(async () => {
    await pdp?.app.close();
  });

  it("answers one decision per request, in order, each what POST /v1/policy:decide answers for it", async () => {
    const res = await call(pdp.base, "POST", "/v1/policy:decideBatch", { requests: QUESTIONS, extensions: { "acme.caller": "test" } });
    expect(res.status).toBe(200);
    expect(isBatchAnswer(res.body), JSON.stringify(isBatchAnswer.errors)).toBe(true);
    expect(Object.keys(res.body)).toEqual(["decisions"]);
    const singles = [];
    for (const q of QUESTIONS) {
      const one = await call(pdp.base, "POST", "/v1/policy:decide", q);
      expect(one.status).toBe(200);
      expect(isDecision(one.body)).toBe(true);
      singles.push(one.body);
    }
    expect(res.body.decisions.map(sansApprovalId)).toEqual(singles.map(sansApprovalId));
    expect(res.body.decisions.map((d: any) => [d.decision, d.reason_code])).toEqual([
      ["allow", "policy:allow-run-start"],
      ["allow", "policy:allow-read-execute"],
      ["deny", "denied_by:forbid-suspended-tenant"],
      ["deny", "no_permit"],
      ["require_approval", "approval_required_by:approve-irreversible"],
    ]);
    // An approval asked for in a batch gets an id of its own, as it does from policy:decide.
    expect(res.body.decisions[4].approval_ref.approval_id).toMatch(/^apr_[0-9a-z]{26}$/);
    expect(res.body.decisions[4].approval_ref.approval_id).not.toBe(singles[4].approval_ref.approval_id);
  });

  it("decides the same question twice when asked twice, and takes up to 100 questions", async () => {
    const twice = await call(pdp.base, "POST", "/v1/policy:decideBatch", { requests: [QUESTIONS[2], QUESTIONS[2]] });
    expect(twice.status).toBe(200);
    expect(twice.body.decisions).toHaveLength(2);
    expect(twice.body.decisions[0]).toEqual(twice.body.decisions[1]);
    const many = Array.from({ length: 100 }, (_, i) => QUESTIONS[i % 4]);
    const full = await call(pdp.base, "POST", "/v1/policy:decideBatch", { requests: many });
    expect(full.status).toBe(200);
    expect(full.body.decisions.map((d: any) => d.reason_code)).toEqual(many.map((_, i) => ["policy:allow-run-start", "policy:allow-read-execute", "denied_by:forbid-suspended-tenant", "no_permit"][i % 4]));
  });

  it("refuses a bad batch with 400 invalid_request, pointing at the request that is wrong, and decides none of it", async () => {
    const cases: Array<[string, unknown, string]> = [
      ["a request without its action", { requests: [QUESTIONS[0], { run_id: "run_1" }] }, "/requests/1/action"],
      ["an unknown field in a request", { requests: [{ action: "run.start", actor: "alice" }] }, "/requests/0/actor"],
      ["a bad gate in a request", { requests: [QUESTIONS[0], { action: "node.run.execute", constraints: { gates: { side_effect_class: "delete" } } }] }, "/requests/1/constraints/gates/side_effect_class"],
      ["no requests", { requests: [] }, "/requests"],
      ["more than 100 requests", { requests: Array.from({ length: 101 }, () => QUESTIONS[0]) }, "/requests"],
      ["requests missing", { decisions: [] }, "/requests"],
      ["one bare request instead of a batch", QUESTIONS[0], "/action"],
      ["an unknown top-level field", { requests: [QUESTIONS[0]], run_id: "run_1" }, "/run_id"],
      ["a bad extension key", { requests: [QUESTIONS[0]], extensions: { nonamespace: 1 } }, "/extensions/nonamespace"],
    ];
    const decided = await decisionsDuring(async () => {
      for (const [what, body, pointer] of cases) {
        const r = await call(pdp.base, "POST", "/v1/policy:decideBatch", body);
        expect(r.status, what).toBe(400);
        expect(r.body.error.code, what).toBe("invalid_request");
        expect(r.body.error.details.errors.map((e: { path: string }) => e.path), what).toContain(pointer);
      }
      const empty = await call(pdp.base, "POST", "/v1/policy:decideBatch", "");
      expect(empty.status).toBe(400);
      expect(empty.body.error.code).toBe("invalid_request");
      const badJson = await call(pdp.base, "POST", "/v1/policy:decideBatch", '{"requests": [');
      expect(badJson.status).toBe(400);
      expect(badJson.body.error.code).toBe("invalid_request");
    });
    expect(decided).toEqual([]);
    const wrongMethod = await call(pdp.base, "GET", "/v1/policy:decideBatch");
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.body.error.code).toBe("method_not_allowed");
  });

  it("is in the PDP's OpenAPI document, with its request and answer schemas", async () => {
    const doc = await call(pdp.base, "GET", "/openapi.json");
    expect(doc.status).toBe(200);
    const op = doc.body.paths["/v1/policy:decideBatch"].post;
    expect(op.operationId).toBe("decideBatch");
    expect(op.tags).toEqual(["policy"]);
    expect(JSON.stringify(op.requestBody)).toContain("#/components/schemas/PolicyDecisionBatchRequest");
    expect(JSON.stringify(op.responses["200"])).toContain("#/components/schemas/PolicyDecisionBatchResponse");
  });
});

describe("POST /v1/policy:decideBatch with authentication", () => {
  let idp: TestIssuer;
  let pdp: { app: FastifyInstance; base: string };
  const AUD = "nodefabric-pdp";
  beforeAll(async () => {
    idp = await startTestIssuer();
    pdp = await start({ auth: { mode: "required", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }) } });
  });
  afterAll(async () => {
    await pdp?.app.close();
    await idp?.close();
  });

  it("needs policy:decide, as policy:decide does: 401 without a token, 403 without the scope, 200 with it", async () => {
    const body = { requests: [QUESTIONS[0], QUESTIONS[1]] };
    const none = await call(pdp.base, "POST", "/v1/policy:decideBatch", body);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("unauthenticated");
    const other = await call(pdp.base, "POST", "/v1/policy:decideBatch", body, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "runs:read runs:write" })}` });
    expect(other.status).toBe(403);
    expect(other.body.error.code).toBe("permission_denied");
    const wrongAudience = await call(pdp.base, "POST", "/v1/policy:decideBatch", body, { authorization: `Bearer ${await idp.mint({ aud: "nodefabric-run-gateway", scope: "policy:decide" })}` });
    expect(wrongAudience.status).toBe(401);
    const allowed = await call(pdp.base, "POST", "/v1/policy:decideBatch", body, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "policy:decide" })}` });
    expect(allowed.status).toBe(200);
    expect(allowed.body.decisions.map((d: any) => d.decision)).toEqual(["allow", "allow"]);
  });
});

describe("HttpPolicyClient.decideMany", () => {
  let current: { app: FastifyInstance; base: string };
  let older: { app: FastifyInstance; base: string };
  const olderCalls: string[] = [];
  beforeAll(async () => {
    current = await start({ policyFile: EXAMPLE });
    // A PDP from before the batch endpoint: the same service, that route answering 404 as an unknown route does.
    older = await start({ policyFile: EXAMPLE }, (app) =>
      app.addHook("onRequest", async (req, reply) => {
        olderCalls.push(req.url);
        if (req.url.startsWith("/v1/policy:decideBatch")) await reply.code(404).send({ error: { code: "route_not_found", message: `no route ${req.method} ${req.url}` } });
      }),
    );
  });
  afterAll(async () => {
    await current?.app.close();
    await older?.app.close();
  });
  afterEach(() => setClock());

  it("asks several questions in one request and answers the decisions in order", async () => {
    const client = new HttpPolicyClient(current.base);
    try {
      const decisions = await client.decideMany(QUESTIONS);
      expect(decisions!.map((d) => d.reason_code)).toEqual(["policy:allow-run-start", "policy:allow-read-execute", "denied_by:forbid-suspended-tenant", "no_permit", "approval_required_by:approve-irreversible"]);
      expect(await client.decideMany([])).toEqual([]);
      // More than one request holds go in several, still in order.
      const many = Array.from({ length: MAX_DECISION_BATCH + 3 }, (_, i) => QUESTIONS[i % 2]!);
      expect((await client.decideMany(many))!.map((d) => d.reason_code)).toEqual(many.map((_, i) => (i % 2 === 0 ? "policy:allow-run-start" : "policy:allow-read-execute")));
    } finally {
      await client.close();
    }
  });

  it("against a PDP without the batch endpoint: undefined, remembered for batchRetryMs without another try, then tried again", async () => {
    let now = Date.parse("2026-11-29T10:00:00Z");
    setClock({ now: () => now, isoNow: () => new Date(now).toISOString() });
    const told: number[] = [];
    const client = new HttpPolicyClient(older.base, { batchRetryMs: 60_000, onBatchUnsupported: (status) => told.push(status) });
    try {
      olderCalls.length = 0;
      expect(await client.decideMany([QUESTIONS[0], QUESTIONS[1]])).toBeUndefined();
      expect(told).toEqual([404]);
      // The caller asks one at a time, and the single endpoint answers.
      expect((await client.decide(QUESTIONS[0])).decision).toBe("allow");
      now += 59_000;
      expect(await client.decideMany([QUESTIONS[0], QUESTIONS[1]])).toBeUndefined();
      expect(olderCalls).toEqual(["/v1/policy:decideBatch", "/v1/policy:decide"]);
      now += 2_000;
      expect(await client.decideMany([QUESTIONS[0], QUESTIONS[1]])).toBeUndefined();
      expect(olderCalls).toEqual(["/v1/policy:decideBatch", "/v1/policy:decide", "/v1/policy:decideBatch"]);
      expect(told).toEqual([404, 404]);
    } finally {
      await client.close();
    }
  });

  it("takes a 405 or 501, even with a body that is not JSON, as no batch endpoint; a 413 as too large together, not remembered", async () => {
    const seen: string[] = [];
    let batchStatus = 405;
    const other = http.createServer((req, res) => {
      seen.push(req.url!);
      if (req.url === "/v1/policy:decideBatch") {
        res.writeHead(batchStatus, { "content-type": batchStatus === 413 ? "application/json" : "text/html" });
        res.end(batchStatus === 413 ? JSON.stringify({ error: { code: "payload_too_large", message: "too large" } }) : "<html>no such thing</html>");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ decision: "allow" }));
    });
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    try {
      for (const status of [405, 501]) {
        batchStatus = status;
        const client = new HttpPolicyClient(base);
        expect(await client.decideMany([QUESTIONS[0], QUESTIONS[1]])).toBeUndefined();
        expect(await client.decideMany([QUESTIONS[0], QUESTIONS[1]])).toBeUndefined();
        await client.close();
      }
      expect(seen).toEqual(["/v1/policy:decideBatch", "/v1/policy:decideBatch"]);
      batchStatus = 413;
      const client = new HttpPolicyClient(base);
      expect(await client.decideMany([QUESTIONS[0], QUESTIONS[1]])).toBeUndefined();
      expect(await client.decideMany([QUESTIONS[0], QUESTIONS[1]])).toBeUndefined();
      await client.close();
      expect(seen).toEqual(["/v1/policy:decideBatch", "/v1/policy:decideBatch", "/v1/policy:decideBatch", "/v1/policy:decideBatch"]);
    } finally {
      await new Promise<void>((r) => other.close(() => r()));
    }
  });

  it("throws when the PDP cannot be reached, answers a server error, or answers the wrong number of decisions", async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const gone = new HttpPolicyClient(`http://127.0.0.1:${port}`);
    await expect(gone.decideMany([QUESTIONS[0], QUESTIONS[1]])).rejects.toMatchObject({ code: "upstream_unavailable" });
    await gone.close();

    let answer: { status: number; body: unknown } = { status: 500, body: { error: { code: "internal_error", message: "boom" } } };
    const odd = http.createServer((_req, res) => {
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(JSON.stringify(answer.body));
    });
    await new Promise<void>((r) => odd.listen(0, "127.0.0.1", r));
    const client = new HttpPolicyClient(`http://127.0.0.1:${(odd.address() as AddressInfo).port}`);
    try {
      await expect(client.decideMany([QUESTIONS[0], QUESTIONS[1]])).rejects.toMatchObject({ code: "internal_error" });
      answer = { status: 200, body: { decisions: [{ decision: "allow" }] } };
      await expect(client.decideMany([QUESTIONS[0], QUESTIONS[1]])).rejects.toThrow("the PDP answered 1 decisions to 2 questions");
      answer = { status: 200, body: { decision: "allow" } };
      await expect(client.decideMany([QUESTIONS[0], QUESTIONS[1]])).rejects.toThrow("the PDP answered no decisions to 2 questions");
    } finally {
      await client.close();
      await new Promise<void>((r) => odd.close(() => r()));
    }
  });
});
