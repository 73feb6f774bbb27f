// The package's public API as a service author uses it.
import { describe, it, expect } from "vitest";
import {
  CLIENT_ID_PATTERN,
  EXTENSION_KEY_PATTERN,
  SCHEMA_BASE,
  createAjv,
  schemaId,
  schemas,
  validatorFor,
  type RunStartRequest,
  type SchemaName,
} from "../../schemas/src/index.js";

describe("@nodefabric/schemas API", () => {
  it("schemaId builds the $id from SCHEMA_BASE", () => {
    expect(SCHEMA_BASE).toBe("https://nodefabric.dev/schemas/v1/");
    expect(schemaId("run_start_request")).toBe("https://nodefabric.dev/schemas/v1/run_start_request.schema.json");
    for (const name of Object.keys(schemas) as SchemaName[]) expect(schemas[name].$id).toBe(schemaId(name));
  });

  it("validatorFor accepts a good payload, explains a bad one, and narrows the type", () => {
    const validate = validatorFor("run_start_request");
    const body: unknown = { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { text: "hi" } };
    expect(validate(body)).toBe(true);
    if (validate(body)) {
      const typed: RunStartRequest = body;
      expect(typed.root_node_type_ref.node_type_id).toBe("demo.echo");
    }
    expect(validate({ root_node_type_ref: { node_type_id: "demo.echo" }, input: {}, extra: 1 })).toBe(false);
    const messages = (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
    expect(messages).toContain("/root_node_type_ref must have required property 'version'");
    expect(messages).toContain(" must NOT have additional properties");
  });

  it("validatorFor compiles once and caches", () => {
    expect(validatorFor("run")).toBe(validatorFor("run"));
    expect(validatorFor("run")).not.toBe(validatorFor("node_run"));
  });

  it("validatorFor checks formats", () => {
    const validate = validatorFor("run_event");
    const event = { run_id: "run_1", seq: 0, type: "run_started", time: "2025-11-22T04:30:00Z" };
    expect(validate(event)).toBe(true);
    expect(validate({ ...event, time: "2025-11-22" })).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({ instancePath: "/time", keyword: "format" });
  });

  it("createAjv knows every schema by $id and compiles all of them in strict mode without warnings", () => {
    const warnings: unknown[] = [];
    const logger = { log: (...a: unknown[]) => warnings.push(a), warn: (...a: unknown[]) => warnings.push(a), error: (...a: unknown[]) => warnings.push(a) };
    const ajv = createAjv({ logger });
    for (const name of Object.keys(schemas) as SchemaName[]) expect(ajv.getSchema(schemaId(name)), name).toBeTypeOf("function");
    expect(warnings).toEqual([]);
  });

  it("createAjv passes options through and returns independent instances", () => {
    const ajv = createAjv({ allErrors: false });
    expect(ajv.opts.allErrors).toBe(false);
    expect(createAjv()).not.toBe(createAjv());
    const validate = ajv.getSchema(schemaId("node_type_ref"))!;
    validate({ node_type_id: "", version: "" });
    expect(validate.errors).toHaveLength(1);
  });

  it("lets a service reference the payloads from its own schemas", () => {
    const ajv = createAjv();
    const validate = ajv.compile({
      type: "object",
      properties: { run: { $ref: schemaId("run") } },
      required: ["run"],
      additionalProperties: false,
    });
    expect(validate({ run: { run_id: "run_1", state: "running", root_node_run_id: "nr_1" } })).toBe(true);
    expect(validate({ run: { run_id: "run_1", state: "succeeded", root_node_run_id: "nr_1" } })).toBe(false);
  });

  it("exports the extension key and client id patterns the schemas use", () => {
    expect(EXTENSION_KEY_PATTERN.source).toBe((schemas.extensions.propertyNames as { pattern: string }).pattern);
    expect(CLIENT_ID_PATTERN.source).toBe(schemas.run_start_request.properties.run_id.pattern);
    expect(EXTENSION_KEY_PATTERN.test("nodefabric.attempt")).toBe(true);
    expect(EXTENSION_KEY_PATTERN.test("attempt")).toBe(false);
    expect(CLIENT_ID_PATTERN.test("digest-2025:weekly")).toBe(true);
    expect(CLIENT_ID_PATTERN.test("-digest")).toBe(false);
  });
});
