// Rules every schema document of schemas/v1 must follow (the v1 contract's conventions): identity and docs,
// closed objects except the named free-form ones, and one shared extensions map.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it, expect } from "vitest";
import { schemas, schemaId, type SchemaName } from "../../schemas/src/index.js";

const schemaDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../schemas/v1");
const SUFFIX = ".schema.json";

const EXPECTED_NAMES = [
  "extensions", "node_type_ref", "node_kind", "node_type", "metadata", "constraint_envelope", "run_context",
  "resource_ref", "run_state", "node_run_state", "node_run_terminal_state", "run", "node_run", "executor_binding",
  "evaluation_result", "recovery_action", "subtask_spec", "candidate", "candidate_set", "binding_decision",
  "policy_decision", "run_event", "run_event_type", "error", "error_envelope", "health", "version_info",
  "run_start_request", "node_runs_create_request", "node_run_create_spec", "node_runs_create_response",
  "node_run_evaluation_report_request", "node_run_complete_request", "atomic_execute_request",
  "atomic_execute_result", "composite_begin_request", "composite_begin_response", "node_type_publish_request",
  "node_type_batch_publish_request",
  "candidate_set_request", "policy_decision_request", "policy_decision_batch_request", "policy_decision_batch_response",
  "node_type_list", "node_type_versions", "run_list",
  "node_run_list", "approval", "approval_list", "approval_list_query", "approval_decision_request", "run_list_query",
];

// Properties that take any keys. `budgets` is free-form only in RunContext; ConstraintEnvelope's is closed.
const FREE_FORM = new Set([
  "input", "inputs", "outputs", "details", "data", "context", "identity", "policy", "evaluation",
  "input_schema", "output_schema", "expected_output_schema",
]);
const isFreeForm = (schemaName: string, property: string) =>
  FREE_FORM.has(property) || (schemaName === "run_context" && property === "budgets");

type Json = { [key: string]: unknown };
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Every subschema of a document with its location, e.g. ["properties", "cause", "properties", "code"]. */
function* subschemas(schema: Json, at: string[] = []): Generator<[Json, string[]]> {
  yield [schema, at];
  for (const k of ["items", "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else"]) {
    if (isObject(schema[k])) yield* subschemas(schema[k] as Json, [...at, k]);
  }
  for (const k of ["properties", "patternProperties", "$defs"]) {
    if (!isObject(schema[k])) continue;
    for (const [p, s] of Object.entries(schema[k] as Json)) if (isObject(s)) yield* subschemas(s, [...at, k, p]);
  }
  for (const k of ["allOf", "anyOf", "oneOf", "prefixItems"]) {
    if (Array.isArray(schema[k])) for (const [i, s] of (schema[k] as unknown[]).entries()) if (isObject(s)) yield* subschemas(s, [...at, k, String(i)]);
  }
}

const files = fs.readdirSync(schemaDir).filter((f) => f.endsWith(SUFFIX)).sort();
const documents = files.map((f) => [f.slice(0, -SUFFIX.length), JSON.parse(fs.readFileSync(path.join(schemaDir, f), "utf8")) as Json] as const);

describe("schema documents", () => {
  it("are exactly the contract's payloads, and all are embedded", () => {
    expect(documents.map(([n]) => n)).toEqual([...EXPECTED_NAMES].sort());
    expect(Object.keys(schemas).sort()).toEqual([...EXPECTED_NAMES].sort());
  });

  for (const [name, doc] of documents) {
    describe(name, () => {
      it("declares draft 2020-12, its $id, a title and a one-line description", () => {
        expect(doc.$schema).toBe("https://json-schema.org/draft/2020-12/schema");
        expect(doc.$id).toBe(schemaId(name as SchemaName));
        expect(typeof doc.title).toBe("string");
        expect(doc.title).toMatch(/^[A-Z][A-Za-z]+$/);
        expect(typeof doc.description).toBe("string");
        expect((doc.description as string).length).toBeGreaterThan(10);
        expect(doc.description).not.toContain("\n");
      });

      it("is embedded unchanged in src/generated/schemas.ts", () => {
        expect(schemas[name as SchemaName]).toEqual(doc);
      });

      it("closes every object except the free-form ones", () => {
        const problems: string[] = [];
        for (const [sub, at] of subschemas(doc)) {
          if (sub.type !== "object") continue;
          const where = `${name}#/${at.join("/")}`;
          const property = at.length >= 2 && at[at.length - 2] === "properties" ? at[at.length - 1] : undefined;
          if (at.length === 0 && name === "extensions") continue; // the extensions map itself: namespaced keys, any values
          if (property !== undefined && isFreeForm(name, property)) {
            if ("additionalProperties" in sub || "properties" in sub) problems.push(`${where} is free-form but constrains its keys`);
          } else if (!("additionalProperties" in sub)) {
            problems.push(`${where} does not set additionalProperties`);
          }
        }
        expect(problems).toEqual([]);
      });

      it("refers to the shared extensions map wherever it has extensions", () => {
        for (const [sub, at] of subschemas(doc)) {
          if (at[at.length - 2] === "properties" && at[at.length - 1] === "extensions") {
            expect(sub, `${name}#/${at.join("/")}`).toEqual({ $ref: "extensions.schema.json" });
          }
        }
      });

      it("has only $refs to existing schema files", () => {
        for (const [sub] of subschemas(doc)) {
          if (typeof sub.$ref === "string") expect(files).toContain(sub.$ref);
        }
      });

      it("gives every time a date-time format and every id a length limit", () => {
        for (const [sub, at] of subschemas(doc)) {
          const property = at[at.length - 2] === "properties" ? at[at.length - 1] : undefined;
          if (property === undefined) continue;
          if (/_at$|^time$/.test(property)) expect(sub, `${name}.${property}`).toMatchObject({ type: "string", format: "date-time" });
          if (/(^|_)id$/.test(property) && sub.type === "string") {
            expect(sub.minLength, `${name}.${property}`).toBe(1);
            expect(sub.maxLength, `${name}.${property}`).toBeLessThanOrEqual(256);
          }
        }
      });
    });
  }
});
