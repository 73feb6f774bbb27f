/**
 * JSONata expressions inside plans: recognising `"{% … %}"`, parsing once, reading the names an
 * expression uses from its AST, and evaluating it into plain JSON.
 */
import jsonata from "jsonata";
import type { JsonValue } from "@nodefabric/sdk";

/** A node of JSONata's parsed AST; its typings omit node types such as "path" and "bind", so this is looser. */
interface AstNode {
  type: string;
  value?: unknown;
  position?: number;
  steps?: AstNode[];
  stages?: unknown[];
  [key: string]: unknown;
}

/** The document an expression is evaluated against. */
export interface ExpressionScope {
  inputs: unknown;
  steps: Record<string, { outputs: unknown }>;
  item?: unknown;
  index?: number;
}

/** A name an expression reads from its root document (`inputs`, `steps`, `item`, …), with where it appears. */
export interface RootName {
  name: string;
  position: number;
}

/** What an expression reads: root names, `steps.<id>` references, and any `steps` access without an id. */
export interface ExpressionReads {
  rootNames: RootName[];
  stepRefs: RootName[];
  /** Positions where `steps` is read without a following step id (e.g. `steps[0]`, `$keys(steps)`). */
  bareSteps: number[];
}

/** A parsed expression, ready to evaluate. */
export interface PlanExpression {
  source: string;
  reads: ExpressionReads;
  /** The value as plain JSON (undefined when the expression matches nothing); rejects on a JSONata error. */
  evaluate(scope: ExpressionScope): Promise<JsonValue | undefined>;
}

/** A JSONata error as thrown by the library (parse or evaluation). */
interface JsonataFailure {
  code?: string;
  position?: number;
  message: string;
}

const NO_SHORTCUT = Symbol("no-shortcut");
// JSONata counts positions in the text between the delimiters; people see the whole "{% … %}" string.
const DELIMITER_LENGTH = 2;

/** The text between `{%` and `%}` when `value` is an expression string, otherwise undefined. */
export function expressionSource(value: unknown): string | undefined {
  if (typeof value !== "string" || value.length < 4) return undefined;
  if (!value.startsWith("{%") || !value.endsWith("%}")) return undefined;
  return value.slice(2, -2);
}

/** A JSONata error's message with its code and character position in the `"{% … %}"` string, for people. */
export function describeJsonataError(err: unknown): string {
  const e = err as JsonataFailure;
  const message = typeof e?.message === "string" ? e.message : String(err);
  const code = typeof e?.code === "string" ? e.code : undefined;
  const at = typeof e?.position === "number" ? ` at character ${e.position + DELIMITER_LENGTH}` : "";
  return code ? `${message} (JSONata ${code}${at})` : message;
}

function isNode(value: unknown): value is AstNode {
  return typeof value === "object" && value !== null && !Array.isArray(value) && typeof (value as { type?: unknown }).type === "string";
}

/** Where a token ends, counted in characters of the whole `"{% … %}"` string (1-based, as JSONata counts). */
function position(node: AstNode): number {
  return (typeof node.position === "number" ? node.position : 0) + DELIMITER_LENGTH;
}

// Child keys evaluated against something other than the context they appear in (a step's items, a matched object).
const RELATIVE_KEYS = new Set(["stages", "predicate", "group", "pattern", "update", "delete", "terms"]);

/**
 * Collects what an expression reads from the root document. Only names evaluated against the root count:
 * the first step of a path at the top level (or after `$$`), not later steps, predicates or group-bys.
 * Lambdas keep the context they were defined in, so their bodies count as top level where they are written.
 */
function collectReads(node: unknown, atRoot: boolean, out: ExpressionReads): void {
  if (Array.isArray(node)) {
    for (const child of node) collectReads(child, atRoot, out);
    return;
  }
  if (!isNode(node)) return;
  if (node.type === "name") {
    collectPath({ type: "path", steps: [node] }, atRoot, out);
    return;
  }
  if (node.type === "path") {
    collectPath(node, atRoot, out);
    return;
  }
  for (const [key, child] of Object.entries(node)) {
    if (key === "type" || key === "value" || key === "position") continue;
    if (node.type === "lambda" && key === "arguments") continue; // parameter declarations, not reads
    collectReads(child, RELATIVE_KEYS.has(key) ? false : atRoot, out);
  }
}

function collectPath(node: AstNode, atRoot: boolean, out: ExpressionReads): void {
  const steps = (Array.isArray(node.steps) ? node.steps : []) as AstNode[];
  let first = 0;
  let rooted = atRoot;
  const head = steps[0];
  if (head?.type === "variable" && (head.value === "$" || (head.value === "" && atRoot))) {
    // `$$` (and `$` at the top level) is the root document itself.
    rooted = true;
    first = 1;
  }
  const lead = steps[first];
  if (rooted && lead?.type === "name" && typeof lead.value === "string") {
    out.rootNames.push({ name: lead.value, position: position(lead) });
    if (lead.value === "steps") {
      const next = steps[first + 1];
      const filtered = Array.isArray(lead.stages) && lead.stages.length > 0;
      if (!filtered && next?.type === "name" && typeof next.value === "string") {
        out.stepRefs.push({ name: next.value, position: position(next) });
      } else {
        out.bareSteps.push(position(lead));
      }
    }
  }
  steps.forEach((step, i) => {
    if (step.type === "name" || step.type === "variable") {
      for (const [key, child] of Object.entries(step)) {
        if (key !== "type" && key !== "value" && key !== "position") collectReads(child, false, out);
      }
    } else {
      collectReads(step, i === 0 ? atRoot : false, out);
    }
  });
  for (const [key, child] of Object.entries(node)) {
    if (key !== "type" && key !== "steps" && key !== "position") collectReads(child, false, out);
  }
}

/**
 * For the common `a.b.c` expression (names only), the property names to follow; evaluating it then needs
 * no JSONata call. Anything with predicates, variables or other operators returns undefined.
 */
function simplePath(ast: AstNode): string[] | undefined {
  if (ast.type !== "path" || !Array.isArray(ast.steps)) return undefined;
  const names: string[] = [];
  for (const key of Object.keys(ast)) if (key !== "type" && key !== "steps") return undefined;
  for (const step of ast.steps as AstNode[]) {
    if (step.type !== "name" || typeof step.value !== "string") return undefined;
    for (const key of Object.keys(step)) if (key !== "type" && key !== "value" && key !== "position") return undefined;
    names.push(step.value);
  }
  return names.length > 0 ? names : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Follows a names-only path the way JSONata would when every intermediate value is a single object:
 * JSONata returns the final value itself (arrays included). Anything else (an array to map over, a
 * scalar) is left to JSONata.
 */
function followPath(names: string[], scope: ExpressionScope): unknown {
  let value: unknown = scope;
  for (let i = 0; i < names.length; i++) {
    if (value === undefined) return undefined;
    if (!isPlainObject(value)) return NO_SHORTCUT;
    const name = names[i] as string;
    value = Object.hasOwn(value, name) ? value[name] : undefined;
  }
  return value;
}

/** Parses an expression; throws the JSONata syntax error when it does not parse. */
export function parseExpression(source: string): PlanExpression {
  const compiled = jsonata(source);
  const ast = compiled.ast() as unknown as AstNode;
  const reads: ExpressionReads = { rootNames: [], stepRefs: [], bareSteps: [] };
  collectReads(ast, true, reads);
  const shortcut = simplePath(ast);
  return {
    source,
    reads,
    async evaluate(scope: ExpressionScope): Promise<JsonValue | undefined> {
      if (shortcut) {
        // The scope holds JSON only, so what a plain path reaches needs no copying.
        const value = followPath(shortcut, scope);
        if (value !== NO_SHORTCUT) return value as JsonValue | undefined;
      }
      return toJson(await compiled.evaluate(scope));
    },
  };
}

/**
 * Copies a JSONata result into plain JSON: JSONata marks its sequences with extra properties, and a
 * function or a non-finite number is no JSON value at all.
 */
export function toJson(value: unknown): JsonValue | undefined {
  if (value === undefined || value === null) return value as undefined | null;
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      if (!Number.isFinite(value)) throw new Error(`evaluated to ${value}, which is not a JSON number`);
      return value;
    case "function":
      throw new Error("evaluated to a function, which is not a JSON value");
    case "object": {
      if (Array.isArray(value)) return value.map((v) => toJson(v) ?? null);
      const out: Record<string, JsonValue> = {};
      for (const [k, v] of Object.entries(value)) {
        const json = toJson(v);
        if (json !== undefined) out[k] = json;
      }
      return out;
    }
    default:
      throw new Error(`evaluated to a ${typeof value}, which is not a JSON value`);
  }
}

/** Truthiness as JSONata's `$boolean` defines it: empty strings, arrays, objects, 0 and null are false. */
export function jsonataBoolean(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (Array.isArray(value)) return value.some(jsonataBoolean);
  switch (typeof value) {
    case "boolean":
      return value;
    case "number":
      return value !== 0;
    case "string":
      return value.length > 0;
    case "object":
      return Object.keys(value).length > 0;
    default:
      return false;
  }
}
