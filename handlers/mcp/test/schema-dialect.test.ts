/**
 * draft-07 tool schemas become the same constraints in 2020-12 (the fabric's dialect): what a draft-07 validator
 * accepts and refuses, a 2020-12 validator of the rewritten schema accepts and refuses too.
 */
import { describe, it, expect } from "vitest";
import { Ajv } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import { isDraft07, toDraft2020 } from "../src/schema-dialect.js";

const DRAFT07 = {
  $schema: "http://json-schema.org/draft-07/schema#",
  type: "object",
  definitions: { id: { type: "string", pattern: "^[a-z]+$" } },
  properties: {
    pair: { type: "array", items: [{ $ref: "#/definitions/id" }, { type: "number" }], additionalItems: false },
    list: { type: "array", items: { $ref: "#/definitions/id" } },
    card: { type: "string" },
    billing: { type: "string" },
    nested: { anyOf: [{ type: "object", properties: { t: { type: "array", items: [{ type: "boolean" }] } } }, { type: "null" }] },
  },
  dependencies: { card: ["billing"], billing: { properties: { card: { minLength: 4 } } } },
};

const CASES: unknown[] = [
  { pair: ["ab", 1] },
  { pair: ["ab", 1, 2] },
  { pair: ["AB", 1] },
  { list: ["a", "b"] },
  { list: ["a", "B"] },
  { card: "1234", billing: "x" },
  { card: "1234" },
  { card: "12", billing: "x" },
  { nested: { t: [true, "anything after the tuple"] } },
  { nested: { t: ["no"] } },
  { nested: null },
];

describe("draft-07 to 2020-12", () => {
  it("keeps what draft-07 accepts and refuses, case by case", () => {
    const before = new Ajv({ strict: false }).compile(DRAFT07);
    const rewritten = toDraft2020(DRAFT07);
    expect(rewritten.$schema).toBeUndefined();
    expect(rewritten.definitions).toEqual(DRAFT07.definitions);
    const after = new Ajv2020({ strict: false }).compile(rewritten);
    for (const value of CASES) expect(after(value), JSON.stringify(value)).toBe(before(value));
    // The cases cover both answers.
    expect(CASES.filter((v) => before(v)).length).toBeGreaterThan(2);
    expect(CASES.filter((v) => !before(v)).length).toBeGreaterThan(2);
  });

  it("leaves a 2020-12 schema, or one naming no dialect, as it is", () => {
    const s2020 = { $schema: "https://json-schema.org/draft/2020-12/schema", type: "object", prefixItems: [] };
    expect(toDraft2020(s2020)).toBe(s2020);
    const plain = { type: "object", properties: { a: { type: "array", items: { type: "string" } } } };
    expect(toDraft2020(plain)).toBe(plain);
    expect(isDraft07({ $schema: "http://json-schema.org/draft-07/schema" })).toBe(true);
    expect(isDraft07(plain)).toBe(false);
  });
});
