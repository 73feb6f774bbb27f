/**
 * Compiles the input and output schemas of handler node types. Each node type gets its own Ajv instance:
 * handler authors choose their own `$id`s, and two packages reusing one must not collide.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv";
import addFormatsImport from "ajv-formats";

type FormatsPlugin = (ajv: Ajv2020) => Ajv2020;
// ajv-formats is CommonJS; depending on the loader its default import is the plugin or the module object.
const addFormats: FormatsPlugin =
  (addFormatsImport as unknown as { default?: FormatsPlugin }).default ?? (addFormatsImport as unknown as FormatsPlugin);

const ANY_OBJECT = { type: "object" };

/** A fresh Ajv2020 for handler schemas: unknown keywords tolerated (real schemas carry "example" etc.), every error reported. */
export function createHandlerAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
  addFormats(ajv);
  return ajv;
}

/** Compiles one schema of a node type; a missing schema accepts any object, as CONTRACT.md says. */
export function compileHandlerSchema(ajv: Ajv2020, schema: Record<string, unknown> | undefined): ValidateFunction {
  return ajv.compile(schema ?? ANY_OBJECT);
}
