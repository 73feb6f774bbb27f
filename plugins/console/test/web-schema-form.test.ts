import { describe, expect, it } from "vitest";
import { initialValue, kindOf, pointerGet, resolve, withChild } from "../web/src/schema-model";
import { schemaChecker, serverFieldErrors } from "../web/src/schema-validation";

// What the start page makes of an input_schema (which input each field gets, the value a form starts from) and how
// it files validation errors beside the fields, by JSON Pointer.

const schema = {
  type: "object",
  required: ["city", "when", "tags", "address"],
  properties: {
    city: { type: "string", minLength: 2, default: "Oslo" },
    units: { enum: ["metric", "imperial"] },
    when: { type: "string", format: "date-time" },
    days: { type: "integer", minimum: 1, maximum: 14 },
    tags: { type: "array", items: { type: "string" } },
    address: { $ref: "#/$defs/address" },
    extra: { type: "object" },
    either: { oneOf: [{ type: "string" }, { type: "number" }] },
    nullable: { type: ["string", "null"] },
    "a/b": { type: "boolean" },
  },
  $defs: {
    address: { type: "object", required: ["zip"], properties: { zip: { type: "string", pattern: "^[0-9]{4}$" }, country: { type: "string", default: "NO" } } },
  },
};

describe("the start form's reading of a schema", () => {
  it("gives each field the input its schema calls for, and JSON where a form cannot do it justice", () => {
    const kind = (name: string) => kindOf(resolve((schema.properties as Record<string, unknown>)[name], schema));
    expect(["city", "units", "when", "days", "tags", "address", "extra", "either", "nullable", "a/b"].map(kind)).toEqual([
      "string",
      "enum",
      "string",
      "integer",
      "array",
      "object",
      "json",
      "json",
      "string",
      "boolean",
    ]);
  });

  it("starts from the defaults, with required arrays and objects built out", () => {
    expect(initialValue(schema, schema)).toEqual({ city: "Oslo", tags: [], address: { country: "NO" } });
  });

  it("sets and reads values by JSON Pointer without changing the original", () => {
    const v = { a: 1 };
    expect(withChild(v, "b", 2)).toEqual({ a: 1, b: 2 });
    expect(withChild(v, "a", undefined)).toEqual({});
    expect(v).toEqual({ a: 1 });
    expect(withChild(["x"], 1, "y")).toEqual(["x", "y"]);
    expect(pointerGet({ "a/b": { "c~d": 3 } }, "/a~1b/c~0d")).toBe(3);
  });
});

describe("the start form's validation", () => {
  it("files each error under the pointer of its field, a missing property under the property", () => {
    const errors = schemaChecker(schema).check({ city: "O", when: "yesterday", tags: ["x", 3], address: { zip: "12" }, days: 20 });
    expect(Object.fromEntries(errors)).toMatchObject({
      "/city": [expect.stringMatching(/length|short|2/i)],
      "/when": [expect.stringMatching(/date-time|format/i)],
      "/tags/1": [expect.stringMatching(/type|string/i)],
      "/address/zip": [expect.stringMatching(/pattern/i)],
      "/days": [expect.stringMatching(/14|maximum|greater/i)],
    });
    expect(schemaChecker(schema).check({ city: "Oslo", when: "2026-11-25T21:00:00Z", tags: [], address: {} }).get("/address/zip")).toEqual(["is required"]);
    expect(schemaChecker(schema).check({ city: "Oslo", when: "2026-11-25T21:00:00Z", tags: [], address: { zip: "0150" } }).size).toBe(0);
  });

  it("says which property additionalProperties: false refuses, on the object that holds it", () => {
    const strict = { type: "object", additionalProperties: false, properties: { a: { type: "string" } } };
    expect(Object.fromEntries(schemaChecker(strict).check({ a: "x", zz: 1 }))).toEqual({ "": ['has a property the schema does not allow: "zz"'] });
  });

  it("keeps the server's details.errors beside the fields too", () => {
    const errors = serverFieldErrors({
      errors: [
        { path: "/input/city", message: "must be a string" },
        { path: "/run_id", message: "bad id" },
      ],
    });
    expect(Object.fromEntries(errors)).toEqual({ "/city": ["must be a string"], "": ["/run_id: bad id"] });
  });
});
