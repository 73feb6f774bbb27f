import { readFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScaffoldError } from "../src/errors.js";
import { loadOpenApiDocument } from "../src/openapi-document.js";
import { mapOpenApi, openApiToHandlers, type HttpNodeType, type OpenApiDocument, type OpenApiMapping } from "../src/openapi-to-handlers.js";
import { renderPackage } from "../src/scaffold.js";
import { linkGeneratedPackage } from "./generated-package-runner.js";

const fixtureDir = fileURLToPath(new URL("./fixtures/", import.meta.url));
const fixturePath = path.join(fixtureDir, "petstore.yaml");

let petstore: OpenApiDocument;
let mapping: OpenApiMapping;
const byId = (id: string): HttpNodeType => mapping.nodeTypes.find((n) => n.nodeTypeId === id)!;

beforeAll(async () => {
  ({ document: petstore } = await loadOpenApiDocument("petstore.yaml", fixtureDir));
  mapping = mapOpenApi(petstore, { nodeTypePrefix: "petstore" });
});

/** A one-operation document around `operation` at `path`. */
function documentWith(paths: Record<string, unknown>, openapi = "3.0.3"): OpenApiDocument {
  return { openapi, info: { title: "Test API", version: "1" }, servers: [{ url: "https://api.test" }], paths } as OpenApiDocument;
}

const ok = { "200": { description: "ok", content: { "application/json": { schema: { type: "object" } } } } };

describe("node type ids", () => {
  it("are <prefix>.<operationId>, or <method>-<path> without one, in document order", () => {
    expect(mapping.nodeTypes.map((n) => n.nodeTypeId)).toEqual([
      "petstore.listPets",
      "petstore.createPet",
      "petstore.getPet",
      "petstore.deletePet",
      "petstore.get-store-inventory",
    ]);
    expect(mapping.nodeTypes.map((n) => `${n.method} ${n.path}`)).toEqual([
      "GET /pets",
      "POST /pets",
      "GET /pets/{petId}",
      "DELETE /pets/{petId}",
      "GET /store/inventory",
    ]);
  });

  it("replace characters a node type id cannot hold", () => {
    const m = mapOpenApi(documentWith({ "/a": { get: { operationId: "pets/list all", responses: ok } }, "/b/{id}/c": { post: { responses: ok } } }), { nodeTypePrefix: "t" });
    expect(m.nodeTypes.map((n) => n.nodeTypeId)).toEqual(["t.pets-list-all", "t.post-b-id-c"]);
  });

  it("must be distinct: a clash names both operations", () => {
    const clash = documentWith({ "/pets": { get: { operationId: "list pets", responses: ok } }, "/animals": { get: { operationId: "list-pets", responses: ok } } });
    expect(() => mapOpenApi(clash, { nodeTypePrefix: "t" })).toThrow(ScaffoldError);
    expect(() => mapOpenApi(clash, { nodeTypePrefix: "t" })).toThrow("GET /pets and GET /animals both give the node type id t.list-pets");
  });
});

describe("side effect classes", () => {
  it("follow the method: reads are read, POST/PUT/PATCH write, DELETE irreversible", () => {
    expect(Object.fromEntries(mapping.nodeTypes.map((n) => [n.operationId, n.sideEffectClass]))).toEqual({
      listPets: "read",
      createPet: "write",
      getPet: "read",
      deletePet: "irreversible",
      "get-store-inventory": "read",
    });
    const m = mapOpenApi(documentWith({ "/x": { put: { operationId: "put", responses: ok }, patch: { operationId: "patch", responses: ok }, head: { operationId: "head", responses: ok } } }), { nodeTypePrefix: "t" });
    expect(m.nodeTypes.map((n) => n.sideEffectClass)).toEqual(["read", "write", "write"]);
  });
});

describe("input schemas", () => {
  it("have one property per query parameter, none required unless the document says so", () => {
    expect(byId("petstore.listPets").inputSchema).toEqual({
      type: "object",
      properties: {
        limit: { type: "integer", minimum: 1, maximum: 100, default: 20, description: "At most this many pets." },
        species: { type: "string", enum: ["dog", "cat", "bird", "rabbit"] },
      },
      additionalProperties: false,
    });
  });

  it("require path parameters, inherit path-level ones, and take header parameters", () => {
    const getPet = byId("petstore.getPet");
    expect(getPet.inputSchema.required).toEqual(["petId"]);
    expect(getPet.inputSchema.properties).toMatchObject({
      petId: { type: "integer", format: "int64", minimum: 1 },
      "X-Request-Id": { type: "string", description: "Echoed in the shop's logs.", examples: ["req-0001"] },
    });
    expect(getPet.parameters).toEqual([
      { input: "petId", name: "petId", in: "path" },
      { input: "X-Request-Id", name: "X-Request-Id", in: "header" },
    ]);
  });

  it("take the JSON request body as `body`, without the properties the server sets (readOnly)", () => {
    const createPet = byId("petstore.createPet");
    expect(createPet.jsonBody).toBe(true);
    expect(createPet.inputSchema.required).toEqual(["body"]);
    const body = (createPet.inputSchema.properties as Record<string, any>).body;
    expect(Object.keys(body.properties)).toEqual(["name", "species", "birth_date", "tags", "status"]);
    expect(body.required).toEqual(["name", "species"]);
    // OpenAPI 3.0 `nullable` becomes a JSON Schema type list.
    expect(body.properties.birth_date).toEqual({ type: ["string", "null"], format: "date" });
  });

  it("key a parameter by <in>_<name> when its name is taken", () => {
    const m = mapOpenApi(
      documentWith({
        "/items/{id}": {
          post: {
            operationId: "update",
            parameters: [
              { name: "id", in: "path", required: true, schema: { type: "string" } },
              { name: "id", in: "query", schema: { type: "string" } },
              { name: "body", in: "query", schema: { type: "string" } },
              { name: "session", in: "cookie", schema: { type: "string" } },
              { name: "Accept", in: "header", schema: { type: "string" } },
            ],
            requestBody: { content: { "application/json": { schema: { type: "object" } } } },
            responses: ok,
          },
        },
      }),
      { nodeTypePrefix: "t" },
    );
    expect(m.nodeTypes[0].parameters).toEqual([
      { input: "id", name: "id", in: "path" },
      { input: "query_id", name: "id", in: "query" },
      { input: "query_body", name: "body", in: "query" },
    ]);
    expect(Object.keys(m.nodeTypes[0].inputSchema.properties as object)).toEqual(["id", "query_id", "query_body", "body"]);
    expect(m.nodeTypes[0].inputSchema.required).toEqual(["id"]);
  });
});

describe("output schemas", () => {
  it("are the 2xx JSON answer when it is an object, without write-only properties", () => {
    const getPet = byId("petstore.getPet");
    expect(getPet.outputs).toBe("object");
    expect(getPet.outputSchema).toMatchObject({ type: "object", required: ["id", "name", "species"], properties: { id: { type: "integer", readOnly: true } } });
    expect(byId("petstore.createPet").example.status).toBe(201);

    const m = mapOpenApi(
      documentWith({
        "/login": {
          post: {
            operationId: "login",
            requestBody: { required: true, content: { "application/json": { schema: { type: "object", properties: { user: { type: "string" }, password: { type: "string", writeOnly: true } } } } } },
            responses: { "200": { description: "ok", content: { "application/json": { schema: { type: "object", properties: { user: { type: "string" }, password: { type: "string", writeOnly: true } } } } } } },
          },
        },
      }),
      { nodeTypePrefix: "t" },
    );
    expect(Object.keys((m.nodeTypes[0].outputSchema.properties as object) ?? {})).toEqual(["user"]);
    expect(Object.keys((m.nodeTypes[0].inputSchema.properties as any).body.properties)).toEqual(["user", "password"]);
  });

  it("wrap an answer that is not an object as { result }", () => {
    const listPets = byId("petstore.listPets");
    expect(listPets.outputs).toBe("result");
    expect(listPets.outputSchema).toMatchObject({
      type: "object",
      properties: { result: { type: "array", items: { type: "object", required: ["id", "name", "species"] } } },
      required: ["result"],
      additionalProperties: false,
    });
    expect(listPets.example.outputs).toEqual({ result: listPets.example.responseBody });
  });

  it("are any object, with outputs {}, when no 2xx answer is JSON", () => {
    const deletePet = byId("petstore.deletePet");
    expect(deletePet.outputs).toBe("none");
    expect(deletePet.outputSchema).toEqual({ type: "object" });
    expect(deletePet.example).toMatchObject({ status: 204, outputs: {} });
  });

  it("take the first 2xx answer with JSON, exact codes before 2XX", () => {
    const schema = (name: string) => ({ description: name, content: { "application/json": { schema: { type: "object", title: name } } } });
    const m = mapOpenApi(
      documentWith({ "/a": { get: { operationId: "a", responses: { "2XX": schema("range"), "202": schema("accepted"), "default": schema("default") } } } }),
      { nodeTypePrefix: "t" },
    );
    expect(m.nodeTypes[0].outputSchema.title).toBe("accepted");
    expect(m.nodeTypes[0].example.status).toBe(202);
  });
});

describe("documents", () => {
  it("give the default base URL from servers[0], variables at their defaults", () => {
    expect(mapping.defaultBaseUrl).toBe("https://eu.petstore.example.com/v2");
    expect(mapOpenApi({ ...documentWith({ "/a": { get: { responses: ok } } }), servers: [{ url: "/api" }] }, { nodeTypePrefix: "t" }).defaultBaseUrl).toBe("");
  });

  it("refuse Swagger 2 by name, and anything that is not OpenAPI 3.0 or 3.1", () => {
    expect(() => mapOpenApi({ swagger: "2.0", info: { title: "Old", version: "1" }, paths: {} } as never, { nodeTypePrefix: "t", source: "old.json" })).toThrow(
      "old.json is Swagger 2.0, which is not supported: convert it to OpenAPI 3.0 or 3.1 first",
    );
    expect(() => mapOpenApi({ ...documentWith({}), openapi: "4.0.0" }, { nodeTypePrefix: "t" })).toThrow(/not OpenAPI 3.0 or 3.1/);
  });

  it("accept OpenAPI 3.1 schemas as they are", () => {
    const m = mapOpenApi(
      documentWith(
        { "/n": { get: { operationId: "n", parameters: [{ name: "q", in: "query", schema: { type: ["string", "null"], examples: ["x"] } }], responses: { "200": { description: "ok", content: { "application/json": { schema: { type: "integer", exclusiveMinimum: 0 } } } } } } } },
        "3.1.0",
      ),
      { nodeTypePrefix: "t" },
    );
    expect(m.nodeTypes[0].inputSchema.properties).toEqual({ q: { type: ["string", "null"], examples: ["x"] } });
    expect(m.nodeTypes[0].outputSchema).toMatchObject({ properties: { result: { type: "integer", exclusiveMinimum: 0 } } });
  });

  it("leave out an operation whose required body is not JSON, and say why", () => {
    const m = mapOpenApi(
      documentWith({
        "/photo": { post: { operationId: "upload", requestBody: { required: true, content: { "multipart/form-data": { schema: { type: "object" } } } }, responses: ok } },
        "/ping": { get: { operationId: "ping", responses: ok } },
      }),
      { nodeTypePrefix: "t" },
    );
    expect(m.nodeTypes.map((n) => n.operationId)).toEqual(["ping"]);
    expect(m.skipped).toEqual([{ method: "POST", path: "/photo", reason: "its required request body is not JSON (multipart/form-data)" }]);
    expect(() => mapOpenApi(documentWith({}), { nodeTypePrefix: "t", source: "empty.yaml" })).toThrow("empty.yaml has no operation a node type can be made from");
  });

  it("turn a recursive schema into a finite one", () => {
    const node: Record<string, unknown> = { type: "object", properties: { name: { type: "string" } } };
    (node.properties as Record<string, unknown>).children = { type: "array", items: node };
    const m = mapOpenApi(documentWith({ "/tree": { get: { operationId: "tree", responses: { "200": { description: "ok", content: { "application/json": { schema: node } } } } } } }), { nodeTypePrefix: "t" });
    expect(() => JSON.stringify(m.nodeTypes[0].outputSchema)).not.toThrow();
    expect(m.nodeTypes[0].outputSchema).toEqual({ type: "object", properties: { name: { type: "string" }, children: { type: "array", items: {} } } });
  });
});

describe("loading a document", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "cfh-openapi-"));
  let server: http.Server;
  let base: string;
  beforeAll(async () => {
    const yaml = readFileSync(fixturePath, "utf8").replace("https://{region}.petstore.example.com/v2", "/v2");
    server = http.createServer((req, res) => {
      if (req.url === "/specs/petstore.yaml") res.end(yaml);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads YAML from a URL, and resolves a relative server URL against it", async () => {
    const loaded = await loadOpenApiDocument(`${base}/specs/petstore.yaml`, "/");
    expect(loaded.location).toBe(`${base}/specs/petstore.yaml`);
    expect(mapOpenApi(loaded.document, { nodeTypePrefix: "p", source: loaded.location }).defaultBaseUrl).toBe(`${base}/v2`);
  });

  it("refuses a Swagger 2 file by name, and a missing file with the reason", async () => {
    writeFileSync(path.join(dir, "swagger.json"), JSON.stringify({ swagger: "2.0", info: { title: "Old", version: "1" }, paths: {} }));
    await expect(loadOpenApiDocument("swagger.json", dir)).rejects.toThrow("swagger.json is Swagger 2.0, which is not supported");
    await expect(loadOpenApiDocument("missing.yaml", dir)).rejects.toThrow(/cannot read the OpenAPI document missing\.yaml/);
  });
});

describe("the generated files", () => {
  it("are one module per operation, an index exporting them all, the HTTP caller, a test and a README", () => {
    const { files } = openApiToHandlers(petstore, { packageName: "petstore", nodeTypePrefix: "petstore", baseUrlSetting: "PETSTORE_BASE_URL", origin: "From the fixture." });
    expect(files.map((f) => f.path).sort()).toEqual(
      [
        "README.md",
        "src/http-operation.ts",
        "src/index.ts",
        "src/operations/create-pet.ts",
        "src/operations/delete-pet.ts",
        "src/operations/get-pet.ts",
        "src/operations/get-store-inventory.ts",
        "src/operations/list-pets.ts",
        "test/handler.test.ts",
      ].sort(),
    );
    const index = files.find((f) => f.path === "src/index.ts")!.content;
    expect(index).toContain("export default [listPets, createPet, getPet, deletePet, getStoreInventory];");
    const readme = files.find((f) => f.path === "README.md")!.content;
    expect(readme).toContain("| `petstore.deletePet@1.0.0` | `DELETE /pets/{petId}` | `petId` | `{}` | irreversible |");
    const test = files.find((f) => f.path === "test/handler.test.ts")!.content;
    expect(test.match(/it\("sends the request the operation describes/g)).toHaveLength(5);
  });

  it("make a package that passes its own tests and typecheck, from the fixture", { timeout: 120_000 }, async () => {
    const rendered = renderPackage({ packageName: "@acme/petstore", template: "http", openApi: { document: petstore, location: fixturePath } });
    const generated = linkGeneratedPackage(rendered.files);
    try {
      const tests = await generated.test();
      expect(tests.code, tests.output).toBe(0);
      expect(tests.output).toMatch(/Tests\s+7 passed/);
      const types = await generated.typecheck();
      expect(types.code, types.output).toBe(0);
    } finally {
      generated.remove();
    }
  });

  it("make a package whose tests configure the base URL when the document names none", { timeout: 120_000 }, async () => {
    const relative = { ...petstore, servers: [{ url: "/v2" }] };
    const rendered = renderPackage({ packageName: "petstore", template: "http", openApi: { document: relative, location: fixturePath } });
    const test = rendered.files.find((f) => f.path === "test/handler.test.ts")!.content;
    expect(test).toContain("const RUN_OPTIONS = { secrets: { [BASE_URL_SETTING]: \"https://upstream.test\" } };");
    const generated = linkGeneratedPackage(rendered.files);
    try {
      const tests = await generated.test();
      expect(tests.code, tests.output).toBe(0);
      expect(tests.output).toMatch(/Tests\s+8 passed/);
    } finally {
      generated.remove();
    }
  });
});
