// POST /v1/node-types:batch (an extension of the Node Registry): many NodeType versions in one request, each checked
// as a single publish is, all or nothing; and RegistryClient.publishMany, which falls back to one POST per NodeType
// against a registry that has no batch endpoint.
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";
import { TokenVerifier } from "@nodefabric/core";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";
import { RegistryClient } from "../src/clients/registry-client.js";
import { FabricError } from "../src/http/errors.js";
import { checkedCall as call } from "./support/checked-call.js";
import { startTestIssuer, type TestIssuer } from "./support/test-issuer.js";

const isNodeType = validatorFor("node_type");

function tmpDb(): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), "nf-batch-")), "registry.db");
}

async function start(options: Partial<Parameters<typeof buildNodeRegistry>[0]> = {}, before?: (app: FastifyInstance) => void): Promise<{ app: FastifyInstance; base: string }> {
  const app = await buildNodeRegistry({ logger: false, dbPath: tmpDb(), ...options });
  before?.(app);
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as { port: number };
  return { app, base: `http://127.0.0.1:${port}` };
}

/** A NodeType as an API importer makes it: an object input with a few properties and a $defs entry. */
function operation(name: string, version = "1.0.0", extra: Record<string, unknown> = {}) {
  return {
    node_type_id: `petstore.${name}`,
    version,
    kind: "atomic",
    description: `The ${name} operation of the pet store`,
    input_schema: {
      type: "object",
      $defs: { Id: { type: "string", pattern: "^[a-z0-9-]{1,36}$" } },
      properties: { id: { $ref: "#/$defs/Id" }, limit: { type: "integer", minimum: 1, maximum: 100 } },
      additionalProperties: false,
    },
    output_schema: { type: "object", properties: { status: { type: "integer" }, body: {} }, required: ["status"] },
    ...extra,
  };
}

describe("POST /v1/node-types:batch", () => {
  let app: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    ({ app, base } = await start());
  });
  afterAll(async () => {
    await app.close();
  });

  const stored = async (id: string, version = "1.0.0") => (await call(base, "GET", `/v1/node-types/${id}?version=${version}`)).status === 200;

  it("publishes every item and answers 200 with them as stored, in the order given", async () => {
    const items = [operation("listPets"), operation("getPet"), operation("deletePet")];
    const res = await call(base, "POST", "/v1/node-types:batch", { node_types: items, extensions: { "acme.source": "openapi" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ node_types: items });
    for (const nt of res.body.node_types) expect(isNodeType(nt)).toBe(true);
    const one = await call(base, "GET", "/v1/node-types/petstore.getPet");
    expect(one.body).toEqual(items[1]);
  });

  it("answers 200 again for identical content (in any key order) and publishes a repeat within a batch once", async () => {
    const again = Object.fromEntries(Object.entries(operation("listPets")).reverse());
    const res = await call(base, "POST", "/v1/node-types:batch", { node_types: [again, operation("addPet"), operation("addPet")] });
    expect(res.status).toBe(200);
    expect(res.body.node_types).toEqual([operation("listPets"), operation("addPet"), operation("addPet")]);
    expect((await call(base, "GET", "/v1/node-types/petstore.addPet/versions")).body).toEqual(["1.0.0"]);
  });

  it("refuses a batch with one schema that would not compile with 400 pointing into that item, and stores none of it", async () => {
    const res = await call(base, "POST", "/v1/node-types:batch", {
      node_types: [operation("a1"), operation("a2", "1.0.0", { input_schema: { type: "objekt" } }), operation("a3", "1.0.0", { output_schema: { pattern: "[" } })],
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    const errors = res.body.error.details.errors as Array<{ path: string; message: string }>;
    expect(errors.map((e) => e.path)).toEqual(["/node_types/1/input_schema", "/node_types/2/output_schema"]);
    expect(errors[0]!.message).toMatch(/^is not a compilable JSON Schema \(draft 2020-12\): schema is invalid: data\/type must be/);
    expect(errors[1]!.message).toMatch(/pattern "\[" at \/pattern is not a valid regular expression with the u flag/);
    for (const id of ["petstore.a1", "petstore.a2", "petstore.a3"]) expect(await stored(id)).toBe(false);
  });

  it("refuses a batch whose item breaks the NodeType schema, or whose version is not safe as an id, and stores none of it", async () => {
    const { kind: _kind, ...noKind } = operation("b2");
    const bad = await call(base, "POST", "/v1/node-types:batch", { node_types: [operation("b1"), noKind] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.errors).toContainEqual(expect.objectContaining({ path: "/node_types/1/kind" }));
    const version = await call(base, "POST", "/v1/node-types:batch", { node_types: [operation("b1"), operation("b3", "1 0")] });
    expect(version.status).toBe(400);
    expect(version.body.error.details.errors).toEqual([expect.objectContaining({ path: "/node_types/1/version" })]);
    expect(await stored("petstore.b1")).toBe(false);
  });

  it("refuses the same (id, version) twice with different content within a batch", async () => {
    const res = await call(base, "POST", "/v1/node-types:batch", { node_types: [operation("c1"), operation("c1", "1.0.0", { description: "other" })] });
    expect(res.status).toBe(400);
    expect(res.body.error.details.errors).toEqual([{ path: "/node_types/1", message: "is petstore.c1@1.0.0 again, with content different from /node_types/0" }]);
    expect(await stored("petstore.c1")).toBe(false);
  });

  it("refuses a batch with a version published with other content with 409 naming each conflict, and stores none of it", async () => {
    const res = await call(base, "POST", "/v1/node-types:batch", {
      node_types: [operation("d1"), operation("getPet", "1.0.0", { description: "changed" }), operation("listPets", "1.0.0", { description: "changed" })],
    });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("node_type_version_conflict");
    expect(res.body.error.details).toEqual({
      conflicts: [
        { index: 1, node_type_id: "petstore.getPet", version: "1.0.0" },
        { index: 2, node_type_id: "petstore.listPets", version: "1.0.0" },
      ],
    });
    expect(res.body.error.message).toMatch(/none of the batch was published/);
    expect(await stored("petstore.d1")).toBe(false);
    expect((await call(base, "GET", "/v1/node-types/petstore.getPet")).body.description).toBe("The getPet operation of the pet store");
  });

  it("refuses an empty batch, one over 500 items, and a body that is not a batch, with 400", async () => {
    const empty = await call(base, "POST", "/v1/node-types:batch", { node_types: [] });
    expect(empty.status).toBe(400);
    expect(empty.body.error.details.errors[0].path).toBe("/node_types");
    const many = Array.from({ length: 501 }, (_, i) => ({ node_type_id: `many.n${i}`, version: "1.0.0", kind: "atomic" }));
    const tooMany = await call(base, "POST", "/v1/node-types:batch", { node_types: many });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.details.errors[0].path).toBe("/node_types");
    expect(await stored("many.n0")).toBe(false);
    const single = await call(base, "POST", "/v1/node-types:batch", { node_type: operation("e1") });
    expect(single.status).toBe(400);
    expect((await call(base, "POST", "/v1/node-types:batch", "[")).status).toBe(400);
  });

  it("takes 500 items of a few KB in one request", async () => {
    const items = Array.from({ length: 500 }, (_, i) => ({ node_type_id: `bulk.op${i}`, version: "1.0.0", kind: "atomic", input_schema: { type: "object", properties: { q: { type: "string" } } } }));
    const res = await call(base, "POST", "/v1/node-types:batch", { node_types: items });
    expect(res.status).toBe(200);
    expect(res.body.node_types).toHaveLength(500);
    const page = await call(base, "GET", "/v1/node-types?q=bulk.&limit=1000");
    expect(page.body).toHaveLength(500);
  });
});

describe("POST /v1/node-types:batch with authentication", () => {
  let idp: TestIssuer;
  let registry: { app: FastifyInstance; base: string };
  const AUD = "nodefabric-node-registry";
  beforeAll(async () => {
    idp = await startTestIssuer();
    registry = await start({ auth: { mode: "required", verifier: new TokenVerifier({ keys: { jwksUrl: idp.jwksUrl }, issuer: idp.issuer }) } });
  });
  afterAll(async () => {
    await registry?.app.close();
    await idp?.close();
  });

  it("needs node-types:write: 401 without a token, 403 with node-types:read only, 200 with node-types:write", async () => {
    const body = { node_types: [operation("auth1")] };
    const none = await call(registry.base, "POST", "/v1/node-types:batch", body);
    expect(none.status).toBe(401);
    const reader = await call(registry.base, "POST", "/v1/node-types:batch", body, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "node-types:read" })}` });
    expect(reader.status).toBe(403);
    expect(reader.body.error.code).toBe("permission_denied");
    const writer = await call(registry.base, "POST", "/v1/node-types:batch", body, { authorization: `Bearer ${await idp.mint({ aud: AUD, scope: "node-types:write" })}` });
    expect(writer.status).toBe(200);
  });
});

describe("RegistryClient.publishMany", () => {
  let current: { app: FastifyInstance; base: string };
  let older: { app: FastifyInstance; base: string };
  const batchCalls: string[] = [];
  beforeAll(async () => {
    current = await start();
    // A registry from before the batch endpoint: the same service, with that route answering 404 as an unknown route does.
    older = await start({}, (app) => {
      app.addHook("onRequest", async (req, reply) => {
        if (req.url.startsWith("/v1/node-types:batch")) {
          batchCalls.push(req.url);
          await reply.code(404).send({ error: { code: "route_not_found", message: `no route ${req.method} ${req.url}` } });
        }
      });
    });
  });
  afterAll(async () => {
    await current?.app.close();
    await older?.app.close();
  });

  it("publishes a batch in one request and answers the stored NodeTypes", async () => {
    const client = new RegistryClient(current.base);
    try {
      const out = await client.publishMany([operation("m1"), operation("m2")]);
      expect(out.map((t) => t.node_type_id)).toEqual(["petstore.m1", "petstore.m2"]);
      await expect(client.publishMany([operation("m3"), operation("m1", "1.0.0", { description: "x" })])).rejects.toMatchObject({
        code: "node_type_version_conflict",
        details: { conflicts: [{ index: 1, node_type_id: "petstore.m1", version: "1.0.0" }] },
      });
      await expect(client.get("petstore.m3")).rejects.toBeInstanceOf(FabricError);
    } finally {
      await client.close();
    }
  });

  it("sends more than 500 in several batches, and halves a batch the registry finds too large (413)", async () => {
    const sizes: number[] = [];
    const small = await start({ limits: { maxBodyBytes: 4096 } }, (app) =>
      app.addHook("onResponse", async (req, reply) => {
        if (req.url === "/v1/node-types:batch") sizes.push(reply.statusCode);
      }),
    );
    const client = new RegistryClient(small.base);
    try {
      const many = Array.from({ length: 12 }, (_, i) => operation(`big${i}`));
      const out = await client.publishMany(many as never);
      expect(out.map((t) => t.node_type_id)).toEqual(many.map((t) => t.node_type_id));
      expect(sizes[0]).toBe(413);
      expect(sizes.filter((s) => s === 200).length).toBeGreaterThan(1);
      const bulk = Array.from({ length: 1001 }, (_, i) => ({ node_type_id: `bulk2.op${i}`, version: "1.0.0", kind: "atomic" as const }));
      const plain = new RegistryClient(current.base);
      try {
        expect(await plain.publishMany(bulk)).toHaveLength(1001);
        expect((await plain.listPage({ q: "bulk2.", limit: 1000 })).items).toHaveLength(1000);
      } finally {
        await plain.close();
      }
    } finally {
      await client.close();
      await small.app.close();
    }
  });

  it("falls back to one POST /v1/node-types per NodeType when the registry has no batch endpoint", async () => {
    const client = new RegistryClient(older.base);
    try {
      const out = await client.publishMany([operation("o1"), operation("o2")]);
      expect(out.map((t) => t.node_type_id)).toEqual(["petstore.o1", "petstore.o2"]);
      expect(batchCalls).toHaveLength(1);
      expect((await client.get("petstore.o2")).version).toBe("1.0.0");
    } finally {
      await client.close();
    }
  });
});
