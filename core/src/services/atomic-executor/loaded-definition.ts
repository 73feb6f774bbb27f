/**
 * A definition as the atomic executor keeps it once checked: where it came from, and validators whose schemas compile
 * on first use (load runs the cheap check of handler-schemas.ts instead, so a package of 1,000 node types starts fast).
 */
import type { ValidateFunction } from "ajv";
import { compileNodeTypeSchemas, nodeTypeProblem as sdkNodeTypeProblem } from "@nodefabric/sdk/runtime";
import type { FabricDefinition } from "@nodefabric/sdk";
import { versionProblem } from "../../store/node-type-version-order.js";

/** Where a definition came from. */
export interface HandlerSource {
  /** npm package name, when it came from a package. */
  package?: string;
  /** Version of that package. */
  version?: string;
  /** The module file that exported it. */
  path: string;
}

/**
 * A checked definition. Its validators compile their schema on first call and keep it; while a schema does not compile
 * they fail everything with one error saying so, so call `schemaProblem()` first where that must read as what it is.
 */
export interface LoadedDefinition {
  definition: FabricDefinition;
  source: HandlerSource;
  validateInputs: ValidateFunction;
  validateOutputs: ValidateFunction;
  /**
   * Compiles both schemas unless done already, and says why one does not compile (undefined when both do). The first
   * time it finds a problem, the node type is listed in `failed` of the LoadedHandlers it came from.
   */
  schemaProblem?(): string | undefined;
}

/** One map key for a (node_type_id, version). */
export const keyOf = (nodeTypeId: string, version: string) => `${nodeTypeId}\u0000${version}`;

/** Why `nt` cannot be served (not a valid NodeType, a schema that would not compile), or undefined: the SDK runtime's check, with the registry's rule for versions. */
export function nodeTypeProblem(nt: unknown): string | undefined {
  return sdkNodeTypeProblem(nt, versionProblem);
}

/**
 * A LoadedDefinition whose schemas compile on first use: `onProblem` is told, once, when one does not. Compiled without
 * the meta-schema check, which the definition passed at load.
 */
export function lazyDefinition(definition: FabricDefinition, source: HandlerSource, onProblem: (reason: string) => void): LoadedDefinition {
  const nt = definition.nodeType;
  const name = `${nt.node_type_id}@${nt.version}`;
  let state: { inputs: ValidateFunction; outputs: ValidateFunction } | { problem: string } | undefined;
  const compile = () => {
    if (state) return state;
    state = compileNodeTypeSchemas(nt);
    if ("problem" in state) onProblem(state.problem);
    return state;
  };
  const validator = (which: "inputs" | "outputs"): ValidateFunction => {
    const wrapper = ((data: unknown) => {
      const s = compile();
      if ("problem" in s) {
        // Never a throw: whoever validates gets a failure that names the real problem.
        wrapper.errors = [{ instancePath: "", schemaPath: "#", keyword: "compile", params: {}, message: `cannot be checked: node type ${name}: ${s.problem}` }];
        return false;
      }
      const fn = s[which];
      const ok = fn(data);
      wrapper.errors = fn.errors;
      return ok;
    }) as unknown as ValidateFunction;
    return wrapper;
  };
  return {
    definition,
    source,
    validateInputs: validator("inputs"),
    validateOutputs: validator("outputs"),
    schemaProblem: () => {
      const s = compile();
      return "problem" in s ? s.problem : undefined;
    },
  };
}
