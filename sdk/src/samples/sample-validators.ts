/**
 * The validators samples are checked with: the executor's own (`createHandlerAjv`, `compileHandlerSchema`), compiled
 * once per root schema while it is among the last used, and per subschema (oneOf branches, `not`, `if`) on demand.
 */
import type { ValidateFunction } from "ajv";
import type { Ajv2020 } from "ajv/dist/2020.js";
import { compileHandlerSchema, createHandlerAjv } from "../runtime/handler-schemas.js";
import { isRecord, type SchemaObject } from "./schema-object.js";

/** A root schema's validator, or why it does not compile; with the validators of its subschemas (oneOf, not, if). */
export type Compiled = { validate: ValidateFunction; subs: WeakMap<object, ValidateFunction | null> } | { error: string };

/**
 * Validators of the schemas sampled last, most recent last. Bounded, not weak: a compiled validator of a large schema
 * takes megabytes, and a mapping holds every schema of a document until it is written out.
 */
const compiledRoots = new Map<object, Compiled>();
const COMPILED_ROOTS_KEPT = 8;
let rootAjv: Ajv2020 | undefined;
let subAjv: Ajv2020 | undefined;

/** Compiles `schema` in a shared Ajv and lets the Ajv forget it, so the validator goes when its cache entry goes. */
function compileOnce(ajv: Ajv2020, schema: SchemaObject): ValidateFunction {
  try {
    return compileHandlerSchema(ajv, schema);
  } finally {
    ajv.removeSchema(schema);
  }
}

/** The executor's validator of `schema` (createHandlerAjv, compileHandlerSchema), compiled once while it is among the last used. */
export function rootValidator(schema: SchemaObject): Compiled {
  let compiled = compiledRoots.get(schema);
  if (compiled !== undefined) {
    compiledRoots.delete(schema);
  } else {
    rootAjv ??= createHandlerAjv();
    try {
      compiled = { validate: compileOnce(rootAjv, schema), subs: new WeakMap() };
    } catch (err) {
      compiled = { error: err instanceof Error ? err.message : String(err) };
    }
    if (compiledRoots.size >= COMPILED_ROOTS_KEPT) compiledRoots.delete(compiledRoots.keys().next().value!);
  }
  compiledRoots.set(schema, compiled);
  return compiled;
}

/** A validator of `node`, a subschema of `root` (its `$ref`s resolved in the root's `$defs`); null when it does not compile. */
export function subValidator(root: SchemaObject, subs: WeakMap<object, ValidateFunction | null>, node: SchemaObject): ValidateFunction | null {
  let validate = subs.get(node);
  if (validate === undefined) {
    // The root passed the meta-schema check when it compiled; its parts need not pass it again.
    subAjv ??= createHandlerAjv({ validateSchema: false });
    const standalone: SchemaObject = isRecord(root.$defs) ? { ...node, $defs: root.$defs } : { ...node };
    delete standalone.$id;
    try {
      validate = compileOnce(subAjv, standalone);
    } catch {
      validate = null;
    }
    subs.set(node, validate);
  }
  return validate;
}
