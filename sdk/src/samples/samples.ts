/**
 * Sample values of converted schemas: what generated tests send as inputs and what their mocked upstream answers.
 * A sample is worthless when the schema refuses it (the test fails before it starts), so every candidate, be it the
 * document's own example or a made-up value, is checked with the validator the executor uses, and the first valid
 * one wins. Made-up values are deterministic and small: the same schema always gives the same value.
 */
import { generateSync } from "json-schema-faker";
import { FAIL, SampleGenerator } from "./sample-generator.js";
import { rootValidator } from "./sample-validators.js";
import type { SchemaObject } from "./schema-object.js";

/** Options of sampleFor. */
export interface SampleOptions {
  /** Seed of json-schema-faker, the last resort (default 1). */
  seed?: number;
  /** Examples from the document (a media type's or parameter's), tried first, in order; invalid ones are skipped. */
  examples?: unknown[];
  /** `full` (default) fills optional properties two objects deep; `minimal` gives required ones only. */
  prefer?: "full" | "minimal";
}

/** A valid sample and where it came from, or why none was found. */
export type SampleResult = { value: unknown; source: "example" | "generated" } | { error: string };

/** json-schema-faker seeds tried after the seed given. */
const FAKER_TRIES = 3;

/**
 * A value valid against `schema` (a converted schema: JSON Schema 2020-12, `$ref`s into its own `$defs`), checked
 * with the executor's validator (`compileHandlerSchema(createHandlerAjv(), schema)`). Candidates, first valid wins:
 * 1. `options.examples`, then the schema's own top-level `examples` and `default` (source `example`);
 * 2. a deterministic generator that reads the schema the way a validator does: `$ref`s and `allOf` merged (an
 *    `additionalProperties: false` in one part limits the others), a `oneOf` branch whose value matches it alone,
 *    `const`/`enum` (discriminator values), `pattern`, `format`, bounds, `multipleOf`, `uniqueItems`, `not`;
 *    optional properties two objects deep, one array item unless `minItems` asks for more (`prefer: minimal` gives
 *    required properties and `minItems` items only);
 * 3. json-schema-faker, seeded (`options.seed`, default 1), with a few seeds.
 * When none is valid, `error` says why the closest one was refused.
 */
export function sampleFor(schema: SchemaObject, options: SampleOptions = {}): SampleResult {
  const compiled = rootValidator(schema);
  if ("error" in compiled) return { error: `the schema does not compile: ${compiled.error}` };
  const { validate, subs } = compiled;
  let best: { errors: number; message: string } | undefined;
  const valid = (value: unknown, what: string): boolean => {
    if (value === undefined) return false;
    if (validate(value)) return true;
    const errors = validate.errors ?? [];
    if (best === undefined || errors.length < best.errors) {
      const first = errors[0];
      best = { errors: errors.length, message: `${what} is not valid: ${first ? `${first.instancePath || "/"} ${first.message ?? ""}`.trim() : "refused"}` };
    }
    return false;
  };

  const examples = [...(options.examples ?? []), ...(Array.isArray(schema.examples) ? schema.examples : []), ...(schema.default !== undefined ? [schema.default] : [])];
  for (const example of examples) if (valid(example, "the example")) return { value: structuredClone(example), source: "example" };

  const prefer = options.prefer ?? "full";
  const modes: Array<"full" | "minimal"> = prefer === "full" ? ["full", "minimal"] : ["minimal", "full"];
  const seen = new Set<string>();
  for (const mode of modes) {
    for (const useExamples of [true, false]) {
      const value = new SampleGenerator(schema, subs, mode, useExamples).generate();
      if (value === FAIL) continue;
      const key = JSON.stringify(value);
      if (seen.has(key)) continue;
      seen.add(key);
      if (valid(value, "the generated value")) return { value, source: "generated" };
    }
  }

  const seed = options.seed ?? 1;
  for (let k = 0; k < FAKER_TRIES; k++) {
    let value: unknown;
    try {
      value = generateSync(schema as Parameters<typeof generateSync>[0], {
        seed: seed + k,
        alwaysFakeOptionals: false,
        optionalsProbability: prefer === "full" ? 0.5 : 0,
        maxDepth: 6,
        refDepthMax: 2,
        maxDefaultItems: 1,
        useExamplesValue: true,
      });
    } catch {
      continue;
    }
    if (valid(value, "json-schema-faker's value")) return { value, source: "generated" };
  }
  return { error: best?.message ?? "no value could be made for the schema" };
}
