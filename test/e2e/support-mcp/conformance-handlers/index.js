// The tools the official MCP conformance suite (@modelcontextprotocol/conformance, server leg) calls by name, written
// as ordinary NodeFabric node types, so its scenarios can run against a real fabric's /mcp. Each tool is a node type
// whose node_type_id is the tool name the suite expects; every call of one is a durable run like any other.
//
// Only tools a node type can honestly be are here. A run answers JSON outputs, so the scenarios that need image, audio
// or resource content blocks, or a tool that asks the client something (sampling, elicitation, roots), have no fixture:
// test/e2e/mcp-conformance.test.ts lists them as not applicable, with the reason.
import { setTimeout as delay } from "node:timers/promises";
import { defineAtomic, defineComposite, HandlerError } from "@nodefabric/sdk";

const READ = { gates: { side_effect_class: "read" } };
const NO_ARGS = { type: "object", properties: {}, additionalProperties: false };
const TEXT_OUT = { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false };

/** tools-call-simple-text: no arguments, answers a fixed sentence. */
export const simpleText = defineAtomic({
  nodeType: {
    node_type_id: "test_simple_text",
    version: "1.0.0",
    description: "Conformance fixture: answers a fixed sentence of text.",
    input_schema: NO_ARGS,
    output_schema: TEXT_OUT,
    constraints: READ,
  },
  handler: () => ({ text: "This is a simple text response for testing." }),
});

/** tools-call-error: always fails, so the tool result is an error (isError) naming the code and the message. */
export const errorHandling = defineAtomic({
  nodeType: {
    node_type_id: "test_error_handling",
    version: "1.0.0",
    description: "Conformance fixture: always fails with a tool error.",
    input_schema: NO_ARGS,
    output_schema: TEXT_OUT,
    constraints: READ,
  },
  handler() {
    throw new HandlerError("conformance_error", "This tool intentionally returns an error for testing", { retryable: false });
  },
});

/** One step of the progress fixture: waits `ms` and says which step it was. */
export const progressStep = defineAtomic({
  nodeType: {
    node_type_id: "conformance.step",
    version: "1.0.0",
    description: "Conformance fixture helper: waits ms milliseconds (cancellable) and returns the step number.",
    input_schema: {
      type: "object",
      properties: { step: { type: "integer", minimum: 0 }, ms: { type: "integer", minimum: 0, maximum: 60000 } },
      required: ["step", "ms"],
      additionalProperties: false,
    },
    output_schema: { type: "object", properties: { step: { type: "integer" } }, required: ["step"], additionalProperties: false },
    constraints: READ,
  },
  async handler(inputs, ctx) {
    await delay(inputs.ms, undefined, { signal: ctx.signal });
    return { step: inputs.step };
  },
});

/**
 * tools-call-with-progress: a composite of three 250 ms steps, one after another. Each child NodeRun that starts and
 * ends is run progress, which /mcp sends as notifications/progress when the client passed a progress token. The steps
 * are longer than the suite's 50 ms so that a server which rate-limits progress (as /mcp does, to one per 100 ms) still
 * has three distinct moments to report.
 */
export const withProgress = defineComposite({
  nodeType: {
    node_type_id: "test_tool_with_progress",
    version: "1.0.0",
    description: "Conformance fixture: three 250 ms steps in sequence, each reported as progress.",
    input_schema: NO_ARGS,
    output_schema: TEXT_OUT,
    constraints: READ,
  },
  async run(_inputs, ctx) {
    for (let step = 1; step <= 3; step++) await ctx.call({ node_type_id: "conformance.step", version: "1.0.0" }, { step, ms: 250 });
    return { text: "Progress test completed in 3 steps" };
  },
});

/**
 * json-schema-2020-12: an input schema using 2020-12 keywords ($schema, $defs with an $anchor, $ref, allOf/anyOf,
 * if/then/else, additionalProperties), which tools/list must give back exactly as written.
 */
export const JSON_SCHEMA_2020_12_INPUT = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  $defs: {
    address: { $anchor: "addressDef", type: "object", properties: { street: { type: "string" }, city: { type: "string" } } },
  },
  properties: {
    name: { type: "string" },
    address: { $ref: "#/$defs/address" },
    contactMethod: { type: "string", enum: ["phone", "email"] },
    phone: { type: "string" },
    email: { type: "string" },
  },
  allOf: [{ anyOf: [{ required: ["phone"] }, { required: ["email"] }] }],
  if: { properties: { contactMethod: { const: "phone" } }, required: ["contactMethod"] },
  then: { required: ["phone"] },
  else: { required: ["email"] },
  additionalProperties: false,
};

export const jsonSchema202012 = defineAtomic({
  nodeType: {
    node_type_id: "json_schema_2020_12_tool",
    version: "1.0.0",
    description: "Conformance fixture: a tool whose input schema uses JSON Schema 2020-12 keywords.",
    input_schema: JSON_SCHEMA_2020_12_INPUT,
    output_schema: { type: "object", properties: { received: { type: "object" } }, required: ["received"] },
    constraints: READ,
  },
  handler: (inputs) => ({ received: inputs }),
});

// The tasks extension's fixtures (io.modelcontextprotocol/tasks scenarios): a quick tool, a long cancellable one and
// one that fails after about a second. Whether /mcp offers them as tasks is plugin-mcp's choice (every call is a run).

/** greet: answers "Hello, {name}!". */
export const greet = defineAtomic({
  nodeType: {
    node_type_id: "greet",
    version: "1.0.0",
    description: "Conformance fixture: greets by name.",
    input_schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"], additionalProperties: false },
    output_schema: TEXT_OUT,
    constraints: READ,
  },
  handler: (inputs) => ({ text: `Hello, ${inputs.name}!` }),
});

/** slow_compute: sleeps `seconds` seconds (stops at once when cancelled), then answers. */
export const slowCompute = defineAtomic({
  nodeType: {
    node_type_id: "slow_compute",
    version: "1.0.0",
    description: "Conformance fixture: sleeps the given seconds (cancellable), then answers.",
    input_schema: {
      type: "object",
      properties: { seconds: { type: "number", minimum: 0, maximum: 600 }, label: { type: "string" } },
      required: ["seconds"],
      additionalProperties: false,
    },
    output_schema: TEXT_OUT,
    constraints: READ,
    // The suite's slow_compute is "task-supporting": on 2026-07-28, a client that declares the tasks extension gets a
    // task at once rather than when the run goes past FABRIC_MCP_TASK_AFTER_S (plugin-mcp's "nodefabric.mcp_task").
    extensions: { "nodefabric.timeout_ms": 605000, "nodefabric.mcp_task": "always" },
  },
  async handler(inputs, ctx) {
    await delay(inputs.seconds * 1000, undefined, { signal: ctx.signal });
    return { text: `Computed ${inputs.label ?? "result"} after ${inputs.seconds} s` };
  },
});

/** failing_job: fails with a tool error after about a second. */
export const failingJob = defineAtomic({
  nodeType: {
    node_type_id: "failing_job",
    version: "1.0.0",
    description: "Conformance fixture: fails with a tool error after about a second.",
    input_schema: { type: "object" },
    output_schema: TEXT_OUT,
    constraints: READ,
    extensions: { "nodefabric.mcp_task": "always" },
  },
  async handler(_inputs, ctx) {
    await delay(1000, undefined, { signal: ctx.signal });
    throw new HandlerError("job_failed", "failing_job fails on purpose", { retryable: false });
  },
});

/**
 * http-custom-header-server-validation (SEP-2243): a tool whose string parameter is marked with x-mcp-header, so a
 * 2026-07-28 client mirrors it into an Mcp-Param-Region header, and the server checks the header against the body.
 */
export const customHeaders = defineAtomic({
  nodeType: {
    node_type_id: "test_custom_headers",
    version: "1.0.0",
    description: "Conformance fixture: a parameter mirrored into the Mcp-Param-Region header (SEP-2243).",
    input_schema: {
      type: "object",
      properties: { region: { type: "string", "x-mcp-header": "Region" }, note: { type: "string" } },
      required: ["region"],
      additionalProperties: false,
    },
    output_schema: TEXT_OUT,
    constraints: READ,
  },
  handler: (inputs) => ({ text: `region ${inputs.region}` }),
});
