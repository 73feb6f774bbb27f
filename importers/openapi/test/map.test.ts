/**
 * mapOpenApi: operations of OpenAPI documents made into node types, one per operation, each with the descriptor that
 * callHttpOperation and http.request run; every operation either made or left out with its reason.
 */
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { validatorFor } from "@nodefabric/schemas";
import { BASE64_PATTERN, buildOperationRequest, HEADER_VALUE_PATTERN } from "@nodefabric/sdk";
import { createHandlerAjv } from "@nodefabric/sdk/runtime";
import { loadOpenApi } from "../src/load.js";
import { mapOpenApi } from "../src/map.js";
import { sampleFor } from "@nodefabric/sdk/samples";
import type { MapOpenApiOptions, MappedOperation, OpenApiDocument, OpenApiMapping } from "../src/types.js";


const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));
const corpus = fileURLToPath(new URL("../../../test/fixtures/openapi/", import.meta.url));
const petstoreFile = fileURLToPath(new URL("../../../templates/create-fabric-handler/test/fixtures/petstore.yaml", import.meta.url));

const OPTIONS: MapOpenApiOptions = { prefix: "zoo", settingsPrefix: "ZOO" };

/** A document of the given paths, with the info every document needs. */
function doc(paths: Record<string, unknown>, extra: Record<string, unknown> = {}): OpenApiDocument {
  return { openapi: "3.0.3", info: { title: "Zoo", version: "1.0.0" }, paths, ...extra } as OpenApiDocument;
}

function op(mapping: OpenApiMapping, id: string): MappedOperation {
  const found = mapping.operations.find((o) => o.nodeType.node_type_id === id);
  if (!found) throw new Error(`no operation ${id}; have ${mapping.operations.map((o) => o.nodeType.node_type_id).join(", ")}; left out ${JSON.stringify(mapping.leftOut)}`);
  return found;
}

/** Whether `value` is valid under `schema`, as the executor checks inputs and outputs. */
function accepts(schema: unknown, value: unknown): boolean {
  return createHandlerAjv().compile(schema as object)(value) as boolean;
}

const ok = { "200": { description: "ok", content: { "application/json": { schema: { type: "object" } } } } };

describe("node type ids", () => {
  const mapping = mapOpenApi(
    doc({
      "/pets": { get: { operationId: "list pets/all", responses: ok }, post: { operationId: "createPet", responses: ok } },
      "/pets/{petId}": { get: { responses: ok }, delete: { operationId: "createPet", responses: ok } },
      "/cookies#form": { post: { responses: ok } },
      "/cookies#json": { post: { responses: ok } },
      "/": { get: { responses: ok } },
      "/long": { get: { operationId: `x${"y".repeat(200)}`, responses: ok } },
    }),
    OPTIONS,
  );
  const ids = mapping.operations.map((o) => o.nodeType.node_type_id);

  it("uses operationIds, characters an id cannot hold replaced by -, and <method>-<path segments> without one", () => {
    expect(ids.slice(0, 3)).toEqual(["zoo.list-pets-all", "zoo.createPet", "zoo.get-pets-petId"]);
    expect(op(mapping, "zoo.get-pets-petId").descriptor.operation_id).toBe("get-pets-petId");
    expect(op(mapping, "zoo.list-pets-all").descriptor.operation_id).toBe("list pets/all");
    expect(op(mapping, "zoo.get-root").descriptor.path).toBe("/");
  });

  it("resolves clashes in document order with -2, and notes them", () => {
    expect(op(mapping, "zoo.createPet-2").descriptor).toMatchObject({ method: "DELETE", path: "/pets/{petId}" });
    expect(mapping.notes).toContain("DELETE /pets/{petId} would have the node type id zoo.createPet, like POST /pets; it is zoo.createPet-2");
  });

  it("does not send a path's #fragment, but tells operations apart by it", () => {
    expect(op(mapping, "zoo.post-cookies-form").descriptor.path).toBe("/cookies");
    expect(op(mapping, "zoo.post-cookies-json").descriptor.path).toBe("/cookies");
  });

  it("cuts an id that is too long and gives it a stable hash", () => {
    const long = ids.find((id) => id.startsWith("zoo.xyyy"))!;
    expect(long.length).toBeLessThanOrEqual(128);
    expect(long).toMatch(/^zoo\.xy+-[0-9a-f]{8}$/);
    const again = mapOpenApi(doc({ "/long": { get: { operationId: `x${"y".repeat(200)}`, responses: ok } } }), OPTIONS);
    expect(again.operations[0].nodeType.node_type_id).toBe(long);
  });

  it("gives every node type a distinct kebab-case file name", () => {
    const names = mapping.operations.map((o) => o.fileName);
    expect(names.slice(0, 4)).toEqual(["list-pets-all", "create-pet", "get-pets-pet-id", "create-pet-2"]);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
  });

  it("refuses a prefix or settings prefix that cannot be used", () => {
    expect(() => mapOpenApi(doc({}), { prefix: "a.b", settingsPrefix: "ZOO" })).toThrow(/node type id prefix "a.b"/);
    expect(() => mapOpenApi(doc({}), { prefix: "zoo", settingsPrefix: "zoo" })).toThrow(/settings prefix "zoo" must be UPPER_SNAKE_CASE/);
  });
});

describe("include and exclude", () => {
  const document = doc({
    "/pets": {
      get: { operationId: "listPets", tags: ["Pets"], responses: ok },
      post: { operationId: "createPet", tags: ["pets", "admin"], responses: ok },
    },
    "/store": { get: { operationId: "getInventory", tags: ["store"], responses: ok } },
  });

  it("keeps operations by tag or operationId, case-insensitive, and lists the others with the reason", () => {
    const mapping = mapOpenApi(document, { ...OPTIONS, include: ["PETS"], exclude: ["ADMIN"] });

    expect(mapping.operations.map((o) => o.nodeType.node_type_id)).toEqual(["zoo.listPets"]);
    expect(mapping.leftOut).toEqual([
      { method: "POST", path: "/pets", operationId: "createPet", reason: "excluded (--exclude ADMIN)" },
      { method: "GET", path: "/store", operationId: "getInventory", reason: "not selected (--include PETS)" },
    ]);
  });

  it("does not change the ids of the operations kept, and notes values that matched nothing", () => {
    const clash = doc({ "/a": { get: { operationId: "same", tags: ["a"], responses: ok } }, "/b": { get: { operationId: "same", tags: ["b"], responses: ok } } });
    const mapping = mapOpenApi(clash, { ...OPTIONS, include: ["b", "nothing-like-this"] });

    expect(mapping.operations.map((o) => o.nodeType.node_type_id)).toEqual(["zoo.same-2"]);
    expect(mapping.notes).toContain("--include nothing-like-this matched no tag or operationId");
  });
});

describe("what the runtime refuses beyond the document's schemas, said in the input_schema", () => {
  // AWS descriptions (Smithy models converted by aws2openapi) allow "" for path parameters: minLength 0, pattern with `*`.
  const document = doc(
    {
      "/workflows/{workflowName}/{version}/{ids}/{any}/{n}": {
        get: {
          operationId: "getWorkflow",
          parameters: [
            { name: "workflowName", in: "path", required: true, schema: { $ref: "#/components/schemas/EntityName" } },
            { name: "version", in: "path", required: true, schema: { type: "string", nullable: true, minLength: 0, pattern: "^[a-z0-9.]*$" } },
            { name: "ids", in: "path", required: true, schema: { type: "array", items: { type: "string" } } },
            { name: "any", in: "path", required: true, schema: {} },
            { name: "n", in: "path", required: true, schema: { type: "integer" } },
            { name: "X-Trace", in: "header", schema: { type: "string", pattern: "^[^,]*$" } },
            { name: "X-Tags", in: "header", schema: { type: "array", items: { type: "string" } } },
            { name: "X-Count", in: "header", schema: { type: "integer" } },
            { name: "q", in: "query", schema: { type: "string" } },
          ],
          responses: ok,
        },
      },
    },
    { servers: [{ url: "https://api.example.com/v1" }], components: { schemas: { EntityName: { type: "string", pattern: "^[a-zA-Z_0-9-]*$", minLength: 0, maxLength: 255 } } } },
  );
  const operation = op(mapOpenApi(document, OPTIONS), "zoo.getWorkflow");
  const inputSchema = operation.nodeType.input_schema!;
  const properties = (inputSchema as any).properties as Record<string, any>;
  const valid = { workflowName: "wf", version: "v1", ids: ["a"], any: "x", n: 0 };

  it("gives every path parameter a non-empty value that is not null, '.' or '..', through $refs and over a minLength of 0", () => {
    expect(properties.workflowName).toEqual({ $ref: "#/$defs/EntityName", minLength: 1, not: { enum: [".", ".."] } });
    expect(properties.version).toMatchObject({ minLength: 1, not: { enum: [null, ".", ".."] } });
    // An integer is never empty, null or a dot: nothing is added.
    expect(properties.n).toEqual({ type: "integer" });
    expect(accepts(inputSchema, valid)).toBe(true);
    for (const bad of [{ workflowName: "" }, { version: "" }, { version: null }, { version: ".." }, { version: "." }, { ids: [] }, { ids: [""] }, { ids: [".."] }, { any: "" }, { any: {} }, { any: null }]) {
      expect(accepts(inputSchema, { ...valid, ...bad }), JSON.stringify(bad)).toBe(false);
    }
  });

  it("keeps header values to what a header can carry, beside the document's own pattern", () => {
    expect(properties["X-Trace"]).toEqual({ type: "string", pattern: "^[^,]*$", allOf: [{ pattern: HEADER_VALUE_PATTERN }] });
    expect(properties["X-Tags"]).toMatchObject({ type: "array", items: { type: "string" }, allOf: [{ items: { pattern: HEADER_VALUE_PATTERN } }] });
    expect(properties["X-Count"]).toEqual({ type: "integer" });
    expect(properties.q).toEqual({ type: "string" });
    expect(accepts(inputSchema, { ...valid, "X-Trace": "t\tab é", "X-Tags": ["a", "b"], "X-Count": 3 })).toBe(true);
    for (const bad of [{ "X-Trace": "a\r\nSet-Cookie: x=1" }, { "X-Trace": "\u0000" }, { "X-Trace": "€" }, { "X-Tags": ["a\nb"] }, { "X-Trace": "a,b" }]) {
      expect(accepts(inputSchema, { ...valid, ...bad }), JSON.stringify(bad)).toBe(false);
    }
  });

  it("gives samples the schema and the runtime accept, made from the document's keywords rather than the rules' patterns", async () => {
    const sample = sampleFor(inputSchema as any, { seed: 7 });
    if (!("value" in sample)) throw new Error(sample.error);
    const inputs = sample.value as Record<string, any>;
    expect(inputs.workflowName).toMatch(/^[a-zA-Z_0-9-]+$/);
    expect(inputs.version).toMatch(/^[a-z0-9.]+$/);
    expect(["", ".", ".."]).not.toContain(inputs.version);
    expect(inputs["X-Trace"]).toMatch(/^[^,]*$/);
    expect(inputs["X-Tags"]).toEqual(["example"]);
    expect(accepts(inputSchema, inputs)).toBe(true);
    await expect(buildOperationRequest(operation.descriptor, inputs, { setting: () => undefined, secret: () => undefined })).resolves.toBeDefined();
  });

  it("accepts in the schema what the runtime sends, and the runtime refuses what the schema refuses", async () => {
    const options = { setting: () => undefined, secret: () => undefined };
    const request = await buildOperationRequest(operation.descriptor, { ...valid, "X-Trace": "t" }, options);
    expect(request.url.pathname).toBe("/v1/workflows/wf/v1/a/x/0");
    for (const [bad, message] of [
      [{ workflowName: "" }, "the path parameter workflowName of getWorkflow cannot be empty"],
      [{ version: ".." }, 'the path of getWorkflow would hold a "." or ".." segment'],
      [{ "X-Trace": "a\r\nb" }, "the header parameter X-Trace would hold a line break, a control character or a character outside Latin-1"],
    ] as const) {
      await expect(buildOperationRequest(operation.descriptor, { ...valid, ...bad }, options)).rejects.toThrow(message);
      expect(accepts(inputSchema, { ...valid, ...bad })).toBe(false);
    }
  });
});

describe("inputs", () => {
  const document = doc(
    {
      "/zoos/{zooId}/animals/{animalId}": {
        parameters: [
          { name: "zooId", in: "path", required: true, schema: { type: "string" }, description: "The zoo." },
          { name: "verbose", in: "query", schema: { type: "boolean" } },
          { $ref: "#/components/parameters/TraceId" },
        ],
        get: {
          operationId: "getAnimal",
          parameters: [
            { name: "verbose", in: "query", required: true, schema: { type: "integer" } },
            { name: "id", in: "query", schema: { type: "string" } },
            { name: "id", in: "header", schema: { type: "string" } },
            { name: "body", in: "query", schema: { type: "string" } },
            { name: "session", in: "cookie", required: true, schema: { type: "string" } },
            { name: "Accept", in: "header", schema: { type: "string" } },
            { name: "content-type", in: "header", schema: { type: "string" } },
            { name: "Authorization", in: "header", schema: { type: "string" } },
            { name: "tags", in: "query", style: "pipeDelimited", explode: false, schema: { type: "array", items: { type: "string" } } },
            { name: "filter", in: "query", style: "deepObject", explode: true, allowReserved: true, schema: { type: "object" } },
            { name: "where", in: "query", content: { "application/json": { schema: { type: "object", properties: { age: { type: "integer" } } } } } },
            { name: "limit", in: "query", schema: { type: "integer", maximum: 50 }, example: 10 },
            { name: "offset", in: "query", schema: { type: "integer", minimum: 0 }, example: -1 },
            { name: "color", in: "query", schema: { type: "string" }, examples: { red: { value: "red" } } },
            { name: "oops", in: "formData", schema: { type: "string" } },
          ],
          responses: ok,
        },
      },
    },
    { components: { parameters: { TraceId: { name: "X-Trace-Id", in: "header", schema: { type: "string" } } } } },
  );
  const mapping = mapOpenApi(document, OPTIONS);
  const operation = op(mapping, "zoo.getAnimal");
  const schema = operation.nodeType.input_schema as { properties: Record<string, any>; required: string[]; additionalProperties: boolean };
  const parameter = (input: string) => operation.descriptor.parameters.find((p) => p.input === input);

  it("has one input per parameter, keyed by name, <in>_<name> when names clash or the name is body", () => {
    expect(Object.keys(schema.properties).sort()).toEqual(
      ["animalId", "color", "filter", "header_id", "limit", "offset", "query_body", "query_id", "session", "tags", "verbose", "where", "X-Trace-Id", "zooId"].sort(),
    );
    expect(schema.additionalProperties).toBe(false);
    expect(parameter("query_body")).toMatchObject({ name: "body", in: "query" });
    expect(parameter("header_id")).toMatchObject({ name: "id", in: "header" });
  });

  it("requires path parameters, those the document requires, and the operation's override of a path-level one", () => {
    expect(schema.required.sort()).toEqual(["animalId", "session", "verbose", "zooId"].sort());
    // The operation's `verbose` (integer, required) replaces the path item's (boolean).
    expect(accepts(operation.nodeType.input_schema, { zooId: "z", animalId: "a", session: "s", verbose: 3 })).toBe(true);
    expect(accepts(operation.nodeType.input_schema, { zooId: "z", animalId: "a", session: "s", verbose: true })).toBe(false);
    expect(accepts(operation.nodeType.input_schema, { zooId: "", animalId: "a", session: "s", verbose: 3 })).toBe(false);
    expect(schema.properties.zooId.description).toBe("The zoo.");
  });

  it("adds an undeclared path template name as a required string", () => {
    expect(parameter("animalId")).toEqual({ input: "animalId", name: "animalId", in: "path", style: "simple", explode: false });
    expect(operation.notes).toContain("the path parameter animalId is not declared; it is a required string input");
  });

  it("ignores Accept, Content-Type and Authorization headers, and parameters in no known location", () => {
    const names = operation.descriptor.parameters.map((p) => p.name.toLowerCase());
    for (const header of ["accept", "content-type", "authorization", "oops"]) expect(names).not.toContain(header);
    expect(operation.notes).toContain('the parameter oops in "formdata" is ignored (not a parameter location)');
  });

  it("carries styles and explode, with OpenAPI's defaults, and allowReserved", () => {
    expect(parameter("zooId")).toMatchObject({ in: "path", style: "simple", explode: false });
    expect(parameter("verbose")).toMatchObject({ in: "query", style: "form", explode: true });
    expect(parameter("X-Trace-Id")).toMatchObject({ in: "header", style: "simple", explode: false });
    expect(parameter("session")).toMatchObject({ in: "cookie", style: "form", explode: true });
    expect(parameter("tags")).toMatchObject({ style: "pipeDelimited", explode: false });
    expect(parameter("filter")).toMatchObject({ style: "deepObject", explode: true, allow_reserved: true });
    expect(parameter("verbose")!.allow_reserved).toBeUndefined();
  });

  it("takes a parameter's schema from content, with its content type", () => {
    expect(parameter("where")).toMatchObject({ in: "query", content_type: "application/json" });
    expect(accepts({ ...schema.properties.where, $defs: (schema as any).$defs }, { age: 3 })).toBe(true);
    expect(accepts({ ...schema.properties.where, $defs: (schema as any).$defs }, { age: "old" })).toBe(false);
  });

  it("keeps only the parameter examples that are valid", () => {
    expect(schema.properties.limit.examples).toEqual([10]);
    expect(schema.properties.color.examples).toEqual(["red"]);
    expect(schema.properties.offset.examples).toBeUndefined();
    expect(operation.notes).toContain("the example of the parameter offset is not valid against its schema; it is left out");
  });
});

describe("request bodies", () => {
  const jsonBody = { content: { "application/vnd.zoo+json": { schema: { $ref: "#/components/schemas/Animal" } } }, required: true, description: "The animal." };
  const document = doc(
    {
      "/json": { post: { operationId: "json", requestBody: jsonBody, responses: ok } },
      "/several": {
        post: {
          operationId: "several",
          requestBody: { content: { "application/xml": { schema: { type: "object" } }, "application/json": { schema: { type: "object" } }, "text/plain": {} } },
          responses: ok,
        },
      },
      "/form": {
        post: {
          operationId: "form",
          requestBody: {
            content: {
              "application/x-www-form-urlencoded": {
                schema: { type: "object", properties: { name: { type: "string" }, ids: { type: "array", items: { type: "integer" } } } },
                encoding: { ids: { style: "spaceDelimited", explode: false } },
              },
            },
          },
          responses: ok,
        },
      },
      "/upload": {
        post: {
          operationId: "upload",
          requestBody: {
            required: true,
            content: {
              "multipart/form-data": {
                schema: { $ref: "#/components/schemas/Upload" },
                encoding: { photo: { contentType: "image/png" } },
              },
            },
          },
          responses: ok,
        },
      },
      "/text": { put: { operationId: "text", requestBody: { content: { "text/csv": { schema: { type: "string" } } } }, responses: ok } },
      "/bytes": { put: { operationId: "bytes", requestBody: { content: { "application/octet-stream": { schema: { type: "string", format: "binary" } } } }, responses: ok } },
      "/image": { put: { operationId: "image", requestBody: { required: true, content: { "image/*": {} } }, responses: ok } },
      "/shared": { post: { operationId: "shared", requestBody: { $ref: "#/components/requestBodies/AnimalBody" }, responses: ok } },
    },
    {
      components: {
        schemas: {
          Animal: { type: "object", required: ["name"], properties: { id: { type: "integer", readOnly: true }, name: { type: "string" }, friend: { $ref: "#/components/schemas/Animal" } } },
          Upload: {
            type: "object",
            required: ["photo"],
            properties: {
              caption: { type: "string" },
              photo: { type: "string", format: "binary", description: "The photo." },
              extras: { type: "array", items: { type: "string", format: "binary" } },
              raw: { type: "string", contentEncoding: "base64" },
              meta: { $ref: "#/components/schemas/Animal" },
            },
          },
        },
        requestBodies: { AnimalBody: { content: { "application/json": { schema: { $ref: "#/components/schemas/Animal" } } } } },
      },
    },
  );
  const mapping = mapOpenApi(document, OPTIONS);
  const bodyOf = (id: string) => op(mapping, `zoo.${id}`);

  it("sends JSON (a vendor +json type too) with the body's schema, required as the document says", () => {
    const o = bodyOf("json");
    expect(o.descriptor.body).toEqual({ input: "body", media_type: "application/vnd.zoo+json", encoding: "json", required: true });
    expect(o.nodeType.input_schema!.required).toEqual(["body"]);
    expect((o.nodeType.input_schema as any).properties.body.description).toBe("The animal.");
    expect(accepts(o.nodeType.input_schema, { body: { name: "Rex", friend: { name: "Tom" } } })).toBe(true);
    expect(accepts(o.nodeType.input_schema, { body: { friend: { name: "Tom" } } })).toBe(false);
    expect(accepts(o.nodeType.input_schema, { body: { name: "Rex", friend: { id: "x" } } })).toBe(false);
  });

  it("prefers JSON among several media types, and notes the choice", () => {
    expect(bodyOf("several").descriptor.body).toMatchObject({ media_type: "application/json", encoding: "json", required: false });
    expect(bodyOf("several").notes).toContain("request body: application/json chosen among application/xml, application/json, text/plain");
  });

  it("sends a form body with its Encoding Objects", () => {
    expect(bodyOf("form").descriptor.body).toEqual({
      input: "body",
      media_type: "application/x-www-form-urlencoded",
      encoding: "form",
      required: false,
      properties: { ids: { style: "spaceDelimited", explode: false } },
    });
  });

  it("sends multipart with file fields as base64 strings, listed in binary_fields", () => {
    const o = bodyOf("upload");
    expect(o.descriptor.body).toEqual({
      input: "body",
      media_type: "multipart/form-data",
      encoding: "multipart",
      required: true,
      binary_fields: ["photo", "extras", "raw"],
      properties: { photo: { content_type: "image/png" } },
    });
    const body = (o.nodeType.input_schema as any).properties.body;
    expect(body.properties.photo).toEqual({ type: "string", contentEncoding: "base64", pattern: BASE64_PATTERN, description: "The photo." });
    expect(accepts(o.nodeType.input_schema, { body: { photo: "not base64!" } })).toBe(false);
    expect(accepts(o.nodeType.input_schema, { body: { photo: "aGVsbG8=", extras: ["aGk="], caption: "hi", meta: { name: "Rex" } } })).toBe(true);
    expect(accepts(o.nodeType.input_schema, { body: { caption: "hi" } })).toBe(false);
  });

  it("sends text as a string, and anything else as base64 bytes, an optional upload staying optional", () => {
    expect(bodyOf("text").descriptor.body).toEqual({ input: "body", media_type: "text/csv", encoding: "text", required: false });
    expect((bodyOf("text").nodeType.input_schema as any).properties.body).toEqual({ type: "string" });

    const bytes = bodyOf("bytes");
    expect(bytes.descriptor.body).toEqual({ input: "body", media_type: "application/octet-stream", encoding: "binary", required: false });
    expect((bytes.nodeType.input_schema as any).properties.body).toEqual({ type: "string", contentEncoding: "base64", pattern: BASE64_PATTERN, contentMediaType: "application/octet-stream" });
    expect(bytes.nodeType.input_schema!.required).toBeUndefined();

    expect(bodyOf("image").descriptor.body).toEqual({ input: "body", media_type: "application/octet-stream", encoding: "binary", required: true });
  });

  it("reads a request body given by $ref", () => {
    expect(bodyOf("shared").descriptor.body).toMatchObject({ media_type: "application/json", encoding: "json" });
    expect(accepts(bodyOf("shared").nodeType.input_schema, { body: { name: "Rex" } })).toBe(true);
  });
});

describe("outputs", () => {
  const json = (schema: unknown, type = "application/json") => ({ description: "x", content: { [type]: { schema } } });
  const document = doc(
    {
      "/object": { get: { operationId: "object", responses: { "404": json({ type: "string" }), "201": json({ $ref: "#/components/schemas/Pet" }), "200": { description: "no body" } } } },
      "/array": { get: { operationId: "array", responses: { "200": json({ type: "array", items: { $ref: "#/components/schemas/Pet" } }) } } },
      "/login": { get: { operationId: "loginUser", responses: { "200": { description: "x", content: { "application/xml": { schema: { type: "string" } }, "application/json": { schema: { type: "string" } } } } } } },
      "/text": { get: { operationId: "text", responses: { "200": json({ type: "string" }, "text/plain") } } },
      "/none": { delete: { operationId: "none", responses: { "204": { description: "gone" } } } },
      "/range": { get: { operationId: "range", responses: { "2XX": json({ type: "object", properties: { a: { type: "integer" } } }) } } },
      "/default": { get: { operationId: "default", responses: { default: json({ type: "object" }) } } },
      "/default-ignored": { get: { operationId: "defaultIgnored", responses: { "202": { description: "accepted" }, default: json({ type: "object" }) } } },
      "/image": { get: { operationId: "image", responses: { "200": { description: "png", content: { "image/png": {} } } } } },
      "/ref": { get: { operationId: "ref", responses: { "200": { $ref: "#/components/responses/PetAnswer" } } } },
      "/any-of": { get: { operationId: "anyOf", responses: { "200": json({ oneOf: [{ $ref: "#/components/schemas/Pet" }, { type: "object", properties: { b: {} } }] }) } } },
    },
    {
      components: {
        schemas: { Pet: { type: "object", required: ["name"], properties: { name: { type: "string" }, secret: { type: "string", writeOnly: true } } } },
        responses: { PetAnswer: json({ $ref: "#/components/schemas/Pet" }) },
      },
    },
  );
  const mapping = mapOpenApi(document, OPTIONS);
  const outputsOf = (id: string) => op(mapping, `zoo.${id}`);

  it("answers the JSON object of the first 2xx with JSON as is", () => {
    const o = outputsOf("object");
    expect(o.descriptor.response).toEqual({ status: 201, outputs: "object", media_type: "application/json" });
    expect(accepts(o.nodeType.output_schema, { name: "Rex" })).toBe(true);
    expect(accepts(o.nodeType.output_schema, { nom: "Rex" })).toBe(false);
    expect(outputsOf("anyOf").descriptor.response.outputs).toBe("object");
    expect(outputsOf("ref").descriptor.response).toEqual({ status: 200, outputs: "object", media_type: "application/json" });
  });

  it("answers any other JSON value as { result }", () => {
    const array = outputsOf("array");
    expect(array.descriptor.response).toEqual({ status: 200, outputs: "result", media_type: "application/json" });
    expect(accepts(array.nodeType.output_schema, { result: [{ name: "Rex" }] })).toBe(true);
    expect(accepts(array.nodeType.output_schema, { result: [{}] })).toBe(false);
    expect(accepts(array.nodeType.output_schema, [{ name: "Rex" }])).toBe(false);

    const login = outputsOf("loginUser");
    expect(login.descriptor.response).toEqual({ status: 200, outputs: "result", media_type: "application/json" });
    expect(accepts(login.nodeType.output_schema, { result: "session-1" })).toBe(true);
  });

  it("answers text as { result: string }", () => {
    const text = outputsOf("text");
    expect(text.descriptor.response).toEqual({ status: 200, outputs: "result", media_type: "text/plain" });
    expect(text.nodeType.output_schema).toEqual({ type: "object", properties: { result: { type: "string" } }, required: ["result"], additionalProperties: false });
  });

  it("answers {} when no 2xx answer has JSON or text, taking 2XX, and default only without any 2xx", () => {
    expect(outputsOf("none").descriptor.response).toEqual({ status: 204, outputs: "none" });
    expect(outputsOf("none").nodeType.output_schema).toEqual({ type: "object" });
    expect(outputsOf("range").descriptor.response).toEqual({ status: 200, outputs: "object", media_type: "application/json" });
    expect(outputsOf("default").descriptor.response).toEqual({ status: 200, outputs: "object", media_type: "application/json" });
    expect(outputsOf("defaultIgnored").descriptor.response).toEqual({ status: 202, outputs: "none" });
    expect(outputsOf("image").descriptor.response).toEqual({ status: 200, outputs: "none" });
    expect(outputsOf("image").notes).toContain("its answer (image/png) is neither JSON nor text; the outputs are {}");
  });
});

describe("security", () => {
  const document = doc(
    {
      "/key": { get: { operationId: "key", responses: ok } },
      "/open": { get: { operationId: "open", security: [], responses: ok } },
      "/either": { get: { operationId: "either", security: [{}, { api_key: [] }], responses: ok } },
      "/bearer": { get: { operationId: "bearer", security: [{ bearerToken: [] }], responses: ok } },
      "/basic": { get: { operationId: "basic", security: [{ basicAuth: [], api_key: [] }], responses: ok } },
      "/digest": { get: { operationId: "digest", security: [{ digest: [] }], responses: ok } },
      "/oauth": { get: { operationId: "oauth", security: [{ zoo_auth: ["read:animals"] }, { zoo_auth: ["admin"] }], responses: ok } },
      "/implicit": { get: { operationId: "implicit", security: [{ implicit: ["x"] }], responses: ok } },
      "/oidc": { get: { operationId: "oidc", security: [{ oidc: [] }], responses: ok } },
      "/mtls": { get: { operationId: "mtls", security: [{ mtls: [] }], responses: ok } },
      "/mtls-or-key": { get: { operationId: "mtlsOrKey", security: [{ mtls: [] }, { api_key: [] }], responses: ok } },
      "/unknown": { get: { operationId: "unknownScheme", security: [{ nowhere: [] }], responses: ok } },
    },
    {
      security: [{ api_key: [] }],
      components: {
        securitySchemes: {
          api_key: { type: "apiKey", in: "header", name: "X-Api-Key" },
          bearerToken: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
          basicAuth: { type: "http", scheme: "Basic" },
          digest: { type: "http", scheme: "digest" },
          zoo_auth: { type: "oauth2", flows: { clientCredentials: { tokenUrl: "/oauth/token", scopes: {} }, authorizationCode: { authorizationUrl: "https://x", tokenUrl: "https://x/t", scopes: {} } } },
          implicit: { $ref: "#/components/securitySchemes/implicitScheme" },
          implicitScheme: { type: "oauth2", flows: { implicit: { authorizationUrl: "https://auth.example.com", scopes: {} } } },
          oidc: { type: "openIdConnect", openIdConnectUrl: "https://id.example.com/.well-known/openid-configuration" },
          mtls: { type: "mutualTLS" },
          unused: { type: "apiKey", in: "query", name: "k" },
        },
      },
      servers: [{ url: "https://api.zoo.example.com/v1" }],
    },
  );
  const mapping = mapOpenApi(document, OPTIONS);
  const securityOf = (id: string) => op(mapping, `zoo.${id}`).descriptor;

  it("applies the document's security unless the operation has its own; [] means none, {} means anonymous allowed", () => {
    expect(securityOf("key")).toMatchObject({ security: [["api_key"]], security_schemes: { api_key: { type: "apiKey", in: "header", name: "X-Api-Key", secret: "ZOO_API_KEY" } } });
    expect(securityOf("open")).toMatchObject({ security: [], security_schemes: {} });
    expect(securityOf("either").security).toEqual([[], ["api_key"]]);
  });

  it("names secrets <PREFIX>_<SCHEME> in UPPER_SNAKE, without stutter", () => {
    expect(securityOf("bearer").security_schemes).toEqual({ bearerToken: { type: "http", scheme: "bearer", secret: "ZOO_BEARER_TOKEN" } });
    expect(securityOf("basic").security_schemes.basicAuth).toEqual({ type: "http", scheme: "basic", username_secret: "ZOO_BASIC_AUTH_USERNAME", password_secret: "ZOO_BASIC_AUTH_PASSWORD" });
    expect(securityOf("basic").security).toEqual([["basicAuth", "api_key"]]);
    expect(securityOf("digest").security_schemes.digest).toEqual({ type: "http", scheme: "digest", secret: "ZOO_DIGEST_CREDENTIALS" });
    expect(securityOf("oauth").security_schemes.zoo_auth).toEqual({
      type: "oauth2",
      token_url: "https://api.zoo.example.com/oauth/token",
      scopes: ["read:animals", "admin"],
      client_id_secret: "ZOO_AUTH_CLIENT_ID",
      client_secret_secret: "ZOO_AUTH_CLIENT_SECRET",
      access_token_secret: "ZOO_AUTH_ACCESS_TOKEN",
    });
    expect(securityOf("implicit").security_schemes.implicit).toEqual({ type: "oauth2", scopes: ["x"], access_token_secret: "ZOO_IMPLICIT_ACCESS_TOKEN" });
    expect(securityOf("oidc").security_schemes.oidc).toEqual({ type: "oauth2", scopes: [], access_token_secret: "ZOO_OIDC_ACCESS_TOKEN" });
  });

  it("leaves out an operation only mutual TLS or an undefined scheme can call, and notes a dropped alternative", () => {
    expect(mapping.leftOut).toEqual([
      { method: "GET", path: "/mtls", operationId: "mtls", reason: "its security cannot be met by a node type: the mtls scheme is mutual TLS (a client certificate), which a node type cannot present" },
      { method: "GET", path: "/unknown", operationId: "unknownScheme", reason: "its security cannot be met by a node type: it names the security scheme nowhere, which the document does not define" },
    ]);
    expect(securityOf("mtlsOrKey").security).toEqual([["api_key"]]);
    expect(op(mapping, "zoo.mtlsOrKey").notes).toContain("a security alternative is left out: the mtls scheme is mutual TLS (a client certificate), which a node type cannot present");
  });

  it("lists each secret the operations use once, with what it is and where it is sent", () => {
    expect(mapping.secrets.map((s) => s.name)).toEqual([
      "ZOO_API_KEY",
      "ZOO_BEARER_TOKEN",
      "ZOO_BASIC_AUTH_USERNAME",
      "ZOO_BASIC_AUTH_PASSWORD",
      "ZOO_DIGEST_CREDENTIALS",
      "ZOO_AUTH_ACCESS_TOKEN",
      "ZOO_AUTH_CLIENT_ID",
      "ZOO_AUTH_CLIENT_SECRET",
      "ZOO_IMPLICIT_ACCESS_TOKEN",
      "ZOO_OIDC_ACCESS_TOKEN",
    ]);
    expect(mapping.secrets[0]).toEqual({ name: "ZOO_API_KEY", scheme: "api_key", description: "API key of the api_key scheme, sent as the header X-Api-Key." });
    expect(mapping.secrets[1].description).toBe("Bearer token (JWT) of the bearerToken scheme, sent in the Authorization header.");
    expect(mapping.secrets[6].description).toBe("OAuth 2 client id of the zoo_auth scheme, for the client credentials flow at https://api.zoo.example.com/oauth/token.");
    for (const secret of mapping.secrets) expect(secret.description).toMatch(/^[A-Z].*\.$/);
  });
});

describe("servers and settings", () => {
  const document = doc(
    {
      "/a": { get: { operationId: "a", responses: ok } },
      "/b": { servers: [{ url: "https://b.example.com/" }], get: { operationId: "b", responses: ok } },
      "/c": { get: { operationId: "c", servers: [{ url: "{origin}/up", variables: { origin: { default: "https://uploads.example.com" } } }], responses: ok } },
    },
    { servers: [{ url: "https://{region}.zoo.example.com:{port}/v2/", variables: { region: { default: "eu", enum: ["eu", "us"], description: "Where." }, port: { default: 443 } } }] },
  );
  const mapping = mapOpenApi(document, OPTIONS);

  it("puts the server with its variables in the descriptor, operation's first, then path's, then document's", () => {
    expect(op(mapping, "zoo.a").descriptor.server).toEqual({
      url: "https://{region}.zoo.example.com:{port}/v2",
      variables: { region: { default: "eu", enum: ["eu", "us"], description: "Where." }, port: { default: "443" } },
    });
    expect(op(mapping, "zoo.a").descriptor.settings).toEqual({ base_url: "ZOO_BASE_URL", server_variables: { region: "ZOO_SERVER_REGION", port: "ZOO_SERVER_PORT" } });
    expect(op(mapping, "zoo.b").descriptor.server).toEqual({ url: "https://b.example.com" });
    expect(op(mapping, "zoo.b").descriptor.settings).toEqual({ base_url: "ZOO_BASE_URL" });
    expect(op(mapping, "zoo.c").descriptor.server).toEqual({ url: "{origin}/up", variables: { origin: { default: "https://uploads.example.com" } } });
  });

  it("lists the base URL setting and one per server variable, with defaults", () => {
    expect(mapping.defaultBaseUrl).toBe("https://eu.zoo.example.com:443/v2");
    expect(mapping.settings).toEqual([
      { name: "ZOO_BASE_URL", description: "Base URL of Zoo, replacing the server URL the document names.", default: "https://eu.zoo.example.com:443/v2" },
      { name: "ZOO_SERVER_REGION", description: "The server variable {region} of Zoo: one of eu, us (Where.); unused when ZOO_BASE_URL is set.", default: "eu" },
      { name: "ZOO_SERVER_PORT", description: "The server variable {port} of Zoo; unused when ZOO_BASE_URL is set.", default: "443" },
      { name: "ZOO_SERVER_ORIGIN", description: "The server variable {origin} of Zoo; unused when ZOO_BASE_URL is set.", default: "https://uploads.example.com" },
    ]);
  });

  it("resolves a relative server URL against an http(s) location, and leaves it to the base URL setting otherwise", () => {
    const relative = doc({ "/a": { get: { operationId: "a", responses: ok } } }, { servers: [{ url: "/api/v3" }] });
    const fromUrl = mapOpenApi(relative, { ...OPTIONS, location: "http://127.0.0.1:8080/specs/openapi.yaml" });
    expect(fromUrl.defaultBaseUrl).toBe("http://127.0.0.1:8080/api/v3");
    expect(fromUrl.operations[0].descriptor.server).toEqual({ url: "http://127.0.0.1:8080/api/v3" });

    const fromFile = mapOpenApi(relative, { ...OPTIONS, location: "/tmp/openapi.yaml" });
    expect(fromFile.defaultBaseUrl).toBe("");
    expect(fromFile.operations[0].descriptor.server).toEqual({ url: "" });
    expect(fromFile.operations[0].notes).toContain('the server URL "/api/v3" is relative and the document was not read from a URL; the base URL must be set');
    expect(fromFile.settings[0]).toEqual({ name: "ZOO_BASE_URL", description: "Base URL of Zoo, replacing the server URL the document names (it names no absolute one, so this must be set)." });
  });
});

describe("node types", () => {
  const document = doc({
    "/animals": {
      get: { operationId: "listAnimals", summary: "List the animals.", responses: ok },
      post: { operationId: "addAnimal", description: "Adds an animal\nto the zoo.\n\nMore text here.", responses: ok },
      put: { operationId: "replaceAnimals", deprecated: true, responses: ok },
      patch: { operationId: "patchAnimals", responses: ok },
      delete: { operationId: "deleteAnimals", responses: ok },
      head: { operationId: "headAnimals", responses: ok },
      options: { operationId: "optionsAnimals", responses: ok },
      trace: { operationId: "traceAnimals", responses: ok },
    },
  });
  const mapping = mapOpenApi(document, { ...OPTIONS, nodeTypeVersion: "2.1.0" });

  it("makes valid atomic NodeTypes carrying their descriptor", () => {
    const validate = validatorFor("node_type");
    for (const o of mapping.operations) {
      expect(validate(o.nodeType), JSON.stringify(validate.errors)).toBe(true);
      expect(o.nodeType).toMatchObject({ version: "2.1.0", kind: "atomic" });
      expect(o.nodeType.extensions!["nodefabric.openapi"]).toBe(o.descriptor);
      expect(o.descriptor.api).toEqual({ title: "Zoo", version: "1.0.0" });
    }
  });

  it("describes each operation by its summary or the first paragraph of its description", () => {
    expect(op(mapping, "zoo.listAnimals").nodeType.description).toBe("List the animals: calls GET /animals of Zoo.");
    expect(op(mapping, "zoo.addAnimal").nodeType.description).toBe("Adds an animal to the zoo: calls POST /animals of Zoo.");
    expect(op(mapping, "zoo.replaceAnimals").nodeType.description).toBe("Calls PUT /animals of Zoo. Deprecated by the API.");
  });

  it("sets side_effect_class by method", () => {
    const classes = Object.fromEntries(mapping.operations.map((o) => [o.descriptor.method, o.nodeType.constraints!.gates!.side_effect_class]));
    expect(classes).toEqual({ GET: "read", HEAD: "read", OPTIONS: "read", TRACE: "read", POST: "write", PUT: "write", PATCH: "write", DELETE: "irreversible" });
  });
});

describe("$refs and broken documents", () => {
  const document = doc(
    {
      "/shared": { $ref: "#/components/pathItems/Shared" },
      "/copy": { $ref: "#/paths/~1original" },
      "/original": {
        get: {
          operationId: "original",
          parameters: [{ name: "q", in: "query", schema: { $ref: "#/paths/~1original/get/responses/200/content/application~1json/schema" } }],
          responses: { "200": { description: "x", content: { "application/json": { schema: { type: "object", properties: { n: { type: "integer" } } } } } } },
        },
      },
      "/missing": { $ref: "#/components/pathItems/Nope" },
      "/bad-parameter": { get: { operationId: "badParameter", parameters: [{ $ref: "#/components/parameters/Nope" }], responses: ok } },
      "/bad-body": { post: { operationId: "badBody", requestBody: { $ref: "#/components/requestBodies/Nope" }, responses: ok } },
      // The schema converter mends most faults; one it passes on (dependentRequired needs a list) cannot compile.
      "/bad-schema": { get: { operationId: "badSchema", responses: { "200": { description: "x", content: { "application/json": { schema: { type: "object", dependentRequired: { id: "name" } } } } } } } },
      "/not-an-operation": { get: "nothing", post: { operationId: "fine", responses: ok } },
      "/bad-component": {
        get: { operationId: "badComponentOut", responses: { "200": { description: "x", content: { "application/json": { schema: { $ref: "#/components/schemas/Bad" } } } } } },
        post: { operationId: "badComponentIn", requestBody: { content: { "application/json": { schema: { type: "array", items: { $ref: "#/components/schemas/Bad" } } } } }, responses: ok },
      },
    },
    {
      openapi: "3.1.0",
      components: {
        pathItems: { Shared: { get: { operationId: "shared", responses: ok } } },
        schemas: { Bad: { type: "object", properties: { a: { type: "string" } }, dependentRequired: { a: "b" } } },
      },
    },
  );
  const mapping = mapOpenApi(document, OPTIONS);

  it("reads path items given by $ref, including #/paths/… pointers", () => {
    expect(op(mapping, "zoo.shared").descriptor.path).toBe("/shared");
    // /copy comes first in the document, so it has the plain id.
    expect(op(mapping, "zoo.original").descriptor.path).toBe("/copy");
    expect(op(mapping, "zoo.original-2").descriptor.path).toBe("/original");
    expect(accepts(op(mapping, "zoo.original").nodeType.input_schema, { q: { n: 1 } })).toBe(true);
  });

  it("lists every operation it cannot make, with the reason", () => {
    const reasons = Object.fromEntries(mapping.leftOut.map((l) => [`${l.method} ${l.path}`, l.reason]));
    expect(reasons["* /missing"]).toBe("its path item cannot be read: the $ref #/components/pathItems/Nope names nothing in the document");
    expect(reasons["GET /bad-parameter"]).toBe("a parameter cannot be read: the $ref #/components/parameters/Nope names nothing in the document");
    expect(reasons["POST /bad-body"]).toBe("its request body cannot be read: the $ref #/components/requestBodies/Nope names nothing in the document");
    expect(reasons["GET /bad-schema"]).toMatch(/^its output schema does not compile: schema is invalid: .*dependentRequired/);
    expect(reasons["GET /not-an-operation"]).toBe("the operation is not an object");
    // A shared definition that does not compile leaves out every operation that uses it, with the compile's own error.
    expect(reasons["GET /bad-component"]).toMatch(/^its output schema does not compile: schema is invalid: data\/\$defs\/Bad\/dependentRequired\/a must be array/);
    expect(reasons["POST /bad-component"]).toMatch(/^its input schema does not compile: schema is invalid: data\/\$defs\/Bad\/dependentRequired\/a must be array/);
    expect(mapping.operations.length + mapping.leftOut.length).toBe(11);
  });

  it("lists what needs a file that could not be read, and accounts for every operation", async () => {
    const loaded = await loadOpenApi(path.join(fixtures, "dangling.yaml"));
    const dangling = mapOpenApi(loaded.document, OPTIONS);

    expect(dangling.leftOut).toContainEqual({
      method: "*",
      path: "/elsewhere",
      reason: "its path item cannot be read: the $ref ./not-there.yaml#/paths/elsewhere names another document, which could not be brought in",
    });
    expect(dangling.operations.length + dangling.leftOut.length).toBe(3);
    expect(op(dangling, "zoo.listItems").descriptor.response.outputs).toBe("object");
  });

  it("refuses a document without paths", () => {
    expect(() => mapOpenApi({ openapi: "3.0.0", info: { title: "x", version: "1" } } as OpenApiDocument, OPTIONS)).toThrow(/has no paths/);
  });
});

describe("what a request cannot carry", () => {
  const document = doc(
    {
      "/search": {
        get: { operationId: "search", requestBody: { content: { "application/json": { schema: { type: "object" } } } }, responses: ok },
        head: { operationId: "mustSend", requestBody: { required: true, content: { "application/json": { schema: { type: "object" } } } }, responses: ok },
      },
      "/headers": {
        get: {
          operationId: "headers",
          parameters: [
            { name: "Bad Header", in: "header", schema: { type: "string" } },
            { name: "", in: "query", schema: { type: "string" } },
          ],
          responses: ok,
        },
        post: { operationId: "badRequiredHeader", parameters: [{ name: "X(y)", in: "header", required: true, schema: { type: "string" } }], responses: ok },
        put: { operationId: "badKey", security: [{ badKey: [] }], responses: ok },
      },
      "relative/{id}": { get: { operationId: "relative", responses: ok } },
    },
    { components: { securitySchemes: { badKey: { type: "apiKey", in: "header", name: "X Key" } } } },
  );
  const mapping = mapOpenApi(document, OPTIONS);

  it("leaves out an optional body of GET or HEAD, with a note, and an operation whose body is required", () => {
    expect(op(mapping, "zoo.search").descriptor.body).toBeUndefined();
    expect(Object.keys((op(mapping, "zoo.search").nodeType.input_schema as any).properties)).toEqual([]);
    expect(op(mapping, "zoo.search").notes).toContain("its optional request body is left out: a GET request cannot carry one");
    expect(mapping.leftOut).toContainEqual({ method: "HEAD", path: "/search", operationId: "mustSend", reason: "its request body is required, and a HEAD request cannot carry one" });
  });

  it("leaves out header names HTTP cannot carry, and an operation that needs one", () => {
    expect(op(mapping, "zoo.headers").descriptor.parameters).toEqual([]);
    expect(op(mapping, "zoo.headers").notes).toEqual(
      expect.arrayContaining(['the header parameter "Bad Header" is ignored (not a valid header name)', "a query parameter with an empty name is ignored"]),
    );
    expect(mapping.leftOut).toContainEqual({ method: "POST", path: "/headers", operationId: "badRequiredHeader", reason: 'its required header parameter "X(y)" is not a valid header name' });
    expect(mapping.leftOut).toContainEqual({
      method: "PUT",
      path: "/headers",
      operationId: "badKey",
      reason: 'its security cannot be met by a node type: the apiKey scheme badKey is sent in the header "X Key", which is not a valid header name',
    });
  });

  it("sends a path the document wrote without its leading slash from the root", () => {
    expect(op(mapping, "zoo.relative").descriptor.path).toBe("/relative/{id}");
  });
});

describe("progress", () => {
  it("reports every 100 operations of a big document", () => {
    const paths = Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`/r${i}`, { get: { operationId: `op${i}`, responses: ok } }]));
    const lines: string[] = [];
    const mapping = mapOpenApi(doc(paths), { ...OPTIONS, onProgress: (m) => lines.push(m) });

    expect(mapping.operations).toHaveLength(250);
    expect(lines).toEqual(["mapped 100 of 250 operations", "mapped 200 of 250 operations", "mapped 250 of 250 operations"]);
  });
});

describe("documents from loadOpenApi", () => {
  it("maps the Petstore fixture: ids, inputs, server variables, outputs, valid node types", async () => {
    const loaded = await loadOpenApi(petstoreFile);
    const mapping = mapOpenApi(loaded.document, { prefix: "petstore", settingsPrefix: "PETSTORE", location: loaded.location });

    expect(mapping.title).toBe("Petstore");
    expect(mapping.apiVersion).toBe("2.3.0");
    expect(mapping.defaultBaseUrl).toBe("https://eu.petstore.example.com/v2");
    expect(mapping.leftOut).toEqual([]);
    expect(mapping.operations.map((o) => o.nodeType.node_type_id)).toEqual([
      "petstore.listPets",
      "petstore.createPet",
      "petstore.getPet",
      "petstore.deletePet",
      "petstore.get-store-inventory",
    ]);
    const list = op(mapping, "petstore.listPets");
    expect(list.descriptor.response).toEqual({ status: 200, outputs: "result", media_type: "application/json" });
    expect(accepts(list.nodeType.input_schema, { limit: 20, species: "dog" })).toBe(true);
    expect(accepts(list.nodeType.input_schema, { limit: 0 })).toBe(false);
    expect(accepts(list.nodeType.input_schema, { species: "fish" })).toBe(false);
    const create = op(mapping, "petstore.createPet");
    // `id` is readOnly: a request may leave it out.
    expect(accepts(create.nodeType.input_schema, { body: { name: "Biscuit", species: "dog", birth_date: null } })).toBe(true);
    expect(create.descriptor.response).toEqual({ status: 201, outputs: "object", media_type: "application/json" });
    expect(op(mapping, "petstore.getPet").descriptor.parameters.map((p) => `${p.in}:${p.name}`)).toEqual(["path:petId", "header:X-Request-Id"]);
    expect(op(mapping, "petstore.deletePet").descriptor.response).toEqual({ status: 204, outputs: "none" });
    expect(op(mapping, "petstore.get-store-inventory").descriptor.response.outputs).toBe("object");
    expect(mapping.settings.map((s) => s.name)).toEqual(["PETSTORE_BASE_URL", "PETSTORE_SERVER_REGION"]);
    expect(mapping.secrets).toEqual([]);
    expect(mapping.notes).toContain("the document declares no security schemes: its operations are called without credentials");
    const validate = validatorFor("node_type");
    for (const o of mapping.operations) expect(validate(o.nodeType)).toBe(true);
  });

  it("maps the real Swagger Petstore (OpenAPI 3.0) of the corpus", async () => {
    const loaded = await loadOpenApi(path.join(corpus, "petstore-v3.yaml"));
    const mapping = mapOpenApi(loaded.document, { prefix: "petstore", settingsPrefix: "PETSTORE", location: loaded.location });

    expect(mapping.leftOut).toEqual([]);
    expect(mapping.operations).toHaveLength(19);
    expect(mapping.defaultBaseUrl).toBe("https://petstore3.swagger.io/api/v3");
    // loginUser answers a JSON string: the outputs are { result }.
    const login = op(mapping, "petstore.loginUser");
    expect(login.descriptor.response).toEqual({ status: 200, outputs: "result", media_type: "application/json" });
    expect(accepts(login.nodeType.output_schema, { result: "logged in user session: 1" })).toBe(true);
    // uploadFile's optional octet-stream body is an optional base64 input, not dropped.
    const upload = op(mapping, "petstore.uploadFile");
    expect(upload.descriptor.body).toEqual({ input: "body", media_type: "application/octet-stream", encoding: "binary", required: false });
    expect((upload.nodeType.input_schema as any).properties.body).toMatchObject({ type: "string", contentEncoding: "base64" });
    expect(upload.nodeType.input_schema!.required).toEqual(["petId"]);
    // JSON is chosen over XML and form bodies, with a note.
    expect(op(mapping, "petstore.addPet").descriptor.body).toEqual({ input: "body", media_type: "application/json", encoding: "json", required: true });
    expect(mapping.notes).toContain("request body: application/json chosen among application/json, application/xml, application/x-www-form-urlencoded (5 operations)");
    // Security: an API key or OAuth 2 (implicit flow: a token given as a secret).
    const getPet = op(mapping, "petstore.getPetById");
    expect(getPet.descriptor.security).toEqual([["api_key"], ["petstore_auth"]]);
    expect(getPet.descriptor.security_schemes).toEqual({
      api_key: { type: "apiKey", in: "header", name: "api_key", secret: "PETSTORE_API_KEY" },
      petstore_auth: { type: "oauth2", scopes: ["write:pets", "read:pets"], access_token_secret: "PETSTORE_AUTH_ACCESS_TOKEN" },
    });
    expect(mapping.secrets.map((s) => s.name).sort()).toEqual(["PETSTORE_API_KEY", "PETSTORE_AUTH_ACCESS_TOKEN"]);
    // deletePet's api_key header parameter is an input like any other.
    expect(op(mapping, "petstore.deletePet").descriptor.parameters.map((p) => `${p.in}:${p.input}`)).toEqual(["header:api_key", "path:petId"]);
    expect(op(mapping, "petstore.deletePet").nodeType.constraints!.gates!.side_effect_class).toBe("irreversible");
  });

  it("maps a converted Swagger 2.0 document: its notes, file uploads, OAuth 2 application flow and API key", async () => {
    const loaded = await loadOpenApi(path.join(fixtures, "kennel-swagger2.yaml"));
    const mapping = mapOpenApi(loaded.document, { prefix: "kennel", settingsPrefix: "KENNEL", location: loaded.location });

    expect(mapping.notes[0]).toMatch(/^converted from Swagger 2\.0 to OpenAPI 3\.0/);
    expect(mapping.leftOut).toEqual([]);
    const list = op(mapping, "kennel.listDogs");
    expect(list.descriptor.parameters).toEqual([{ input: "breed", name: "breed", in: "query", style: "form", explode: false }]);
    expect(list.descriptor.security_schemes).toEqual({ kennel_key: { type: "apiKey", in: "header", name: "X-Kennel-Key", secret: "KENNEL_KEY" } });
    const add = op(mapping, "kennel.addDog");
    expect(add.descriptor.security_schemes.kennel_oauth).toEqual({
      type: "oauth2",
      token_url: "https://auth.kennel.example.com/token",
      scopes: ["dogs:write"],
      client_id_secret: "KENNEL_OAUTH_CLIENT_ID",
      client_secret_secret: "KENNEL_OAUTH_CLIENT_SECRET",
      access_token_secret: "KENNEL_OAUTH_ACCESS_TOKEN",
    });
    const upload = op(mapping, "kennel.uploadDogPhoto");
    expect(upload.descriptor.body).toMatchObject({ media_type: "multipart/form-data", encoding: "multipart", required: true, binary_fields: ["photo"] });
    expect(accepts(upload.nodeType.input_schema, { dogId: 1, body: { photo: "aGk=", caption: "Rex" } })).toBe(true);
    expect(accepts(upload.nodeType.input_schema, { dogId: 1, body: { caption: "Rex" } })).toBe(false);
    expect(mapping.defaultBaseUrl).toBe("https://kennel.example.com/v2");
  });

  it("accounts for every operation of every real-world document of test/fixtures/openapi that is there, with valid node types", async () => {
    const files = existsSync(corpus) ? readdirSync(corpus).filter((f) => /\.(ya?ml|json)$/.test(f) && f !== "corpus.json") : [];
    const validate = validatorFor("node_type");
    for (const file of files) {
      const loaded = await loadOpenApi(path.join(corpus, file));
      const mapping = mapOpenApi(loaded.document, { prefix: "corpus", settingsPrefix: "CORPUS", location: loaded.location });
      let declared = 0;
      for (const item of Object.values(loaded.document.paths ?? {}) as Array<Record<string, unknown> | null>) {
        const resolved = typeof item?.$ref === "string" && item.$ref.startsWith("#") ? undefined : item;
        declared += resolved ? Object.keys(resolved).filter((k) => ["get", "put", "post", "delete", "options", "head", "patch", "trace"].includes(k.toLowerCase())).length : 1;
      }
      const pathItemRefs = mapping.leftOut.filter((l) => l.method === "*").length;
      expect(mapping.operations.length + mapping.leftOut.length, file).toBeGreaterThanOrEqual(declared - pathItemRefs);
      for (const l of mapping.leftOut) expect(l.reason, `${file} ${l.method} ${l.path}`).toMatch(/\S/);
      for (const o of mapping.operations) expect(validate(o.nodeType), `${file} ${o.nodeType.node_type_id}`).toBe(true);
    }
  }, 300_000);
});
