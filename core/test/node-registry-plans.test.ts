import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { request } from "undici";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";

const isNodeType = validatorFor("node_type");
const isEnvelope = validatorFor("error_envelope");
const P = "/node_type/extensions/nodefabric.plan";

interface Res {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function call(base: string, method: "GET" | "POST", urlPath: string, body?: unknown): Promise<Res> {
  const res = await request(base + urlPath, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? {} : { "content-type": "application/json" },
  });
  const text = await res.body.text();
  const parsed = text ? JSON.parse(text) : undefined;
  if (res.statusCode >= 400) expect(isEnvelope(parsed), `${method} ${urlPath} answered ${res.statusCode} without an ErrorEnvelope: ${text}`).toBe(true);
  return { status: res.statusCode, body: parsed };
}

function tripPlan(): Record<string, unknown> {
  return {
    steps: [
      { id: "weather", node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, inputs: { city: "{% inputs.city %}" } },
      {
        id: "each",
        node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" },
        for_each: "{% inputs.items %}",
        inputs: { v: "{% item %}" },
        when: "{% inputs.go %}",
        after: ["weather"],
      },
    ],
    outputs: { temp: "{% steps.weather.outputs.echo.city %}", all: "{% steps.each.outputs %}" },
  };
}

function composite(node_type_id: string, plan: unknown, kind: "atomic" | "composite" = "composite") {
  return {
    node_type_id,
    version: "1.0.0",
    kind,
    description: "a declarative composite",
    input_schema: { type: "object", properties: { city: { type: "string" } } },
    extensions: { "nodefabric.plan": plan },
  };
}

describe("node registry: declarative plans at publish", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    const dbPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "nf-")), "registry.db");
    app = await buildNodeRegistry({ logger: false, dbPath });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const addr = app.server.address();
    base = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  });
  afterAll(async () => {
    await app.close();
  });

  it("publishes a composite whose plan is valid, and serves it back unchanged", async () => {
    const nodeType = composite("trip.plan", tripPlan());
    const published = await call(base, "POST", "/v1/node-types", { node_type: nodeType });
    expect(published.status).toBe(200);
    expect(isNodeType(published.body)).toBe(true);
    expect(published.body).toEqual(nodeType);
    const fetched = await call(base, "GET", "/v1/node-types/trip.plan");
    expect(fetched.status).toBe(200);
    expect(fetched.body.extensions["nodefabric.plan"]).toEqual(tripPlan());
  });

  it("publishes the example of docs/plans.md", async () => {
    const doc = fs.readFileSync(path.join(import.meta.dirname, "../../docs/plans.md"), "utf8");
    const example = /`trip\.json`:\n\n```json\n([\s\S]*?)\n```/.exec(doc);
    expect(example, "docs/plans.md has a trip.json example").not.toBeNull();
    const res = await call(base, "POST", "/v1/node-types", JSON.parse(example![1]!));
    expect(res.status).toBe(200);
    expect(isNodeType(res.body)).toBe(true);
    expect(Object.keys(res.body.extensions["nodefabric.plan"].steps)).toHaveLength(3);
  });

  it("refuses a plan with problems with 400 invalid_request listing each one, and stores nothing", async () => {
    const plan = tripPlan();
    const steps = plan.steps as Array<Record<string, unknown>>;
    steps[1]!.inputs = { v: "{% item + %}" };
    steps[1]!.after = ["nowhere"];
    steps.push({ id: "weather", node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, inputs: { c: "{% steps.ghost.outputs %}" } });
    const res = await call(base, "POST", "/v1/node-types", { node_type: composite("broken.plan", plan) });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details.errors).toEqual([
      { path: `${P}/steps/2/id`, message: '"weather" is already the id of step 0; step ids must be unique' },
      { path: `${P}/steps/1/inputs/v`, message: "is not a valid JSONata expression: Unexpected end of expression (JSONata S0207 at character 10)" },
      { path: `${P}/steps/1/after/0`, message: 'names no step of this plan ("nowhere")' },
      { path: `${P}/steps/2/inputs/c`, message: 'refers to steps.ghost (at character 14), but the plan has no step "ghost"' },
    ]);
    expect((await call(base, "GET", "/v1/node-types/broken.plan")).status).toBe(404);
  });

  it("refuses a plan that is not a plan, and a cycle, naming its steps", async () => {
    const notPlan = await call(base, "POST", "/v1/node-types", { node_type: composite("odd.plan", ["steps"]) });
    expect(notPlan.status).toBe(400);
    expect(notPlan.body.error.details.errors).toEqual([{ path: P, message: "must be an object with steps and outputs" }]);

    const ref = { node_type_id: "demo.echo", version: "1.0.0" };
    const loop = {
      steps: [
        { id: "a", node_type_ref: ref, inputs: { x: "{% steps.b.outputs %}" } },
        { id: "b", node_type_ref: ref, inputs: {}, after: ["a"] },
      ],
      outputs: {},
    };
    const cyclic = await call(base, "POST", "/v1/node-types", { node_type: composite("loop.plan", loop) });
    expect(cyclic.status).toBe(400);
    expect(cyclic.body.error.details.errors).toEqual([
      { path: `${P}/steps/0`, message: 'steps "a", "b" wait for each other in a cycle: a → b → a (each waits for the next, through steps.<id> references or after)' },
    ]);
    for (const id of ["odd.plan", "loop.plan"]) expect((await call(base, "GET", `/v1/node-types/${id}`)).status).toBe(404);
  });

  it("refuses an atomic node type that carries a plan", async () => {
    const res = await call(base, "POST", "/v1/node-types", { node_type: composite("atomic.with.plan", tripPlan(), "atomic") });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details.errors).toEqual([
      { path: "/node_type/kind", message: 'must be "composite" for a node type that carries extensions["nodefabric.plan"]' },
    ]);
    expect((await call(base, "GET", "/v1/node-types/atomic.with.plan")).status).toBe(404);
  });

  it("leaves node types without a plan as they were", async () => {
    const plain = { node_type_id: "code.composite", version: "1.0.0", kind: "composite", extensions: { "nodefabric.other": { plan: "no" } } };
    const res = await call(base, "POST", "/v1/node-types", { node_type: plain });
    expect(res.status).toBe(200);
    expect(isNodeType(res.body)).toBe(true);
    expect(res.body).toEqual(plain);
  });
});
