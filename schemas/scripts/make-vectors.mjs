#!/usr/bin/env node
// Derives the invalid test vectors from the hand-written valid ones, so that every
// required field, type, enum and extension key of every schema is exercised.
//
//   node scripts/make-vectors.mjs          rewrite vectors/invalid/ from vectors/valid/
//   node scripts/make-vectors.mjs --check  exit 1 when vectors/invalid/ is stale
//
// vectors/valid/ is written by hand and never touched here. vectors/invalid/ is owned
// by this script: every file in it comes from a rule below. Each derived vector is
// checked to fail validation at the place it was broken, so a mutation that happens
// to stay valid (or breaks something else) stops the script instead of slipping in.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";

const addFormats = addFormatsModule.default ?? addFormatsModule;
const here = path.dirname(fileURLToPath(import.meta.url));
const pkgRoot = path.resolve(here, "..");
const schemaDir = path.join(pkgRoot, "v1");
const validDir = path.join(pkgRoot, "vectors", "valid");
const invalidDir = path.join(pkgRoot, "vectors", "invalid");
const SUFFIX = ".schema.json";
const BASE = "https://nodefabric.dev/schemas/v1/";

const schemas = Object.fromEntries(
  fs
    .readdirSync(schemaDir)
    .filter((f) => f.endsWith(SUFFIX))
    .sort()
    .map((f) => [f.slice(0, -SUFFIX.length), JSON.parse(fs.readFileSync(path.join(schemaDir, f), "utf8"))]),
);

const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
for (const s of Object.values(schemas)) ajv.addSchema(s);

const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));
const clone = (v) => structuredClone(v);

function validVectors(name) {
  const dir = path.join(validDir, name);
  if (!fs.existsSync(dir)) return {};
  return Object.fromEntries(
    fs
      .readdirSync(dir)
      .filter((f) => f.endsWith(".json"))
      .sort()
      .map((f) => [f.slice(0, -5), readJson(path.join(dir, f))]),
  );
}

/** A value of a different JSON type than `v`, chosen so no schema here accepts it in v's place. */
function wrongTypeFor(v) {
  if (Array.isArray(v)) return { not: "an array" };
  switch (typeof v) {
    case "string":
      return 42;
    case "number":
      return "42";
    case "boolean":
      return "true";
    case "object":
      return v === null ? "null" : ["not", "an", "object"];
    default:
      throw new Error(`no wrong type for ${typeof v}`);
  }
}

function resolveRef(schema) {
  while (schema && typeof schema === "object" && typeof schema.$ref === "string") {
    const target = schema.$ref.replace(BASE, "").replace(SUFFIX, "");
    schema = schemas[target];
    if (!schema) throw new Error(`unresolvable $ref ${target}`);
  }
  return schema;
}

/** Paths (arrays of keys) of every string in `data` whose schema is an enum; first array item only. */
function enumPaths(schema, data, at = []) {
  schema = resolveRef(schema);
  if (!schema || typeof schema !== "object") return [];
  if (Array.isArray(schema.enum) && typeof data === "string") return [at];
  const out = [];
  if (schema.properties && data && typeof data === "object" && !Array.isArray(data)) {
    for (const key of Object.keys(data)) {
      if (schema.properties[key]) out.push(...enumPaths(schema.properties[key], data[key], [...at, key]));
    }
  }
  if (schema.items && Array.isArray(data) && data.length > 0) out.push(...enumPaths(schema.items, data[0], [...at, 0]));
  return out;
}

function setAt(obj, keys, value) {
  const parent = keys.slice(0, -1).reduce((o, k) => o[k], obj);
  parent[keys[keys.length - 1]] = value;
  return obj;
}

function deleteAt(obj, keys) {
  const parent = keys.slice(0, -1).reduce((o, k) => o[k], obj);
  delete parent[keys[keys.length - 1]];
  return obj;
}

const pointer = (keys) => keys.map((k) => `/${String(k).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");

// Hand-picked rules beyond the mechanical ones: boundaries, patterns, formats,
// conditional requirements and nested objects. Each is [case, base vector, mutate, where it breaks].
const extra = {
  extensions: [
    ["bad-extension-key", "full", () => ({ nokey: 1 }), ""],
    ["key-with-leading-dot", "full", () => ({ ".attempt": 1 }), ""],
    ["key-with-trailing-dot", "full", () => ({ "nodefabric.": 1 }), ""],
    ["key-with-space", "full", () => ({ "nodefabric.my key": 1 }), ""],
    ["wrong-type-array", "full", () => [{ "nodefabric.attempt": 1 }], ""],
    ["wrong-type-string", "full", () => "nodefabric.attempt=1", ""],
    ["wrong-type-null", "full", () => null, ""],
  ],
  node_type_ref: [
    ["empty-node_type_id", "full", (v) => setAt(v, ["node_type_id"], ""), "/node_type_id"],
    ["node_type_id-leading-dash", "full", (v) => setAt(v, ["node_type_id"], "-demo.echo"), "/node_type_id"],
    ["node_type_id-with-space", "full", (v) => setAt(v, ["node_type_id"], "demo echo"), "/node_type_id"],
    ["node_type_id-with-slash", "full", (v) => setAt(v, ["node_type_id"], "acme/weather"), "/node_type_id"],
    ["node_type_id-too-long", "full", (v) => setAt(v, ["node_type_id"], `a${"b".repeat(128)}`), "/node_type_id"],
    ["empty-version", "full", (v) => setAt(v, ["version"], ""), "/version"],
    ["version-too-long", "full", (v) => setAt(v, ["version"], `1.0.0-${"x".repeat(59)}`), "/version"],
  ],
  node_kind: [
    ["unknown-value", null, () => "hybrid", ""],
    ["wrong-case", null, () => "Atomic", ""],
    ["wrong-type-number", null, () => 1, ""],
  ],
  node_type: [
    ["input_schema-not-object", "full", (v) => setAt(v, ["input_schema"], true), "/input_schema"],
    ["empty-preferred_executor_type", "full", (v) => setAt(v, ["preferred_executor_types"], [""]), "/preferred_executor_types/0"],
    ["bad-nested-constraints", "full", (v) => setAt(v, ["constraints", "structural", "max_depth"], -1), "/constraints/structural/max_depth"],
    ["bad-nested-extension-key", "full", (v) => setAt(v, ["metadata", "extensions"], { nokey: 1 }), "/metadata/extensions"],
  ],
  metadata: [
    ["label-not-string", "full", (v) => setAt(v, ["labels", "team"], 7), "/labels/team"],
    ["annotation-not-string", "full", (v) => setAt(v, ["annotations", "description"], { text: "x" }), "/annotations/description"],
  ],
  constraint_envelope: [
    ["negative-max_depth", "full", (v) => setAt(v, ["structural", "max_depth"], -1), "/structural/max_depth"],
    ["fractional-max_steps", "full", (v) => setAt(v, ["budgets", "max_steps"], 2.5), "/budgets/max_steps"],
    ["negative-max_cost", "full", (v) => setAt(v, ["budgets", "max_cost"], -0.01), "/budgets/max_cost"],
    ["zero-max_candidates_per_subtask", "full", (v) => setAt(v, ["candidates", "max_candidates_per_subtask"], 0), "/candidates/max_candidates_per_subtask"],
    ["allowed_node_type_ids-not-strings", "full", (v) => setAt(v, ["candidates", "allowed_node_type_ids"], [1]), "/candidates/allowed_node_type_ids/0"],
    ["unknown-structural-field", "full", (v) => setAt(v, ["structural", "max_width"], 3), "/structural"],
    ["unknown-budgets-field", "full", (v) => setAt(v, ["budgets", "max_tokens"], 1000), "/budgets"],
    ["unknown-gates-field", "full", (v) => setAt(v, ["gates", "allow_network"], true), "/gates"],
    ["require_approval-not-boolean", "full", (v) => setAt(v, ["gates", "require_approval"], "yes"), "/gates/require_approval"],
  ],
  run_context: [
    ["unknown-trace-field", "full", (v) => setAt(v, ["trace", "parent_id"], "abc"), "/trace"],
    ["actor-missing-id", "full", (v) => deleteAt(v, ["actor", "id"]), "/actor"],
    ["empty-tenant_id", "full", (v) => setAt(v, ["tenant_id"], ""), "/tenant_id"],
  ],
  resource_ref: [
    ["uri-not-a-uri", "full", (v) => setAt(v, ["uri"], "not a uri"), "/uri"],
    ["empty-id", "full", (v) => setAt(v, ["id"], ""), "/id"],
  ],
  run_state: [
    ["unknown-value", null, () => "paused", ""],
    ["node-run-only-state", null, () => "assigned", ""],
    ["legacy-succeeded", null, () => "succeeded", ""],
    ["wrong-case", null, () => "COMPLETED", ""],
    ["wrong-type-null", null, () => null, ""],
  ],
  node_run_state: [
    ["unknown-value", null, () => "paused", ""],
    ["legacy-succeeded", null, () => "succeeded", ""],
    ["wrong-type-number", null, () => 3, ""],
  ],
  node_run_terminal_state: [
    ["non-terminal-queued", null, () => "queued", ""],
    ["non-terminal-running", null, () => "running", ""],
    ["unknown-value", null, () => "done", ""],
    ["wrong-type-object", null, () => ({ state: "completed" }), ""],
  ],
  run: [
    ["run_id-too-long", "full", (v) => setAt(v, ["run_id"], `run_${"x".repeat(253)}`), "/run_id"],
    ["empty-root_node_run_id", "full", (v) => setAt(v, ["root_node_run_id"], ""), "/root_node_run_id"],
    ["started_at-not-date-time", "full", (v) => setAt(v, ["started_at"], "yesterday"), "/started_at"],
    ["ended_at-without-timezone", "full", (v) => setAt(v, ["ended_at"], "2025-11-22T04:30:02"), "/ended_at"],
  ],
  node_run: [
    ["null-parent_node_run_id", "full", (v) => setAt(v, ["parent_node_run_id"], null), "/parent_node_run_id"],
    ["bad-output-artifact", "full", (v) => deleteAt(v, ["output_artifacts", 0, "type"]), "/output_artifacts/0"],
    ["bad-executor-endpoint", "full", (v) => setAt(v, ["executor_binding", "endpoint"], "127.0.0.1 port 8083"), "/executor_binding/endpoint"],
    ["confidence-above-one", "full", (v) => setAt(v, ["evaluation_result", "confidence"], 1.5), "/evaluation_result/confidence"],
    ["bad-node_type_ref", "full", (v) => deleteAt(v, ["node_type_ref", "version"]), "/node_type_ref"],
  ],
  executor_binding: [["endpoint-not-a-uri", "full", (v) => setAt(v, ["endpoint"], "atomic-executor-1"), "/endpoint"]],
  evaluation_result: [
    ["confidence-above-one", "full", (v) => setAt(v, ["confidence"], 1.01), "/confidence"],
    ["confidence-negative", "full", (v) => setAt(v, ["confidence"], -0.1), "/confidence"],
    ["legacy-status-succeeded", "minimal", (v) => setAt(v, ["status"], "succeeded"), "/status"],
  ],
  recovery_action: [["bad-target_node_type_ref", "full", (v) => setAt(v, ["target_node_type_ref"], { node_type_id: "demo.x" }), "/target_node_type_ref"]],
  subtask_spec: [["empty-goal", "full", (v) => setAt(v, ["goal"], ""), "/goal"]],
  candidate: [["score-as-string", "full", (v) => setAt(v, ["score"], "0.87"), "/score"]],
  candidate_set: [
    ["zero-top_k", "full", (v) => setAt(v, ["top_k"], 0), "/top_k"],
    ["bad-candidate", "full", (v) => setAt(v, ["candidates", 1], { score: 0.5 }), "/candidates/1"],
  ],
  binding_decision: [["empty-candidate_set_id", "full", (v) => setAt(v, ["candidate_set_id"], ""), "/candidate_set_id"]],
  policy_decision: [
    ["approval_ref-missing-approval_id", "full", (v) => deleteAt(v, ["approval_ref", "approval_id"]), "/approval_ref"],
    ["approval_ref-unknown-field", "full", (v) => setAt(v, ["approval_ref", "expires_at"], "2025-11-23T04:30:00Z"), "/approval_ref"],
    ["approval_ref-bad-uri", "full", (v) => setAt(v, ["approval_ref", "uri"], "approvals/apr_1"), "/approval_ref/uri"],
  ],
  run_event: [
    ["negative-seq", "full", (v) => setAt(v, ["seq"], -1), "/seq"],
    ["fractional-seq", "full", (v) => setAt(v, ["seq"], 1.5), "/seq"],
    ["null-node_run_id", "full", (v) => setAt(v, ["node_run_id"], null), "/node_run_id"],
    ["time-not-date-time", "full", (v) => setAt(v, ["time"], "2025-11-22 04:30"), "/time"],
  ],
  run_event_type: [
    ["unknown-value", null, () => "run_paused", ""],
    ["wrong-case", null, () => "RUN_STARTED", ""],
    ["wrong-type-number", null, () => 0, ""],
  ],
  error: [
    ["empty-code", "full", (v) => setAt(v, ["code"], ""), "/code"],
    ["cause-missing-message", "full", (v) => deleteAt(v, ["cause", "message"]), "/cause"],
    ["cause-unknown-field", "full", (v) => setAt(v, ["cause", "stack"], "at handler (index.js:1:1)"), "/cause"],
    ["cause-bad-extension-key", "full", (v) => setAt(v, ["cause", "extensions"], { nokey: 1 }), "/cause/extensions"],
  ],
  error_envelope: [
    ["error-missing-code", "full", (v) => deleteAt(v, ["error", "code"]), "/error"],
    ["bare-error", "full", (v) => v.error, ""],
  ],
  health: [
    ["check-missing-name", "full", (v) => deleteAt(v, ["checks", 0, "name"]), "/checks/0"],
    ["check-missing-status", "full", (v) => deleteAt(v, ["checks", 0, "status"]), "/checks/0"],
    ["check-unknown-field", "full", (v) => setAt(v, ["checks", 0, "latency_ms"], 3), "/checks/0"],
  ],
  version_info: [
    ["without-v1", "full", (v) => setAt(v, ["supported_api_versions"], ["v2"]), "/supported_api_versions"],
    ["empty-supported_api_versions", "full", (v) => setAt(v, ["supported_api_versions"], []), "/supported_api_versions"],
    ["build-unknown-field", "full", (v) => setAt(v, ["build", "branch"], "main"), "/build"],
    ["build-dirty-not-boolean", "full", (v) => setAt(v, ["build", "dirty"], "no"), "/build/dirty"],
  ],
  run_start_request: [
    ["run_id-leading-dash", "full", (v) => setAt(v, ["run_id"], "-digest"), "/run_id"],
    ["run_id-with-slash", "full", (v) => setAt(v, ["run_id"], "digest/2025"), "/run_id"],
    ["run_id-with-space", "full", (v) => setAt(v, ["run_id"], "my run"), "/run_id"],
    ["run_id-empty", "full", (v) => setAt(v, ["run_id"], ""), "/run_id"],
    ["run_id-too-long", "full", (v) => setAt(v, ["run_id"], `r${"x".repeat(128)}`), "/run_id"],
    ["input-null", "full", (v) => setAt(v, ["input"], null), "/input"],
  ],
  node_run_create_spec: [
    ["empty-idempotency_key", "full", (v) => setAt(v, ["idempotency_key"], ""), "/idempotency_key"],
    ["bad-binding_decision", "full", (v) => deleteAt(v, ["binding_decision", "chosen_node_type_ref"]), "/binding_decision"],
  ],
  node_runs_create_request: [
    ["empty-node_runs", "full", (v) => setAt(v, ["node_runs"], []), "/node_runs"],
    ["node_run-missing-inputs", "full", (v) => deleteAt(v, ["node_runs", 1, "inputs"]), "/node_runs/1"],
  ],
  node_runs_create_response: [["bad-node_run", "full", (v) => deleteAt(v, ["node_runs", 0, "state"]), "/node_runs/0"]],
  node_run_evaluation_report_request: [
    ["recovery_actions-plural", "full", (v) => ({ evaluation_result: v.evaluation_result, recovery_actions: [v.recovery_action] }), ""],
  ],
  node_run_complete_request: [
    ["non-terminal-state", "minimal", (v) => setAt(v, ["state"], "running"), "/state"],
    ["bad-error", "failed", (v) => deleteAt(v, ["error", "message"]), "/error"],
    ["wrong-type-error", "failed", (v) => setAt(v, ["error"], "child failed"), "/error"],
  ],
  atomic_execute_request: [["inputs-null", "minimal", (v) => setAt(v, ["inputs"], null), "/inputs"]],
  atomic_execute_result: [
    ["completed-without-outputs", "full", (v) => deleteAt(v, ["outputs"]), ""],
    ["failed-without-error", "failed", (v) => deleteAt(v, ["error"]), ""],
    ["canceled-without-error", "canceled", (v) => deleteAt(v, ["error"]), ""],
    ["legacy-succeeded", "full", (v) => setAt(v, ["state"], "succeeded"), "/state"],
    ["wrong-type-error", "failed", (v) => setAt(v, ["error"], "invalid_inputs"), "/error"],
    ["error-missing-code", "failed", (v) => deleteAt(v, ["error", "code"]), "/error"],
  ],
  composite_begin_request: [
    ["coordinator_endpoint-not-a-uri", "full", (v) => setAt(v, ["coordinator_endpoint"], "127.0.0.1:8082"), "/coordinator_endpoint"],
    ["empty-assignment_token", "full", (v) => setAt(v, ["assignment_token"], ""), "/assignment_token"],
  ],
  composite_begin_response: [["accepted-as-string", "full", (v) => setAt(v, ["accepted"], "false"), "/accepted"]],
  node_type_publish_request: [
    ["bare-node-type", "full", (v) => v.node_type, ""],
    ["node_type-missing-kind", "full", (v) => deleteAt(v, ["node_type", "kind"]), "/node_type"],
  ],
  node_type_batch_publish_request: [
    ["empty-node_types", "full", (v) => setAt(v, ["node_types"], []), "/node_types"],
    ["too-many-node_types", "minimal", (v) => setAt(v, ["node_types"], Array.from({ length: 501 }, () => v.node_types[0])), "/node_types"],
    ["item-missing-kind", "full", (v) => deleteAt(v, ["node_types", 1, "kind"]), "/node_types/1"],
    ["single-node_type", "full", (v) => ({ node_type: v.node_types[0] }), ""],
  ],
  candidate_set_request: [["subtask_spec-missing-goal", "full", (v) => deleteAt(v, ["subtask_spec", "goal"]), "/subtask_spec"]],
  policy_decision_request: [["empty-action", "full", (v) => setAt(v, ["action"], ""), "/action"]],
  policy_decision_batch_request: [
    ["empty-requests", "full", (v) => setAt(v, ["requests"], []), "/requests"],
    ["too-many-requests", "minimal", (v) => setAt(v, ["requests"], Array.from({ length: 101 }, () => v.requests[0])), "/requests"],
    ["item-missing-action", "full", (v) => deleteAt(v, ["requests", 1, "action"]), "/requests/1"],
    ["item-unknown-field", "full", (v) => setAt(v, ["requests", 0, "actor"], "alice"), "/requests/0"],
    ["single-request", "full", (v) => v.requests[0], ""],
  ],
  policy_decision_batch_response: [
    ["empty-decisions", "full", (v) => setAt(v, ["decisions"], []), "/decisions"],
    ["item-missing-decision", "full", (v) => deleteAt(v, ["decisions", 1, "decision"]), "/decisions/1"],
    ["bare-array", "full", (v) => v.decisions, ""],
  ],
  node_type_list: [
    ["not-an-array", "full", (v) => ({ node_types: v }), ""],
    ["item-missing-kind", "full", (v) => deleteAt(v, [1, "kind"]), "/1"],
    ["item-not-an-object", "full", () => ["demo.echo"], "/0"],
  ],
  node_type_versions: [
    ["not-an-array", "full", () => "1.0.0", ""],
    ["empty-version", "full", (v) => [...v, ""], "/4"],
    ["version-not-string", "full", (v) => [...v, 2], "/4"],
    ["duplicate-version", "full", (v) => [...v, "1.0.0"], ""],
    ["version-too-long", "full", () => [`1.0.0-${"x".repeat(59)}`], "/0"],
  ],
  run_list: [
    ["not-an-array", "full", (v) => ({ runs: v }), ""],
    ["item-missing-state", "full", (v) => deleteAt(v, [1, "state"]), "/1"],
    ["item-bad-state", "full", (v) => setAt(v, [1, "state"], "succeeded"), "/1/state"],
  ],
  node_run_list: [
    ["not-an-array", "full", (v) => ({ node_runs: v }), ""],
    ["item-missing-node_run_id", "full", (v) => deleteAt(v, [0, "node_run_id"]), "/0"],
    ["item-unknown-field", "full", (v) => setAt(v, [0, "attempt"], 1), "/0"],
  ],
  approval: [
    ["resolved_at-without-zone", "full", (v) => setAt(v, ["resolved_at"], "2025-11-22T04:35:12"), "/resolved_at"],
    ["bad-node_type_ref", "full", (v) => deleteAt(v, ["node_type_ref", "version"]), "/node_type_ref"],
    ["empty-decision_reason", "full", (v) => setAt(v, ["decision_reason"], ""), "/decision_reason"],
  ],
  approval_decision_request: [
    ["empty-reason", "full", (v) => setAt(v, ["reason"], ""), "/reason"],
    ["reason-too-long", "full", (v) => setAt(v, ["reason"], "x".repeat(1001)), "/reason"],
    ["not-an-object", "full", (v) => v.reason, ""],
  ],
  approval_list: [
    ["not-an-array", "full", (v) => ({ approvals: v }), ""],
    ["item-missing-action", "full", (v) => deleteAt(v, [0, "action"]), "/0"],
  ],
  approval_list_query: [
    ["limit-zero", "full", (v) => setAt(v, ["limit"], 0), "/limit"],
    ["limit-above-1000", "full", (v) => setAt(v, ["limit"], 1001), "/limit"],
    ["page_token-with-slash", "full", (v) => setAt(v, ["page_token"], "a/b"), "/page_token"],
  ],
  run_list_query: [
    ["created_after-a-date", "full", (v) => setAt(v, ["created_after"], "2025-11-22"), "/created_after"],
    ["created_before-without-zone", "full", (v) => setAt(v, ["created_before"], "2025-11-22T10:00:00"), "/created_before"],
    ["empty-node_type_id", "full", (v) => setAt(v, ["node_type_id"], ""), "/node_type_id"],
    ["limit-zero", "full", (v) => setAt(v, ["limit"], 0), "/limit"],
  ],
};

/** Builds every invalid vector of one schema as [case, value, instance path where it must fail]. */
function invalidVectorsFor(name) {
  const schema = schemas[name];
  const valid = validVectors(name);
  const out = [];
  const full = valid.full;
  // The extensions map takes any values, so only its keys can be wrong (see `extra`).
  if (schema.type === "object" && name !== "extensions") {
    if (!full) throw new Error(`${name}: object schema needs vectors/valid/${name}/full.json`);
    for (const key of schema.required ?? []) out.push([`missing-${key}`, deleteAt(clone(full), [key]), ""]);
    for (const key of Object.keys(full)) out.push([`wrong-type-${key}`, setAt(clone(full), [key], wrongTypeFor(full[key])), `/${key}`]);
    out.push(["unknown-field", { ...clone(full), unknown_field: "surprise" }, ""]);
    if (schema.properties?.extensions) out.push(["bad-extension-key", { ...clone(full), extensions: { nokey: 1 } }, "/extensions"]);
  } else if (schema.type === "array") {
    if (!full) throw new Error(`${name}: array schema needs vectors/valid/${name}/full.json`);
  }
  if (full !== undefined && name !== "extensions") {
    for (const keys of enumPaths(schema, full)) {
      out.push([`bad-enum-${keys.join(".")}`, setAt(clone(full), keys, "not_a_valid_value"), pointer(keys)]);
    }
  }
  for (const [caseName, base, mutate, where] of extra[name] ?? []) {
    if (base !== null && valid[base] === undefined) throw new Error(`${name}/${caseName}: no valid vector ${base}`);
    out.push([caseName, mutate(base === null ? undefined : clone(valid[base])), where]);
  }
  const seen = new Set();
  for (const [caseName] of out) {
    if (seen.has(caseName)) throw new Error(`${name}: duplicate invalid case ${caseName}`);
    seen.add(caseName);
  }
  return out.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** True when one of the errors is about `where` (or below it), or names it as missing/unknown. */
function failsAt(errors, where) {
  return errors.some((e) => {
    if (e.instancePath === where || e.instancePath.startsWith(`${where}/`)) return true;
    const prop = e.params?.missingProperty ?? e.params?.additionalProperty ?? e.params?.propertyName;
    return prop !== undefined && `${e.instancePath}/${prop}` === where;
  });
}

const check = process.argv.includes("--check");
const problems = [];
const files = new Map();

for (const name of Object.keys(schemas)) {
  const validate = ajv.getSchema(`${BASE}${name}${SUFFIX}`);
  const valid = validVectors(name);
  if (Object.keys(valid).length === 0) problems.push(`${name}: no valid vectors`);
  for (const [caseName, value] of Object.entries(valid)) {
    if (!validate(value)) problems.push(`valid/${name}/${caseName}: ${ajv.errorsText(validate.errors)}`);
  }
  for (const [caseName, value, where] of invalidVectorsFor(name)) {
    if (validate(value)) problems.push(`invalid/${name}/${caseName}: passes validation`);
    else if (!failsAt(validate.errors, where)) {
      problems.push(`invalid/${name}/${caseName}: fails elsewhere than "${where}": ${ajv.errorsText(validate.errors)}`);
    }
    files.set(path.join(invalidDir, name, `${caseName}.json`), `${JSON.stringify(value, null, 2)}\n`);
  }
}

if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}

const onDisk = new Set();
if (fs.existsSync(invalidDir)) {
  for (const dir of fs.readdirSync(invalidDir)) {
    for (const f of fs.readdirSync(path.join(invalidDir, dir))) onDisk.add(path.join(invalidDir, dir, f));
  }
}
const stale = [];
for (const [file, text] of files) {
  if (!onDisk.has(file) || fs.readFileSync(file, "utf8") !== text) stale.push(file);
}
const extraFiles = [...onDisk].filter((f) => !files.has(f));

if (check) {
  if (stale.length > 0 || extraFiles.length > 0) {
    console.error(`vectors/invalid is stale; run: node scripts/make-vectors.mjs\n${[...stale, ...extraFiles].map((f) => path.relative(pkgRoot, f)).join("\n")}`);
    process.exit(1);
  }
  console.log(`vectors/invalid is up to date (${files.size} files)`);
} else {
  for (const file of extraFiles) fs.rmSync(file);
  for (const file of stale) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, files.get(file));
  }
  for (const dir of fs.existsSync(invalidDir) ? fs.readdirSync(invalidDir) : []) {
    if (fs.readdirSync(path.join(invalidDir, dir)).length === 0) fs.rmdirSync(path.join(invalidDir, dir));
  }
  console.log(`wrote ${stale.length}, removed ${extraFiles.length}, ${files.size} invalid vectors in total`);
}
