// The cheap check of a node type's schemas (schemaProblem): what the registry runs at publish and the executor at
// load instead of compiling. It must refuse what Ajv's compile refuses in the common cases, with the same message, and
// pass what compiles; the comparison with a real compile keeps it honest.
import { describe, it, expect } from "vitest";
import { compileHandlerSchema, createHandlerAjv, schemaProblem } from "@nodefabric/sdk/runtime";

/** Ajv's verdict: undefined when the schema compiles, else its message. */
function compileProblem(schema: Record<string, unknown>): string | undefined {
  try {
    compileHandlerSchema(createHandlerAjv(), schema);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** An input schema as generated from an OpenAPI operation: 20 properties, nested $defs, patterns, formats. */
function realistic(): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < 20; i++) {
    properties[`field${i}`] =
      i % 4 === 0 ? { $ref: "#/$defs/Address" } : i % 4 === 1 ? { type: "string", pattern: "^\\p{L}[\\p{L} .'-]*$", maxLength: 80 } : i % 4 === 2 ? { type: "string", format: "date-time" } : { type: "integer", minimum: 0 };
  }
  return {
    type: "object",
    properties,
    required: ["field0", "field1"],
    additionalProperties: false,
    patternProperties: { "^x-[a-z]+$": { type: "string" } },
    $defs: {
      Address: { type: "object", properties: { street: { type: "string" }, country: { $ref: "#/$defs/Country" }, geo: { $ref: "#geo" } } },
      Country: { type: "string", enum: ["NO", "SE", "DK"] },
      Geo: { $anchor: "geo", type: "array", prefixItems: [{ type: "number" }, { type: "number" }] },
    },
    examples: [{ $ref: "this is data, not a reference" }],
  };
}

describe("schemaProblem, the check that stands in for a compile", () => {
  it("passes a realistic generated schema, and a missing one", () => {
    expect(schemaProblem(realistic())).toBeUndefined();
    expect(compileProblem(realistic())).toBeUndefined();
    expect(schemaProblem(undefined)).toBeUndefined();
    expect(schemaProblem(true)).toBeUndefined();
  });

  it("refuses a schema that breaks the meta-schema with the message Ajv's compile gives", () => {
    for (const schema of [{ type: "objekt" }, { properties: { x: { minimum: "ten" } } }, { required: "name" }, { $id: "https://acme.example/s.json#frag" }]) {
      const problem = schemaProblem(schema);
      expect(problem, JSON.stringify(schema)).toBeDefined();
      expect(problem).toBe(compileProblem(schema));
    }
  });

  it("refuses a $schema this Ajv does not hold, as a compile would", () => {
    const schema = { $schema: "http://json-schema.org/draft-07/schema#", type: "object" };
    expect(schemaProblem(schema)).toBe(compileProblem(schema));
  });

  it("refuses a pattern or a patternProperties key that is no regular expression under the u flag, naming where", () => {
    expect(schemaProblem({ type: "object", properties: { a: { type: "string", pattern: "[a-" } } })).toMatch(
      /^pattern "\[a-" at \/properties\/a\/pattern is not a valid regular expression with the u flag: /,
    );
    expect(schemaProblem({ patternProperties: { "(": {} } })).toMatch(/^pattern "\(" at \/patternProperties\/\( is not a valid regular expression/);
    // Valid without the u flag, invalid with it: what Ajv compiles with.
    expect(schemaProblem({ pattern: "\\-\\q" })).toMatch(/not a valid regular expression with the u flag/);
    expect(compileProblem({ pattern: "\\-\\q" })).toBeDefined();
    // A property named "pattern" is a name, not a keyword.
    expect(schemaProblem({ properties: { pattern: { type: "string" } } })).toBeUndefined();
  });

  it("refuses a $ref that does not resolve inside the document, and one to another document", () => {
    expect(schemaProblem({ properties: { a: { $ref: "#/$defs/Missing" } } })).toBe('$ref "#/$defs/Missing" at /properties/a/$ref does not resolve: nothing is at #/$defs/Missing');
    expect(compileProblem({ properties: { a: { $ref: "#/$defs/Missing" } } })).toBeDefined();
    expect(schemaProblem({ $ref: "#nowhere" })).toMatch(/does not resolve: no \$anchor "nowhere"/);
    expect(schemaProblem({ $ref: "https://elsewhere.example/x.json" })).toMatch(/points outside the schema/);
    expect(schemaProblem({ $ref: "other.json#/a" })).toMatch(/points outside the schema/);
    expect(compileProblem({ $ref: "https://elsewhere.example/x.json" })).toBeDefined();
  });

  it("resolves $refs against the $id of the resource they are in, and to the 2020-12 meta-schema", () => {
    const nested = {
      $id: "https://acme.example/root.json",
      properties: {
        inner: { $id: "inner.json", $defs: { A: { type: "string" } }, properties: { a: { $ref: "#/$defs/A" } } },
        viaUri: { $ref: "https://acme.example/inner.json#/$defs/A" },
        viaRelative: { $ref: "inner.json" },
      },
    };
    expect(schemaProblem(nested)).toBeUndefined();
    expect(compileProblem(nested)).toBeUndefined();
    // "#/$defs/A" from the root resource does not reach into the inner one.
    const wrong = { $id: "https://acme.example/root.json", properties: { inner: { $id: "inner.json", $defs: { A: { type: "string" } } }, a: { $ref: "#/$defs/A" } } };
    expect(schemaProblem(wrong)).toMatch(/does not resolve/);
    expect(compileProblem(wrong)).toBeDefined();
    const meta = { properties: { schema: { $ref: "https://json-schema.org/draft/2020-12/schema" } } };
    expect(schemaProblem(meta)).toBeUndefined();
    expect(compileProblem(meta)).toBeUndefined();
  });

  it("lists every problem of a schema at once", () => {
    const problem = schemaProblem({ properties: { a: { pattern: "(" }, b: { $ref: "#/$defs/B" } } });
    expect(problem?.split("; ")).toHaveLength(2);
  });

  it("costs a fraction of a compile", () => {
    // Rounds alternate between the two, and their medians are compared, so a pause of a busy machine (the suite runs
    // files side by side) falls on one round of one side instead of deciding the comparison.
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const checked: number[] = [];
    const compiled: number[] = [];
    for (let round = 0; round < 5; round++) {
      const schemas = Array.from({ length: 40 }, (_, i) => ({ ...realistic(), title: `op${round}-${i}` }));
      const t0 = performance.now();
      for (const s of schemas) expect(schemaProblem(s)).toBeUndefined();
      checked.push(performance.now() - t0);
      const t1 = performance.now();
      for (const s of schemas) compileHandlerSchema(createHandlerAjv(), s);
      compiled.push(performance.now() - t1);
    }
    expect(median(checked)).toBeLessThan(median(compiled) / 2);
  });
});
