/**
 * What makes a definition runnable, checked the same way wherever it runs: made by a compatible SDK, a valid
 * NodeType, and schemas that compile. The executor's loader and the test harness both ask here, so a definition the
 * harness accepts is one the executor loads.
 */
import type { ValidateFunction } from "ajv";
import { validatorFor, type NodeType } from "@nodefabric/schemas";
import { isAtomicDefinition, SDK_VERSION } from "../define-atomic.js";
import type { AtomicDefinition, FabricDefinition } from "../types.js";
import type { ExecutableDefinition } from "./atomic-execution.js";
import { compileHandlerSchema, createHandlerAjv, schemaProblem } from "./handler-schemas.js";
import { dedupeIssues, issuesFromAjv } from "./schema-issues.js";

/**
 * A node type's input and output schemas, compiled for checking what a handler takes and gives; or, when one does not
 * compile, which one and why.
 */
export function compileNodeTypeSchemas(nt: { input_schema?: unknown; output_schema?: unknown }): { inputs: ValidateFunction; outputs: ValidateFunction } | { problem: string } {
  const ajv = createHandlerAjv({ validateSchema: false });
  const compiled: ValidateFunction[] = [];
  for (const which of ["input_schema", "output_schema"] as const) {
    try {
      compiled.push(compileHandlerSchema(ajv, nt[which] as Record<string, unknown> | undefined));
    } catch (err) {
      return { problem: `its ${which} does not compile: ${err instanceof Error ? err.message : String(err)}` };
    }
  }
  return { inputs: compiled[0]!, outputs: compiled[1]! };
}

// Strict semver 2.0: major, minor, patch without leading zeros, then an optional prerelease and build.
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

function majorMinor(version: string): [number, number] | undefined {
  const m = SEMVER.exec(version);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

/** True when a definition made by SDK `version` runs here: the same major, and the same minor while the major is 0. */
export function sdkCompatible(version: string): boolean {
  const theirs = majorMinor(version);
  const ours = majorMinor(SDK_VERSION);
  if (!theirs || !ours) return false;
  if (theirs[0] !== ours[0]) return false;
  return ours[0] !== 0 || theirs[1] === ours[1];
}

/** The range of SDK versions this one runs definitions of, as a reader would write it: "0.1.x", "1.x". */
export function compatibleSdkRange(): string {
  const ours = majorMinor(SDK_VERSION);
  return ours ? (ours[0] === 0 ? `0.${ours[1]}.x` : `${ours[0]}.x`) : SDK_VERSION;
}

/** Why a definition or set made by SDK `version` cannot run here, or undefined. */
export function sdkProblem(version: unknown): string | undefined {
  if (typeof version === "string" && sdkCompatible(version)) return undefined;
  return (
    `was made with @nodefabric/sdk ${String(version)}, ` +
    `which this executor (SDK ${SDK_VERSION}) cannot run; rebuild the package against @nodefabric/sdk ${compatibleSdkRange()}`
  );
}

let nodeTypeValidator: ValidateFunction | undefined;

/**
 * Why `nt` cannot be served (not a valid NodeType, a schema that would not compile), or undefined. `extraVersionCheck`
 * adds the registry's own rule for versions, which the executor applies.
 */
export function nodeTypeProblem(nt: unknown, extraVersionCheck?: (version: string) => string | undefined): string | undefined {
  nodeTypeValidator ??= validatorFor("node_type") as unknown as ValidateFunction;
  const valid = nodeTypeValidator(nt);
  const versionIssue = valid ? extraVersionCheck?.((nt as NodeType).version) : undefined;
  if (!valid || versionIssue) {
    const issues = !valid ? dedupeIssues(issuesFromAjv(nodeTypeValidator.errors)).map((i) => `${i.path} ${i.message}`) : [`/version ${versionIssue}`];
    return `is not a valid NodeType: ${issues.join("; ")}`;
  }
  const problems: string[] = [];
  for (const which of ["input_schema", "output_schema"] as const) {
    const problem = schemaProblem((nt as NodeType)[which]);
    if (problem) problems.push(`its ${which} does not compile: ${problem}`);
  }
  return problems.length > 0 ? problems.join("; ") : undefined;
}

/** How a problem of a node type reads on its own: "node type x@1: its …" or "node type x@1 is not …". */
export function nodeTypeReason(name: string, problem: string): string {
  return problem.startsWith("is ") ? `node type ${name} ${problem}` : `node type ${name}: ${problem}`;
}

/** A definition that cannot run: what `prepareAtomic` throws, naming the node type and why. */
export class DefinitionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DefinitionError";
  }
}

/**
 * Checks an atomic definition as the executor's loader does and compiles its schemas: the ExecutableDefinition the
 * runtime runs. Throws a DefinitionError naming the node type and the problem.
 */
export function prepareAtomic(definition: AtomicDefinition<any, any>): ExecutableDefinition {
  if (!isAtomicDefinition(definition)) {
    throw new DefinitionError("expected an atomic definition made by defineAtomic({ nodeType, handler }) of @nodefabric/sdk");
  }
  const nt = (definition as FabricDefinition).nodeType;
  const name = `${String(nt.node_type_id)}@${String(nt.version)}`;
  const sdk = sdkProblem(definition.sdkVersion);
  if (sdk) throw new DefinitionError(`node type ${name} ${sdk}`);
  const problem = nodeTypeProblem(nt);
  if (problem) throw new DefinitionError(nodeTypeReason(name, problem));
  const compiled = compileNodeTypeSchemas(nt);
  if ("problem" in compiled) throw new DefinitionError(`node type ${name}: ${compiled.problem}`);
  return { definition, validateInputs: compiled.inputs, validateOutputs: compiled.outputs };
}
