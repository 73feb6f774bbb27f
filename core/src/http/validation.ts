/**
 * Request validation with Ajv2020 against the v1 schemas of @nodefabric/schemas.
 * Bodies are validated strictly; query strings and path params get type coercion.
 */
import { createAjv, schemaId, type SchemaName } from "@nodefabric/schemas";
import type { ValidateFunction } from "ajv";
import type { FastifySchemaCompiler } from "fastify";

type Ajv = ReturnType<typeof createAjv>;
let bodyAjv: Ajv | undefined;
let coercingAjv: Ajv | undefined;

/** The process-wide Ajv2020 instance holding every v1 schema (bodies, no coercion). */
export function sharedAjv(): Ajv {
  bodyAjv ??= createAjv();
  return bodyAjv;
}

function queryAjv(): Ajv {
  coercingAjv ??= createAjv({ coerceTypes: true, useDefaults: true });
  return coercingAjv;
}

/** A route schema that points at one v1 schema by its `$id`. */
export function ref(name: SchemaName): { $ref: string } {
  return { $ref: schemaId(name) };
}

/** Fastify validator compiler: Ajv2020 for bodies, a coercing instance for query strings, params and headers. */
export const validatorCompiler: FastifySchemaCompiler<Record<string, unknown>> = ({ schema, httpPart }) => {
  const ajv = httpPart === "body" ? sharedAjv() : queryAjv();
  const s = schema as Record<string, unknown>;
  let fn: ValidateFunction | undefined;
  if (typeof s.$ref === "string" && Object.keys(s).length === 1) {
    fn = ajv.getSchema(s.$ref);
    if (!fn) throw new Error(`no schema registered with $id ${s.$ref}`);
  } else {
    fn = ajv.compile(s);
  }
  return fn as ReturnType<FastifySchemaCompiler<Record<string, unknown>>>;
};

// The words of a schema violation are the SDK runtime's, so the executor, the harness and every route agree.
export { dedupeIssues, issuesFromAjv } from "@nodefabric/sdk/runtime";

/**
 * Whether a JSON text nests objects and arrays deeper than `maxDepth` (the top level counts as 1). It scans the text
 * once, without recursion, skipping strings (escapes included), so a body nested 100,000 levels deep is refused before
 * anything recursive (the parser, validation, serialization) sees it. Malformed JSON is left to the parser.
 */
export function exceedsJsonDepth(text: string, maxDepth: number): boolean {
  const n = text.length;
  // Each level needs an opening bracket: a text no longer than the limit cannot pass it.
  if (n <= maxDepth) return false;
  let depth = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Jump to the closing quote: one not preceded by an odd run of backslashes.
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        if (j < 0) return false; // an unterminated string: the parser will say so
        let backslashes = 0;
        for (let k = j - 1; text.charCodeAt(k) === 0x5c /* \ */; k--) backslashes++;
        if ((backslashes & 1) === 0) break;
      }
      i = j;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return false;
}

/**
 * What the strict JSON parser of every service (createService) would refuse in a body that reached a service as a
 * value rather than as text (a plugin's route handing a Run API operation its request in process): nesting deeper
 * than `maxDepth` (counted as exceedsJsonDepth counts), or a `__proto__` key or a `constructor` object with a
 * `prototype` key (what secure-json-parse refuses). Undefined when neither; one walk, without recursion.
 */
export function jsonValueProblem(value: unknown, maxDepth: number): "too_deep" | "prototype" | undefined {
  if (value === null || typeof value !== "object") return undefined;
  const stack: [object, number][] = [[value, 1]];
  const own = Object.prototype.hasOwnProperty;
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (maxDepth > 0 && depth > maxDepth) return "too_deep";
    if (own.call(node, "__proto__")) return "prototype";
    if (own.call(node, "constructor")) {
      const ctor = (node as { constructor?: unknown }).constructor;
      if (ctor !== null && typeof ctor === "object" && own.call(ctor, "prototype")) return "prototype";
    }
    for (const key in node) {
      const child = (node as Record<string, unknown>)[key];
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }
  return undefined;
}
