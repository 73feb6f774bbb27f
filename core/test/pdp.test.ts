import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "undici";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { buildPdp, createDecider, defaultPolicySet, DEFAULT_POLICY_TEXT, entityTypeName, loadPolicyFile, loadPolicyText } from "../src/services/pdp/index.js";

const isDecision = validatorFor("policy_decision");
const isEnvelope = validatorFor("error_envelope");
const EXAMPLE = fileURLToPath(new URL("../policies/example.cedar", import.meta.url));
const ALLOW_ALL = fileURLToPath(new URL("../policies/allow-all.cedar", import.meta.url));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "nf-"));

function writeTmp(name: string, text: string): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, text);
  return file;
}

interface Answer {
  status: number;
  body: any;
}

async function call(base: string, method: "GET" | "POST", p: string, body?: unknown, raw?: string): Promise<Answer> {
  const res = await request(base + p, {
    method,
    body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    headers: body !== undefined || raw !== undefined ? { "content-type": "application/json" } : {},
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined };
}

async function start(app: FastifyInstance): Promise<string> {
  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  return `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
}

/** Asks for a decision, and proves the answer is a 200 PolicyDecision valid under the v1 schema. */
async function decide(base: string, body: Record<string, unknown>): Promise<any> {
  const r = await call(base, "POST", "/v1/policy:decide", body);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(isDecision(r.body), JSON.stringify(isDecision.errors)).toBe(true);
  return r.body;
}

afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe("PDP without a policy file", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    app = await buildPdp();
    base = await start(app);
  });
  afterAll(() => app.close());

  it("allows every action, naming the default policy", async () => {
    for (const action of ["run.start", "node.run.create", "node.run.execute", "anything.else"]) {
      const d = await decide(base, { action, run_context: { tenant_id: "tenant-suspended" }, constraints: { gates: { side_effect_class: "irreversible" } } });
      expect(d).toEqual({
        decision: "allow",
        reason_code: "policy:default-allow-all",
        message: "allowed by policy default-allow-all",
        extensions: { "nodefabric.policies": ["default-allow-all"] },
      });
    }
  });

  it("says in its health check that the default policy allows everything", async () => {
    const h = await call(base, "GET", "/v1/health");
    expect(h.status).toBe(200);
    expect(validatorFor("health")(h.body)).toBe(true);
    expect(h.body.status).toBe("ok");
    expect(h.body.checks).toEqual([
      { name: "policy", status: "ok", message: "no policy file given: the default policy allows every action", details: { source: "default", decision_cache: "on" } },
    ]);
  });

  it("answers version as the pdp service", async () => {
    const v = await call(base, "GET", "/v1/version");
    expect(v.status).toBe(200);
    expect(validatorFor("version_info")(v.body)).toBe(true);
    expect(v.body.service_name).toBe("pdp");
    expect(v.body.supported_api_versions).toContain("v1");
  });

  it("refuses bad requests with 400 invalid_request and an ErrorEnvelope", async () => {
    const cases: Array<[string, Answer, string]> = [
      ["missing action", await call(base, "POST", "/v1/policy:decide", { run_id: "run_1" }), "/action"],
      ["unknown field", await call(base, "POST", "/v1/policy:decide", { action: "run.start", actor: "alice" }), "/actor"],
      ["wrong type", await call(base, "POST", "/v1/policy:decide", { action: 5 }), "/action"],
      ["wrong nested type", await call(base, "POST", "/v1/policy:decide", { action: "run.start", context: [1, 2] }), "/context"],
      ["bad gate", await call(base, "POST", "/v1/policy:decide", { action: "run.start", constraints: { gates: { side_effect_class: "delete" } } }), "/constraints/gates/side_effect_class"],
      ["empty action", await call(base, "POST", "/v1/policy:decide", { action: "" }), "/action"],
    ];
    for (const [what, r, pointer] of cases) {
      expect(r.status, what).toBe(400);
      expect(isEnvelope(r.body), what).toBe(true);
      expect(r.body.error.code, what).toBe("invalid_request");
      expect(r.body.error.details.errors.map((e: { path: string }) => e.path), what).toContain(pointer);
    }
    const noBody = await call(base, "POST", "/v1/policy:decide", undefined, "");
    expect(noBody.status).toBe(400);
    expect(noBody.body.error.code).toBe("invalid_request");
    const badJson = await call(base, "POST", "/v1/policy:decide", undefined, '{"action": ');
    expect(badJson.status).toBe(400);
    expect(badJson.body.error.code).toBe("invalid_request");
    const wrongMethod = await call(base, "GET", "/v1/policy:decide");
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.body.error.code).toBe("method_not_allowed");
  });
});

describe("PDP with the example policy file", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    app = await buildPdp({ policyFile: EXAMPLE });
    base = await start(app);
  });
  afterAll(() => app.close());

  const alice = { tenant_id: "acme", actor: { type: "user", id: "alice" } };
  const weather = { node_type_id: "weather.current", version: "1.0.0" };

  it("reports the file and its policy count in health", async () => {
    const h = await call(base, "GET", "/v1/health");
    expect(h.status).toBe(200);
    expect(validatorFor("health")(h.body)).toBe(true);
    // Health shows no absolute path: a file under the working directory is shown relative to it.
    const shown = path.relative(process.cwd(), EXAMPLE);
    expect(h.body.checks).toEqual([{ name: "policy", status: "ok", message: `7 policies loaded from ${shown}`, details: { source: shown, policies: 7, decision_cache: "on" } }]);
  });

  it("allows run.start and node.run.create, naming the policy", async () => {
    const start = await decide(base, { action: "run.start", run_id: "run_1", run_context: alice });
    expect(start).toMatchObject({ decision: "allow", reason_code: "policy:allow-run-start", message: "allowed by policy allow-run-start" });
    expect(start.extensions["nodefabric.policies"]).toEqual(["allow-run-start"]);
    const create = await decide(base, { action: "node.run.create", run_id: "run_1", node_type_ref: weather, run_context: alice });
    expect(create).toMatchObject({ decision: "allow", reason_code: "policy:allow-node-run-create" });
  });

  it("allows executing a read node type", async () => {
    const d = await decide(base, {
      action: "node.run.execute",
      run_id: "run_1",
      node_run_id: "nr_1",
      node_type_ref: weather,
      run_context: alice,
      constraints: { gates: { side_effect_class: "read" } },
    });
    expect(d).toEqual({
      decision: "allow",
      reason_code: "policy:allow-read-execute",
      message: "allowed by policy allow-read-execute",
      extensions: { "nodefabric.policies": ["allow-read-execute"] },
    });
  });

  it("denies a suspended tenant, naming the forbid policy, even where a permit matches", async () => {
    const d = await decide(base, {
      action: "node.run.execute",
      node_type_ref: weather,
      run_context: { tenant_id: "tenant-suspended", actor: { type: "user", id: "bob" } },
      constraints: { gates: { side_effect_class: "read" } },
    });
    expect(d).toEqual({
      decision: "deny",
      reason_code: "denied_by:forbid-suspended-tenant",
      message: "denied by policy forbid-suspended-tenant",
      extensions: { "nodefabric.policies": ["forbid-suspended-tenant"] },
    });
    const start = await decide(base, { action: "run.start", run_context: { tenant_id: "tenant-suspended" } });
    expect(start.decision).toBe("deny");
    expect(start.reason_code).toBe("denied_by:forbid-suspended-tenant");
  });

  it("denies with no_permit when no policy permits the action", async () => {
    const d = await decide(base, { action: "node.run.execute", node_type_ref: weather, run_context: alice, constraints: { gates: { side_effect_class: "write" } } });
    expect(d).toEqual({ decision: "deny", reason_code: "no_permit", message: "no policy permits node.run.execute", extensions: { "nodefabric.policies": [] } });
    const unknown = await decide(base, { action: "registry.publish" });
    expect(unknown).toMatchObject({ decision: "deny", reason_code: "no_permit", message: "no policy permits registry.publish" });
  });

  it("compares the max_cost budget as a decimal", async () => {
    const ask = (max_cost: number) =>
      decide(base, { action: "node.run.execute", node_type_ref: weather, run_context: alice, constraints: { gates: { side_effect_class: "write" }, budgets: { max_cost, max_steps: 10 } } });
    expect((await ask(99.5)).reason_code).toBe("policy:allow-bounded-write-execute");
    expect((await ask(100)).reason_code).toBe("policy:allow-bounded-write-execute");
    expect((await ask(100.25)).reason_code).toBe("no_permit");
  });

  it("requires approval for an irreversible node type, with a fresh approval_ref each time", async () => {
    const body = {
      action: "node.run.execute",
      run_id: "run_2",
      node_run_id: "nr_9",
      node_type_ref: { node_type_id: "payments.transfer", version: "2.0.0" },
      run_context: alice,
      constraints: { gates: { side_effect_class: "irreversible" } },
    };
    const d = await decide(base, body);
    expect(d.decision).toBe("require_approval");
    expect(d.reason_code).toBe("approval_required_by:approve-irreversible");
    expect(d.message).toBe("policy approve-irreversible requires approval for node.run.execute");
    expect(d.approval_ref.approval_id).toMatch(/^apr_[0-9a-z]{26}$/);
    expect(d.extensions["nodefabric.policies"]).toEqual(["approve-irreversible"]);
    const again = await decide(base, body);
    expect(again.approval_ref.approval_id).not.toBe(d.approval_ref.approval_id);
  });

  it("requires approval when the gates ask for it, even where a plain permit also matches", async () => {
    const d = await decide(base, {
      action: "node.run.execute",
      node_type_ref: weather,
      run_context: alice,
      constraints: { gates: { side_effect_class: "read", require_approval: true } },
    });
    expect(d.decision).toBe("require_approval");
    expect(d.reason_code).toBe("approval_required_by:approve-when-gated");
    expect(d.extensions["nodefabric.policies"]).toEqual(["allow-read-execute", "approve-when-gated"]);
    expect(typeof d.approval_ref.approval_id).toBe("string");
  });

  it("still answers 200 with a decision for context values Cedar cannot hold", async () => {
    let deep: Record<string, unknown> = { leaf: true };
    // Deeper than Cedar takes, within what the HTTP edge accepts.
    for (let i = 0; i < 100; i++) deep = { n: deep };
    const d = await decide(base, {
      action: "node.run.execute",
      node_type_ref: weather,
      run_context: { ...alice, identity: { sub: 42, nested: { x: null } }, budgets: { spent: 1.5 } },
      constraints: { gates: { side_effect_class: "read" }, budgets: { max_cost: 1e300, max_steps: 9007199254740993 } },
      context: {
        nothing: null,
        ratio: 0.333333333,
        tiny: -1e-9,
        huge: 1e300,
        big_int: 2 ** 60,
        mixed: [1, "two", null, { three: 3.5 }, [true]],
        deep,
        "": "empty key",
        "weird key/~": "x\u0000\u{1F600}",
        __entity: { type: "NodeFabric::User", id: "root" },
        smuggled: { __extn: { fn: "decimal", arg: "1.23456" } },
        tenant_id: "tenant-other",
        side_effect_class: "irreversible",
      },
    });
    expect(d.decision).toBe("allow");
    expect(d.reason_code).toBe("policy:allow-read-execute");
    const dropped = d.extensions["nodefabric.context_dropped"].map((x: { path: string }) => x.path);
    expect(dropped).toEqual(
      expect.arrayContaining([
        "/context/nothing",
        "/context/huge",
        "/context/big_int",
        "/context/mixed/2",
        "/context/__entity",
        "/context/smuggled/__extn",
        "/context/tenant_id",
        "/context/side_effect_class",
        "/constraints/budgets/max_cost",
        "/constraints/budgets/max_steps",
      ]),
    );
    expect(dropped.some((p: string) => p.startsWith("/context/deep/n/n/"))).toBe(true);
  });

  it("does not let the request's context override the fabric's own keys", async () => {
    // A suspended tenant cannot pass itself off as another tenant, nor make an irreversible node type look like a read.
    const d = await decide(base, {
      action: "node.run.execute",
      node_type_ref: weather,
      run_context: { tenant_id: "tenant-suspended" },
      constraints: { gates: { side_effect_class: "irreversible" } },
      context: { tenant_id: "acme", side_effect_class: "read", require_approval: false },
    });
    expect(d.decision).toBe("deny");
    expect(d.reason_code).toBe("denied_by:forbid-suspended-tenant");
  });
});

describe("the mapping from a PolicyDecisionRequest to Cedar", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    const file = writeTmp(
      "mapping.cedar",
      `
@id("alice-user")
permit(principal == NodeFabric::User::"alice", action == NodeFabric::Action::"check.principal", resource);

@id("service-account")
permit(principal == NodeFabric::ServiceAccount::"ci", action == NodeFabric::Action::"check.principal", resource);

@id("anonymous")
permit(principal == NodeFabric::Anonymous::"anonymous", action == NodeFabric::Action::"check.principal", resource);

@id("tenant-attribute")
permit(principal is NodeFabric::User, action == NodeFabric::Action::"check.tenant", resource)
when { principal has tenant_id && principal.tenant_id == context.tenant_id };

@id("node-type-resource")
permit(principal, action == NodeFabric::Action::"check.resource", resource == NodeFabric::NodeType::"weather.current")
when { resource.version == "1.2.0" && context.node_type_id == "weather.current" && context.node_type_version == "1.2.0" };

@id("run-resource")
permit(principal, action == NodeFabric::Action::"check.resource", resource == NodeFabric::Run::"run_7")
when { context.run_id == "run_7" && context.node_run_id == "nr_7" };

@id("fabric-resource")
permit(principal, action == NodeFabric::Action::"check.resource", resource == NodeFabric::Fabric::"fabric");

@id("context-values")
permit(principal, action == NodeFabric::Action::"check.context", resource)
when {
  context.amount.greaterThan(decimal("10.5")) && context.count > 2 && context.flags.contains("urgent") &&
  context.customer.tier == "gold" && context.budgets.max_steps == 10 && context.budgets.max_cost == decimal("2.5") &&
  context.require_approval == false
};

@id("missing-key")
forbid(principal, action == NodeFabric::Action::"check.errors", resource) when { context.not_there == 1 };

@id("allow-errors-check")
permit(principal, action == NodeFabric::Action::"check.errors", resource);
`,
    );
    app = await buildPdp({ policyFile: file });
    base = await start(app);
  });
  afterAll(() => app.close());

  it("takes the principal from the actor, then identity.sub, else anonymous", async () => {
    expect((await decide(base, { action: "check.principal", run_context: { actor: { type: "user", id: "alice" } } })).reason_code).toBe("policy:alice-user");
    expect((await decide(base, { action: "check.principal", run_context: { actor: { type: "service_account", id: "ci" } } })).reason_code).toBe("policy:service-account");
    expect((await decide(base, { action: "check.principal", run_context: { identity: { sub: "alice" } } })).reason_code).toBe("policy:alice-user");
    expect((await decide(base, { action: "check.principal" })).reason_code).toBe("policy:anonymous");
    expect((await decide(base, { action: "check.principal", run_context: { actor: { type: "user", id: "mallory" } } })).reason_code).toBe("no_permit");
  });

  it("sanitises actor types into Cedar entity type names", () => {
    expect(entityTypeName("user")).toBe("NodeFabric::User");
    expect(entityTypeName("service_account")).toBe("NodeFabric::ServiceAccount");
    expect(entityTypeName("ci-bot")).toBe("NodeFabric::CiBot");
    expect(entityTypeName("a::b \"c\"")).toBe("NodeFabric::ABC");
    expect(entityTypeName("--")).toBe("NodeFabric::Actor");
    expect(entityTypeName("9lives")).toBe("NodeFabric::Actor9lives");
    expect(entityTypeName("action")).toBe("NodeFabric::ActorAction");
  });

  it("answers for actor types and ids that are not Cedar identifiers", async () => {
    const d = await decide(base, { action: "check.principal", run_context: { actor: { type: "::\"}; permit(", id: "\"); forbid(" } } });
    expect(d.reason_code).toBe("no_permit");
  });

  it("gives the principal its tenant_id", async () => {
    const ok = await decide(base, { action: "check.tenant", run_context: { tenant_id: "acme", identity: { sub: "alice" } } });
    expect(ok.reason_code).toBe("policy:tenant-attribute");
  });

  it("makes the resource a NodeType, else a Run, else the Fabric", async () => {
    const nt = await decide(base, { action: "check.resource", run_id: "run_7", node_type_ref: { node_type_id: "weather.current", version: "1.2.0" } });
    expect(nt.reason_code).toBe("policy:node-type-resource");
    const run = await decide(base, { action: "check.resource", run_id: "run_7", node_run_id: "nr_7" });
    expect(run.reason_code).toBe("policy:run-resource");
    const fabric = await decide(base, { action: "check.resource" });
    expect(fabric.reason_code).toBe("policy:fabric-resource");
  });

  it("passes the request's context, budgets and gates to Cedar with Cedar types", async () => {
    const d = await decide(base, {
      action: "check.context",
      constraints: { budgets: { max_steps: 10, max_cost: 2.5 } },
      context: { amount: 12.75, count: 3, flags: ["urgent", "eu"], customer: { tier: "gold", since: null } },
    });
    expect(d.reason_code).toBe("policy:context-values");
    expect(d.extensions["nodefabric.context_dropped"]).toEqual([{ path: "/context/customer/since", reason: "null has no Cedar value" }]);
  });

  it("reports policies Cedar could not evaluate in nodefabric.errors", async () => {
    const d = await decide(base, { action: "check.errors" });
    expect(d.decision).toBe("allow");
    expect(d.reason_code).toBe("policy:allow-errors-check");
    expect(d.extensions["nodefabric.errors"]).toEqual([{ policy_id: "missing-key", message: expect.stringContaining("not_there") }]);
  });
});

describe("PDP with an entities file", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    const policies = writeTmp(
      "groups.cedar",
      `
@id("forbid-blocked")
forbid(principal in NodeFabric::Group::"blocked", action, resource);

@id("finance-in-tenant")
permit(principal in NodeFabric::Group::"finance", action, resource)
when { principal.department == "finance" && principal has tenant_id && principal.tenant_id == "acme" };
`,
    );
    const entities = writeTmp(
      "entities.json",
      JSON.stringify([
        { uid: { type: "NodeFabric::User", id: "mallory" }, attrs: {}, parents: [{ type: "NodeFabric::Group", id: "blocked" }, { type: "NodeFabric::Group", id: "finance" }] },
        { uid: { __entity: { type: "NodeFabric::User", id: "alice" } }, attrs: { department: "finance", tenant_id: "file-value" }, parents: [{ type: "NodeFabric::Group", id: "finance" }] },
        { uid: { type: "NodeFabric::Group", id: "blocked" }, attrs: {}, parents: [] },
        { uid: { type: "NodeFabric::Group", id: "finance" }, attrs: {}, parents: [] },
      ]),
    );
    app = await buildPdp({ policyFile: policies, entitiesFile: entities });
    base = await start(app);
  });
  afterAll(() => app.close());

  it("uses the file's group memberships and merges the request's attributes over the file's", async () => {
    const alice = await decide(base, { action: "run.start", run_context: { tenant_id: "acme", actor: { type: "user", id: "alice" } } });
    expect(alice.reason_code).toBe("policy:finance-in-tenant");
    const mallory = await decide(base, { action: "run.start", run_context: { tenant_id: "acme", actor: { type: "user", id: "mallory" } } });
    expect(mallory.reason_code).toBe("denied_by:forbid-blocked");
    const stranger = await decide(base, { action: "run.start", run_context: { tenant_id: "acme", actor: { type: "user", id: "zed" } } });
    expect(stranger.reason_code).toBe("no_permit");
  });

  it("lists the entities file in health", async () => {
    const h = await call(base, "GET", "/v1/health");
    expect(h.body.checks[0].details).toMatchObject({ policies: 2, entities: 4, decision_cache: "on" });
  });
});

describe("loading policy files", () => {
  it("rejects a policy file that does not parse, naming the file, the line and Cedar's message", async () => {
    const file = writeTmp("broken.cedar", '@id("ok")\npermit(principal, action, resource);\n\npermit(principal, action, resource)\nwhen { context.x == };\n');
    await expect(buildPdp({ policyFile: file })).rejects.toThrow(`${file}:5:`);
    await expect(buildPdp({ policyFile: file })).rejects.toThrow(/unexpected token `}`/);
  });

  it("rejects a missing file, duplicate ids, a bad approval annotation, templates and bad entities", async () => {
    const missing = path.join(tmp, "nope.cedar");
    await expect(buildPdp({ policyFile: missing })).rejects.toThrow(`${missing}: cannot read the policy file`);
    const dup = writeTmp("dup.cedar", '@id("a")\npermit(principal, action, resource);\n@id("a")\nforbid(principal, action, resource);\n');
    await expect(buildPdp({ policyFile: dup })).rejects.toThrow(`${dup}:3:1: two policies have the id "a" (the other is on line 1)`);
    const approval = writeTmp("approval.cedar", '@require_approval("yes")\npermit(principal, action, resource);\n');
    await expect(buildPdp({ policyFile: approval })).rejects.toThrow(`${approval}:1:1: @require_approval takes "true" or "false", not "yes"`);
    const forbidApproval = writeTmp("forbid-approval.cedar", '@require_approval("true")\nforbid(principal, action, resource);\n');
    await expect(buildPdp({ policyFile: forbidApproval })).rejects.toThrow("@require_approval belongs on a permit policy");
    const template = writeTmp("template.cedar", "permit(principal, action, resource);\npermit(principal == ?principal, action, resource);\n");
    await expect(buildPdp({ policyFile: template })).rejects.toThrow(`${template}:2:1: policy templates`);
    const entities = writeTmp("bad-entities.json", JSON.stringify([{ uid: { type: "NodeFabric::User", id: "a" }, attrs: { score: 1.5 }, parents: [] }]));
    await expect(buildPdp({ policyFile: ALLOW_ALL, entitiesFile: entities })).rejects.toThrow(entities);
    const notArray = writeTmp("object-entities.json", "{}");
    await expect(buildPdp({ entitiesFile: notArray })).rejects.toThrow("an entities file holds a JSON array");
  });

  it("loads the shipped allow-all file and an empty file", async () => {
    const all = await loadPolicyFile(ALLOW_ALL);
    expect(all.policies).toEqual([{ id: "allow-all", effect: "permit", requiresApproval: false, line: 3 }]);
    const empty = writeTmp("empty.cedar", "// nothing here yet\n");
    const app = await buildPdp({ policyFile: empty });
    const base = await start(app);
    try {
      const h = await call(base, "GET", "/v1/health");
      expect(h.body.checks[0]).toMatchObject({ message: "empty.cedar holds no policies: every action is denied", details: { source: "empty.cedar", policies: 0 } });
      expect((await decide(base, { action: "run.start" })).reason_code).toBe("no_permit");
    } finally {
      await app.close();
    }
  });
});

describe("decision cache", () => {
  const alice = { tenant_id: "acme", actor: { type: "user", id: "alice" } };
  const weather = { node_type_id: "weather.current", version: "1.0.0" };
  const execute = (i: number, gates: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    action: "node.run.execute",
    run_id: `run_${i}`,
    node_run_id: `nr_${i}`,
    node_type_ref: weather,
    run_context: alice,
    constraints: { gates, budgets: { max_steps: 10 } },
    context: { trace_id: `trace-${i}`, attempt: i },
    ...extra,
  });
  /** A decision without its approval id, which is new every time. */
  const stripApproval = (d: any) => ({ ...d, approval_ref: d.approval_ref ? "<approval>" : undefined });

  it("works out what the example policies read", async () => {
    const reads = (await loadPolicyFile(EXAMPLE)).reads;
    expect(reads.bounded).toBe(true);
    if (!reads.bounded) return;
    expect([...reads.context].sort()).toEqual(["budgets", "require_approval", "side_effect_class"]);
    expect([...reads.principal]).toEqual(["tenant_id"]);
    expect([...reads.resource]).toEqual([]);
    expect([...reads.vars].sort()).toEqual(["action", "principal"]);
    const none = defaultPolicySet().reads;
    expect(none.bounded && none.vars.size + none.context.size + none.principal.size + none.resource.size).toBe(0);
  });

  it("answers a request differing only in context no policy reads from the cache, with the same decision", async () => {
    const decider = createDecider(await loadPolicyFile(EXAMPLE));
    expect(decider.stats()).toMatchObject({ status: "on", hits: 0, misses: 0, entries: 0, capacity: 10_000 });
    const first = decider.decide(execute(1, { side_effect_class: "read" }));
    expect(decider.stats()).toMatchObject({ hits: 0, misses: 1, entries: 1 });
    // run_id, node_run_id, trace_id and attempt differ; nothing the policies read does.
    const second = decider.decide(execute(2, { side_effect_class: "read" }));
    expect(decider.stats()).toMatchObject({ hits: 1, misses: 1, entries: 1 });
    expect(second).toEqual(first);
    expect(second).toEqual({
      decision: "allow",
      reason_code: "policy:allow-read-execute",
      message: "allowed by policy allow-read-execute",
      extensions: { "nodefabric.policies": ["allow-read-execute"] },
    });
  });

  it("gives requests that differ in what a policy reads their own, correct decisions", async () => {
    const decider = createDecider(await loadPolicyFile(EXAMPLE));
    const cases: Array<[Record<string, unknown>, Record<string, unknown>, string]> = [
      [{ side_effect_class: "read" }, {}, "policy:allow-read-execute"],
      [{ side_effect_class: "write" }, {}, "no_permit"],
      [{ side_effect_class: "write" }, { constraints: { gates: { side_effect_class: "write" }, budgets: { max_cost: 50 } } }, "policy:allow-bounded-write-execute"],
      [{ side_effect_class: "write" }, { constraints: { gates: { side_effect_class: "write" }, budgets: { max_cost: 500 } } }, "no_permit"],
      [{ side_effect_class: "irreversible" }, {}, "approval_required_by:approve-irreversible"],
      [{ side_effect_class: "read", require_approval: true }, {}, "approval_required_by:approve-when-gated"],
      [{}, {}, "no_permit"],
      // The principal is alice both times; only its tenant_id (which a forbid reads) differs.
      [{ side_effect_class: "read" }, { run_context: { tenant_id: "tenant-suspended", actor: { type: "user", id: "alice" } } }, "denied_by:forbid-suspended-tenant"],
      [{ side_effect_class: "read" }, { run_context: { actor: { type: "user", id: "alice" } } }, "policy:allow-read-execute"],
    ];
    for (let round = 0; round < 2; round++) {
      for (const [i, [gates, extra, reason]] of cases.entries()) {
        const d = decider.decide(execute(i + round * 100, gates, extra));
        expect(d.reason_code, JSON.stringify([gates, extra])).toBe(reason);
        expect(isDecision(d)).toBe(true);
      }
      expect(decider.stats()).toMatchObject({ misses: cases.length, hits: round * cases.length, entries: cases.length });
    }
  });

  it("mints a new approval_id for every require_approval answer, cached or not", async () => {
    const decider = createDecider(await loadPolicyFile(EXAMPLE));
    const answers = [1, 2, 3].map((i) => decider.decide(execute(i, { side_effect_class: "irreversible" })));
    expect(decider.stats()).toMatchObject({ misses: 1, hits: 2 });
    const ids = answers.map((d) => d.approval_ref?.approval_id);
    expect(new Set(ids).size).toBe(3);
    for (const d of answers) {
      expect(d.approval_ref?.approval_id).toMatch(/^apr_[0-9a-z]{26}$/);
      expect(stripApproval(d)).toEqual(stripApproval(answers[0]));
      expect(d.message).toBe("policy approve-irreversible requires approval for node.run.execute");
    }
  });

  it("hits for every request under the default policy, which reads nothing", () => {
    const decider = createDecider(defaultPolicySet());
    for (let i = 0; i < 50; i++) {
      const d = decider.decide({ action: "run.start", run_id: `run_${i}`, run_context: { tenant_id: `t${i}`, actor: { type: "user", id: `u${i}` } }, context: { n: i, s: `x${i}` } });
      expect(d.reason_code).toBe("policy:default-allow-all");
      const e = decider.decide(execute(i, { side_effect_class: i % 2 ? "read" : "write" }));
      expect(e.reason_code).toBe("policy:default-allow-all");
      expect(e.message).toBe("allowed by policy default-allow-all");
    }
    expect(decider.stats()).toMatchObject({ misses: 1, hits: 99 });
  });

  it("leaves out of the key a principal, action or resource no policy mentions", async () => {
    // No example policy mentions the resource, so every run's run.start shares one entry.
    const example = createDecider(await loadPolicyFile(EXAMPLE));
    for (let i = 0; i < 20; i++) {
      expect(example.decide({ action: "run.start", run_id: `run_${i}`, run_context: alice }).reason_code).toBe("policy:allow-run-start");
    }
    expect(example.stats()).toMatchObject({ misses: 1, hits: 19 });
    // A policy that does mention it gets a decision per resource.
    const set = loadPolicyText('@id("run-7")\npermit(principal, action, resource == NodeFabric::Run::"run_7");\n', "inline");
    expect(set.reads.bounded && [...set.reads.vars]).toEqual(["resource"]);
    const decider = createDecider(set);
    for (let round = 0; round < 2; round++) {
      expect(decider.decide({ action: "run.start", run_id: "run_7", run_context: alice }).reason_code).toBe("policy:run-7");
      expect(decider.decide({ action: "run.start", run_id: "run_8", run_context: alice }).reason_code).toBe("no_permit");
      expect(decider.decide({ action: "run.start", run_id: "run_7", run_context: { actor: { type: "user", id: "bob" } } }).reason_code).toBe("policy:run-7");
    }
    expect(decider.stats()).toMatchObject({ misses: 2, hits: 4 });
  });

  it("keeps no more entries than its capacity, and a caller cannot change a cached outcome", async () => {
    const decider = createDecider(await loadPolicyFile(EXAMPLE), [], { decisionCacheSize: 2 });
    const first = decider.decide(execute(1, { side_effect_class: "read" }));
    (first.extensions!["nodefabric.policies"] as string[]).push("tampered");
    first.reason_code = "tampered";
    expect(decider.decide(execute(2, { side_effect_class: "read" })).extensions).toEqual({ "nodefabric.policies": ["allow-read-execute"] });
    decider.decide(execute(3, { side_effect_class: "write" }));
    decider.decide(execute(4, { side_effect_class: "irreversible" }));
    expect(decider.stats()).toMatchObject({ entries: 2, capacity: 2, hits: 1, misses: 3 });
    // "read" was the least recently used, so it went.
    decider.decide(execute(5, { side_effect_class: "read" }));
    expect(decider.stats()).toMatchObject({ entries: 2, hits: 1, misses: 4 });
    const off = createDecider(await loadPolicyFile(EXAMPLE), [], { decisionCacheSize: 0 });
    off.decide(execute(1, { side_effect_class: "read" }));
    expect(off.stats()).toEqual({ status: "off (turned off by the decisionCacheSize option)", hits: 0, misses: 0, entries: 0, capacity: 0 });
  });

  it("turns itself off for policies whose reads it cannot bound, and still decides correctly", async () => {
    const unbounded: Array<[string, string]> = [
      ["permit(principal, action, resource) when { context == {} };", "uses context as a whole value"],
      ["permit(principal, action, resource) when { {a: context}.a.flag };", "reads attributes of another entity or a computed value"],
      ["permit(principal, action, resource) when { {a: context} == {a: {}} };", "uses context as a whole value"],
      ["permit(principal, action, resource) when { context is NodeFabric::X };", "uses context as a whole value"],
      ["permit(principal, action, resource) when { principal.manager.department == \"x\" };", "reads attributes of another entity or a computed value"],
      ["permit(principal, action, resource) when { NodeFabric::User::\"alice\".tenant_id == \"acme\" };", "reads attributes of another entity or a computed value"],
      ["permit(principal, action, resource) when { principal has manager.department };", "reads attributes of another entity or a computed value"],
      ["permit(principal, action, resource) when { action.risky };", "reads attributes of action"],
      ["permit(principal, action, resource) when { (if context.a then principal else resource).tenant_id == \"x\" };", "reads attributes of another entity or a computed value"],
      ["permit(principal, action, resource) when { NodeFabric::User::\"alice\".hasTag(\"x\") };", "reads tags of another entity or a computed value"],
    ];
    for (const [text, reason] of unbounded) {
      const set = loadPolicyText(`@id("p")\n${text}\n`, "inline");
      expect(set.reads, text).toEqual({ bounded: false, reason: `policy p ${reason}` });
    }
    const bounded: Array<[string, string[], string[], string[]]> = [
      ['permit(principal in NodeFabric::Group::"g", action in [NodeFabric::Action::"a"], resource is NodeFabric::NodeType);', [], [], []],
      ['permit(principal, action, resource) when { context has a.b && context.c.d.e like "x*" && [1].contains(context.f) };', ["a", "c", "f"], [], []],
      ['permit(principal, action, resource) when { principal is NodeFabric::User && principal has tenant_id && resource.version == "1" };', [], ["tenant_id"], ["version"]],
      ['permit(principal, action, resource) when { decimal(context.m).lessThan(decimal("1.0")) && principal.getTag("k") == 1 && context.x in principal };', ["m", "x"], [], []],
    ];
    for (const [text, context, principal, resource] of bounded) {
      const reads = loadPolicyText(text, "inline").reads;
      expect(reads.bounded, text).toBe(true);
      if (!reads.bounded) continue;
      expect([[...reads.context].sort(), [...reads.principal].sort(), [...reads.resource].sort()], text).toEqual([context, principal, resource]);
    }

    const file = writeTmp(
      "unbounded.cedar",
      `
@id("allow-read")
permit(principal, action, resource) when { context has side_effect_class && context.side_effect_class == "read" };

@id("whole-context")
forbid(principal, action, resource) when { context has flag && {c: context}.c.flag == true };
`,
    );
    const app = await buildPdp({ policyFile: file });
    const base = await start(app);
    try {
      const h = await call(base, "GET", "/v1/health");
      expect(h.body.checks[0].details).toEqual({ source: "unbounded.cedar", policies: 2, decision_cache: "off (policy whole-context reads attributes of another entity or a computed value)" });
      const ask = (context: Record<string, unknown>) => decide(base, { action: "node.run.execute", constraints: { gates: { side_effect_class: "read" } }, context });
      expect((await ask({})).reason_code).toBe("policy:allow-read");
      expect((await ask({ flag: true })).reason_code).toBe("denied_by:whole-context");
      expect((await ask({ flag: false })).reason_code).toBe("policy:allow-read");
      expect((await ask({ flag: true, other: 1 })).reason_code).toBe("denied_by:whole-context");
    } finally {
      await app.close();
    }
  });

  it("decides exactly as without the cache, over many varied requests", async () => {
    const mapping = loadPolicyText(
      `
@id("tenant-attribute")
permit(principal is NodeFabric::User, action, resource) when { principal has tenant_id && principal.tenant_id == context.tenant_id };
@id("node-type-version")
permit(principal, action, resource is NodeFabric::NodeType) when { resource.version == "1.2.0" && context.node_type_id == "weather.current" };
@id("forbid-blocked")
forbid(principal in NodeFabric::Group::"blocked", action, resource);
@id("finance")
@require_approval("true")
permit(principal in NodeFabric::Group::"finance", action, resource) when { principal.department == "finance" && context.amount.greaterThan(decimal("10.5")) };
@id("needs-key")
forbid(principal, action == NodeFabric::Action::"pay", resource) when { context.limit < 5 };
`,
      "inline",
    );
    const entities = [
      { uid: { type: "NodeFabric::User", id: "mallory" }, attrs: {}, parents: [{ type: "NodeFabric::Group", id: "blocked" }] },
      { uid: { type: "NodeFabric::User", id: "alice" }, attrs: { department: "finance", tenant_id: "file-value" }, parents: [{ type: "NodeFabric::Group", id: "finance" }] },
      { uid: { type: "NodeFabric::NodeType", id: "alice" }, attrs: { version: "0.0.1" }, parents: [{ type: "NodeFabric::Group", id: "finance" }] },
    ];
    const literals = loadPolicyText(
      `
@id("literal-in")
forbid(principal, action, resource) when { NodeFabric::User::"mallory" in NodeFabric::Group::"blocked" && context has block && context.block };
@id("alice-literal")
permit(principal, action, resource) when { NodeFabric::NodeType::"alice" in NodeFabric::Group::"finance" || context has open };
`,
      "inline",
    );
    expect(literals.reads.bounded && literals.reads.vars.size).toBe(0);
    for (const set of [mapping, literals, await loadPolicyFile(EXAMPLE), defaultPolicySet()]) {
      const cached = createDecider(set, entities);
      const plain = createDecider(set, entities, { decisionCacheSize: 0 });
      expect(cached.stats().status).toBe("on");
      let seed = 7;
      const pick = <T,>(xs: T[]): T => xs[(seed = (seed * 48271) % 2147483647) % xs.length]!;
      for (let i = 0; i < 400; i++) {
        const req: any = {
          action: pick(["run.start", "node.run.execute", "pay"]),
          run_id: pick([undefined, "run_1", "run_2", `run_${i}`]),
          node_run_id: pick([undefined, `nr_${i}`]),
          node_type_ref: pick([undefined, { node_type_id: "weather.current", version: pick(["1.0.0", "1.2.0"]) }, { node_type_id: "alice", version: "1.2.0" }]),
          run_context: { tenant_id: pick([undefined, "acme", "file-value", "tenant-suspended"]), actor: pick([undefined, { type: "user", id: pick(["alice", "mallory", "bob"]) }, { type: "node_type", id: "alice" }]) },
          constraints: { gates: { side_effect_class: pick([undefined, "read", "write", "irreversible"]), require_approval: pick([true, false]) }, budgets: pick([{}, { max_cost: pick([50, 100, 100.5]) }]) },
          context: { tenant_id: "ignored", amount: pick([undefined, 10, 10.75, "x"]), limit: pick([undefined, 3, 9]), block: pick([undefined, true, false]), open: pick([undefined, 1]), noise: i },
        };
        for (const k of Object.keys(req)) if (req[k] === undefined) delete req[k];
        // The same request again with only unread parts changed: always a hit, and still Cedar's own answer.
        const again = { ...req, node_run_id: `nr_again_${i}`, context: { ...req.context, noise: -i, more: [i] } };
        for (const r of [req, again]) expect(stripApproval(cached.decide(r)), JSON.stringify(r)).toEqual(stripApproval(plain.decide(r)));
      }
      expect(cached.stats().hits).toBeGreaterThanOrEqual(400);
      expect(cached.stats().hits + cached.stats().misses).toBe(800);
    }
  });
});

describe("the built-in policy, decided without Cedar", () => {
  /** The built-in policy's text loaded through Cedar, as any policy file is: its decider asks Cedar every time. */
  const throughCedar = () => ({ ...loadPolicyText(DEFAULT_POLICY_TEXT, "default"), source: "default" });
  const stripApproval = (d: any) => ({ ...d, approval_ref: d.approval_ref ? "<approval>" : undefined });

  it("is the set Cedar makes of DEFAULT_POLICY_TEXT, marked as allowing everything", () => {
    const { allowsAll, ...built } = defaultPolicySet();
    expect(allowsAll).toBe(true);
    expect(built).toEqual(throughCedar());
  });

  it("answers what Cedar answers, on requests of every shape, with and without the cache and an entities file", () => {
    const entities = [
      { uid: { type: "NodeFabric::User", id: "alice" }, attrs: { department: "finance" }, parents: [{ type: "NodeFabric::Group", id: "finance" }] },
      { uid: { type: "NodeFabric::NodeType", id: "weather.current" }, attrs: { version: "0.0.1" }, parents: [] },
    ];
    let nested: any = { leaf: true };
    for (let i = 0; i < 40; i++) nested = { down: nested, list: [i, String(i)] };
    // Values Cedar cannot hold (dropped by the mapping), keys it reserves, lone surrogates, deep and mixed values.
    const odd: any[] = [
      { action: "run.start" },
      { action: "node.run.execute", run_id: "run_\ud800", node_run_id: "nr_1", node_type_ref: { node_type_id: "weather.current", version: "1.0.0" } },
      { action: "x\udfff", run_context: { actor: { type: "ci-bot\ud83d", id: "\ud83d" }, identity: { sub: "\udc00" }, tenant_id: "t\ud800" } },
      { action: "pay", context: { __entity: { type: "NodeFabric::User", id: "alice" }, __extn: { fn: "ip", arg: "bad" }, nested } },
      { action: "pay", context: { big: 2 ** 60, small: -(2 ** 60), frac: 0.1, huge: 1e300, nul: null, list: [1, "a", true, [null], { b: 1.5 }], s: "\ud800x" } },
      { action: "Action", run_context: { actor: { type: "Action", id: "alice" }, tenant_id: "acme" }, constraints: { budgets: { max_cost: 1e20, max_runs: 1.5, max_depth: 3 }, gates: { side_effect_class: "irreversible", require_approval: true } } },
      { action: "run.start", run_context: { actor: { type: "user", id: "alice" } }, node_type_ref: { node_type_id: "alice", version: "1.0.0" } },
      { action: "run.start", run_context: { actor: { type: "node_type", id: "weather.current" } }, node_type_ref: { node_type_id: "weather.current", version: "2.0.0" } },
    ];
    let seed = 11;
    const pick = <T,>(xs: T[]): T => xs[(seed = (seed * 48271) % 2147483647) % xs.length]!;
    const requests = [...odd];
    for (let i = 0; i < 200; i++) {
      const req: any = {
        action: pick(["run.start", "node.run.create", "node.run.execute", "pay"]),
        run_id: pick([undefined, `run_${i}`]),
        node_run_id: pick([undefined, `nr_${i}`]),
        node_type_ref: pick([undefined, { node_type_id: "weather.current", version: "1.2.0" }]),
        run_context: { tenant_id: pick([undefined, "acme"]), actor: pick([undefined, { type: "user", id: pick(["alice", "bob"]) }]) },
        constraints: { gates: { side_effect_class: pick([undefined, "read", "write"]), require_approval: pick([true, false]) }, budgets: pick([{}, { max_cost: 10.25 }]) },
        context: pick([undefined, { amount: pick([1, 2.5, "x", null]), odd: pick([odd[3].context, odd[4].context]) }]),
      };
      for (const k of Object.keys(req)) if (req[k] === undefined) delete req[k];
      requests.push(req);
    }
    for (const files of [[], entities]) {
      for (const options of [{}, { decisionCacheSize: 0 }]) {
        const builtIn = createDecider(defaultPolicySet(), files, options);
        const cedar = createDecider(throughCedar(), files, options);
        for (const r of requests) expect(stripApproval(builtIn.decide(r)), JSON.stringify(r)).toEqual(stripApproval(cedar.decide(r)));
        expect(builtIn.stats()).toEqual(cedar.stats());
      }
    }
  });
});
