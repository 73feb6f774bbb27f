/**
 * Property checks of one handler: inputs generated from its `input_schema` (json-schema-faker, seeded), each run
 * through the executor's own runtime, and every result held to the handler's contract: it completes with outputs
 * its `output_schema` accepts (the executor checks them), or it fails with a HandlerError the handler threw.
 */
import type { AtomicExecuteResult } from "@nodefabric/schemas";
import { defineAtomic } from "../define-atomic.js";
import { HandlerError } from "../handler-error.js";
import type { AtomicDefinition, NodeTypeDefinition } from "../types.js";
import { prepareAtomic } from "../runtime/definition-check.js";
import { openHandlerHarness, type RunHandlerOptions } from "./run-handler.js";

export interface CheckHandlerOptions {
  /** How many inputs to generate from the input_schema (default 50). */
  cases?: number;
  /** The generator's seed: the same seed gives the same inputs (default 1). */
  seed?: number;
  /** Inputs checked before the generated ones, such as edge cases from a bug report. */
  inputs?: Array<Record<string, unknown>>;
  /** How every case runs: timeout, secrets, and the MockAgent serving the handler's upstreams. */
  runOptions?: Omit<RunHandlerOptions, "signal">;
}

/** One case that broke the contract. */
export interface PropertyViolation {
  /** The inputs of the case: `runHandler(definition, violation.inputs)` runs it again. */
  inputs: unknown;
  /** What the executor answered (absent when the generated inputs were not a JSON object, so never ran). */
  result?: AtomicExecuteResult;
  /** Why the result breaks the contract, in words. */
  reason: string;
  /** What the handler threw when it was not a HandlerError, with its stack. */
  thrown?: unknown;
}

/** What a property check saw. */
export interface HandlerCheckReport {
  /** Cases run: the given `inputs` plus the generated ones. */
  cases: number;
  /** Cases that completed with valid outputs. */
  completed: number;
  /** Cases that failed with a HandlerError the handler threw, counted by its code. */
  handlerErrors: Record<string, number>;
  /** Cases that broke the contract, in the order they ran. */
  violations: PropertyViolation[];
}

/** The seed of case `index`: far apart for neighbouring seeds, so seed 2 does not replay seed 1 shifted by one. */
function caseSeed(seed: number, index: number): number {
  const mixed = (Math.imul(seed, 0x9e3779b1) + Math.imul(index + 1, 0x85ebca6b)) >>> 0;
  return mixed === 0 ? 0x9e3779b9 : mixed;
}

function checkCount(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min) throw new TypeError(`${name} must be an integer >= ${min}, not ${String(value)}`);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Generates `cases` inputs from the definition's `input_schema`, the ones `checkHandler` runs with the same seed. */
export async function sampleInputs(definition: AtomicDefinition<any, any>, options: Pick<CheckHandlerOptions, "cases" | "seed"> = {}): Promise<unknown[]> {
  const cases = options.cases ?? 50;
  const seed = options.seed ?? 1;
  checkCount("cases", cases, 0);
  checkCount("seed", seed, 0);
  // Imported here: the generator is only paid for by tests that check properties.
  const { generate } = await import("json-schema-faker");
  const schema = definition.nodeType.input_schema as Parameters<typeof generate>[0];
  const out: unknown[] = [];
  for (let i = 0; i < cases; i++) out.push(await generate(schema, { seed: caseSeed(seed, i) }));
  return out;
}

type Observed = { kind: "returned" } | { kind: "handler_error"; code: string } | { kind: "threw"; error: unknown };

/**
 * The definition with its handler wrapped to note what it threw, per node_run_id: on the wire a plain Error and a
 * `HandlerError("handler_error")` look alike, and only the first breaks the contract.
 */
function observed(definition: AtomicDefinition<any, any>, seen: Map<string, Observed>): AtomicDefinition<any, any> {
  const { kind: _kind, ...nodeType } = definition.nodeType;
  return defineAtomic({
    nodeType: nodeType as NodeTypeDefinition,
    async handler(inputs, ctx) {
      try {
        const value = await definition.handler(inputs, ctx);
        seen.set(ctx.node_run_id, { kind: "returned" });
        return value;
      } catch (err) {
        seen.set(ctx.node_run_id, HandlerError.is(err) ? { kind: "handler_error", code: err.code } : { kind: "threw", error: err });
        throw err;
      }
    },
  });
}

function describeThrown(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return typeof err === "string" ? JSON.stringify(err) : String(err);
}

function errorIssues(result: AtomicExecuteResult): string {
  const errors = (result.error?.details as { errors?: Array<{ path?: string; message?: string }> } | undefined)?.errors;
  if (!Array.isArray(errors) || errors.length === 0) return "";
  return `: ${errors.slice(0, 3).map((e) => `${e.path || "/"} ${e.message ?? ""}`.trim()).join("; ")}`;
}

/**
 * Runs the handler on `inputs` plus `cases` inputs generated from its input_schema, and reports each result that is
 * neither completed (outputs valid) nor failed with a HandlerError the handler threw.
 */
export async function checkHandler(definition: AtomicDefinition<any, any>, options: CheckHandlerOptions = {}): Promise<HandlerCheckReport> {
  // Checked as given first, so a wrong definition (schemas, SDK version) is named as such, not as the wrapper.
  prepareAtomic(definition);
  const given = options.inputs ?? [];
  const generated = await sampleInputs(definition, options);
  const seen = new Map<string, Observed>();
  const harness = openHandlerHarness(prepareAtomic(observed(definition, seen)), options.runOptions);
  const report: HandlerCheckReport = { cases: 0, completed: 0, handlerErrors: {}, violations: [] };
  try {
    for (const [index, inputs] of [...given, ...generated].entries()) {
      report.cases++;
      const isGenerated = index >= given.length;
      if (!isPlainObject(inputs)) {
        report.violations.push({ inputs, reason: `json-schema-faker generated ${JSON.stringify(inputs)}, not a JSON object: the input_schema must describe an object` });
        continue;
      }
      const nodeRunId = `nr_check_${index}`;
      const result = await harness.run(inputs, { attempt: options.runOptions?.attempt, nodeRunId });
      const what = seen.get(nodeRunId);
      seen.delete(nodeRunId);
      const code = result.error?.code;
      if (result.state === "completed") {
        report.completed++;
      } else if (code === "invalid_outputs") {
        report.violations.push({ inputs, result, reason: `${result.error!.message}${errorIssues(result)}` });
      } else if (code === "invalid_inputs") {
        const reason = isGenerated
          ? `json-schema-faker generated inputs the input_schema rejects${errorIssues(result)} (a keyword or format the generator does not honour; tighten the schema)`
          : `these inputs do not match the input_schema${errorIssues(result)}`;
        report.violations.push({ inputs, result, reason });
      } else if (result.state === "failed" && what?.kind === "handler_error" && what.code === code) {
        report.handlerErrors[code] = (report.handlerErrors[code] ?? 0) + 1;
      } else if (result.state === "failed" && what?.kind === "threw") {
        report.violations.push({ inputs, result, reason: `the handler threw ${describeThrown(what.error)}, not a HandlerError`, thrown: what.error });
      } else {
        report.violations.push({ inputs, result, reason: `the executor ended it ${result.state} with ${code ?? "no error"}: ${result.error?.message ?? ""}` });
      }
    }
  } finally {
    await harness.close();
  }
  return report;
}

function preview(value: unknown, max = 200): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** How many violations an assertion message lists. */
const LISTED_VIOLATIONS = 5;

/**
 * `checkHandler` as an assertion for a test: resolves with the report when every case kept the contract, and throws
 * an Error listing the first violations, with their inputs, when one did not.
 */
export async function assertHandlerProperties(definition: AtomicDefinition<any, any>, options: CheckHandlerOptions = {}): Promise<HandlerCheckReport> {
  const report = await checkHandler(definition, options);
  if (report.violations.length === 0) return report;
  const nt = definition.nodeType;
  const lines = report.violations.slice(0, LISTED_VIOLATIONS).map((v, i) => {
    // The frame that threw is the handler's own; the ones below it are the harness.
    const frame = v.thrown instanceof Error ? v.thrown.stack?.split("\n")[1]?.trim() : undefined;
    const stack = frame ? `\n       ${frame}` : "";
    return `  ${i + 1}. inputs ${preview(v.inputs)}\n     ${v.reason}${stack}`;
  });
  const more = report.violations.length > LISTED_VIOLATIONS ? [`  … and ${report.violations.length - LISTED_VIOLATIONS} more`] : [];
  const error = new Error(
    `${nt.node_type_id}@${nt.version}: ${report.violations.length} of ${report.cases} cases broke the handler's contract (seed ${options.seed ?? 1}):\n${[...lines, ...more].join("\n")}`,
  );
  (error as Error & { report?: HandlerCheckReport }).report = report;
  throw error;
}
