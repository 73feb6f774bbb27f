import { describe, expect, it } from "vitest";
import { describesOnlyObjects, toJsonSchema } from "../src/openapi-schema.js";
import { exampleOf } from "../src/schema-example.js";

describe("OpenAPI 3.0 schemas as JSON Schema 2020-12", () => {
  it("turn nullable into a null type, or a null alternative when there is no type", () => {
    expect(toJsonSchema({ type: "string", nullable: true, enum: ["a", "b"] }, "response", "3.0.3")).toEqual({ type: ["string", "null"], enum: ["a", "b", null] });
    expect(toJsonSchema({ nullable: true, allOf: [{ type: "object" }] }, "response", "3.0.3")).toEqual({ anyOf: [{ allOf: [{ type: "object" }] }, { type: "null" }] });
    // 3.1 has no nullable: it is left alone (and dropped).
    expect(toJsonSchema({ type: "string", nullable: true }, "response", "3.1.0")).toEqual({ type: "string" });
  });

  it("turn boolean exclusiveMinimum/exclusiveMaximum into the numeric keywords", () => {
    expect(toJsonSchema({ type: "number", minimum: 0, exclusiveMinimum: true, maximum: 10, exclusiveMaximum: false }, "request", "3.0.0")).toEqual({
      type: "number",
      exclusiveMinimum: 0,
      maximum: 10,
    });
  });

  it("keep examples as `examples`, and drop OpenAPI-only keywords", () => {
    expect(toJsonSchema({ type: "string", example: "x", xml: { name: "n" }, externalDocs: { url: "u" }, discriminator: { propertyName: "k" } }, "request", "3.0.3")).toEqual({
      type: "string",
      examples: ["x"],
    });
  });

  it("leave read-only properties out of requests and write-only ones out of responses, nested too", () => {
    const account = {
      type: "object",
      required: ["id", "password", "name"],
      properties: {
        id: { type: "string", readOnly: true },
        password: { type: "string", writeOnly: true },
        name: { type: "string" },
        items: { type: "array", items: { type: "object", required: ["sku"], properties: { sku: { type: "string", readOnly: true } } } },
      },
    };
    const request = toJsonSchema(account, "request", "3.0.3") as any;
    expect(Object.keys(request.properties)).toEqual(["password", "name", "items"]);
    expect(request.required).toEqual(["password", "name"]);
    expect(request.properties.items.items).toEqual({ type: "object", properties: {} });
    const response = toJsonSchema(account, "response", "3.0.3") as any;
    expect(Object.keys(response.properties)).toEqual(["id", "name", "items"]);
  });
});

describe("object answers", () => {
  it("are recognised by type, by object keywords, or by every branch being an object", () => {
    expect(describesOnlyObjects({ type: "object" })).toBe(true);
    expect(describesOnlyObjects({ properties: {} })).toBe(true);
    expect(describesOnlyObjects({ allOf: [{ type: "object" }, { required: ["a"] }] })).toBe(true);
    expect(describesOnlyObjects({ oneOf: [{ type: "object" }, { type: "object" }] })).toBe(true);
    expect(describesOnlyObjects({ oneOf: [{ type: "object" }, { type: "string" }] })).toBe(false);
    expect(describesOnlyObjects({ type: ["object", "null"] })).toBe(false);
    expect(describesOnlyObjects({ type: "array" })).toBe(false);
    expect(describesOnlyObjects({})).toBe(false);
  });
});

describe("examples", () => {
  it("prefer the document's own values, then fit the constraints", () => {
    expect(exampleOf({ type: "string", examples: ["Biscuit"] })).toBe("Biscuit");
    expect(exampleOf({ type: "integer", default: 20, minimum: 1 })).toBe(20);
    expect(exampleOf({ type: "string", enum: ["dog", "cat"] })).toBe("dog");
    expect(exampleOf({ type: "integer", minimum: 5, multipleOf: 4 })).toBe(8);
    expect(exampleOf({ type: "number", exclusiveMinimum: 0, maximum: 0.25 })).toBe(0.25);
    expect(exampleOf({ type: "string", minLength: 10 })).toBe("examplexxx");
    expect(exampleOf({ type: "string", format: "date-time" })).toBe("2025-01-15T09:30:00Z");
    expect(exampleOf({ type: ["null", "boolean"] })).toBe(true);
  });

  it("build objects and arrays from their parts", () => {
    expect(
      exampleOf({
        type: "object",
        required: ["id"],
        properties: { id: { type: "integer" }, tags: { type: "array", items: { type: "string" }, minItems: 2, uniqueItems: true } },
      }),
    ).toEqual({ id: 1, tags: ["example", "example2"] });
    expect(exampleOf({ allOf: [{ type: "object", properties: { a: { type: "string" } } }, { properties: { b: { type: "boolean" } } }] })).toEqual({ a: "example", b: true });
    expect(exampleOf({ oneOf: [{ type: "null" }, { type: "integer", minimum: 3 }] })).toBe(3);
    expect(exampleOf({ type: "object", additionalProperties: { type: "integer", minimum: 0 } })).toEqual({ example: 0 });
  });
});
