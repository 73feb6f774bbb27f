import { Ajv2020, type Options, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule, { type FormatsPlugin } from "ajv-formats";
import { schemas, type SchemaName } from "./generated/schemas.js";
import type { SchemaTypes } from "./generated/types.js";

export { schemas, type SchemaName } from "./generated/schemas.js";
export type * from "./generated/types.js";

// ajv-formats is CommonJS; depending on the loader its function is the module or its `default`.
const addFormats: FormatsPlugin = (addFormatsModule as any).default ?? addFormatsModule;

/** The URI every v1 schema `$id` starts with. */
export const SCHEMA_BASE = "https://nodefabric.dev/schemas/v1/";

/** Keys of an `extensions` map: `<namespace>.<key>`, such as `nodefabric.attempt`. */
export const EXTENSION_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]*\.[A-Za-z0-9_.-]+$/;

/** A run id chosen by a client (`RunStartRequest.run_id`); anything else gets 400. */
export const CLIENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** The `$id` of a schema, such as `https://nodefabric.dev/schemas/v1/run.schema.json`. */
export function schemaId(name: SchemaName): string {
  return `${SCHEMA_BASE}${name}.schema.json`;
}

/** A fresh Ajv (draft 2020-12, strict, all errors, formats) that knows every v1 schema by its `$id`. */
export function createAjv(options?: Options): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, strict: true, ...options });
  addFormats(ajv);
  for (const schema of Object.values(schemas)) ajv.addSchema(schema);
  return ajv;
}

let shared: Ajv2020 | undefined;
const validators = new Map<SchemaName, ValidateFunction>();

/** The compiled validator of one schema; compiled on first use from one shared Ajv and cached. */
export function validatorFor<N extends SchemaName>(name: N): ValidateFunction<SchemaTypes[N]> {
  let validate = validators.get(name);
  if (!validate) {
    shared ??= createAjv();
    validate = shared.getSchema(schemaId(name));
    if (!validate) throw new Error(`unknown schema: ${String(name)}`);
    validators.set(name, validate);
  }
  return validate as ValidateFunction<SchemaTypes[N]>;
}
