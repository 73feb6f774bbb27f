/**
 * The input-schema check a call's arguments pass before any run starts, compiled once per node type version with the
 * SDK's JSON Schema validator (Ajv, draft 2020-12).
 */
import type * as Sdk from "@modelcontextprotocol/server";
import type { NodeType } from "@nodefabric/schemas";
import { trackCache } from "@nodefabric/core";

/** Validators compiled once per (node type, version): a published version never changes. */
const validators = new Map<string, Sdk.JsonSchemaValidator<unknown>>();
trackCache("mcp.input_validators", validators, (m) => ({ entries: m.size }), { max_entries: 10_000 });

export function validatorOf(deps: { validator: Sdk.jsonSchemaValidator }, t: NodeType): Sdk.JsonSchemaValidator<unknown> {
  const key = `${t.node_type_id}@${t.version}`;
  let v = validators.get(key);
  if (!v) {
    if (validators.size >= 10_000) validators.clear();
    v = deps.validator.getValidator<unknown>((t.input_schema as Sdk.JsonSchemaType | undefined) ?? { type: "object" });
    validators.set(key, v);
  }
  return v;
}
