/**
 * One operation made into an atomic NodeType carrying its HttpOperationDescriptor, or the reason it cannot be: the
 * node type is checked against the NodeType schema, the runtime's descriptor check, and the executor's validator.
 */
import type { NodeType } from "@nodefabric/schemas";
import { validatorFor } from "@nodefabric/schemas";
import { OPENAPI_EXTENSION, operationDescriptorOf, type HttpOperationDescriptor, type OperationBody } from "@nodefabric/sdk";
import { isRecord, oneLine } from "./json-values.js";
import type { MapContext } from "./map-context.js";
import type { OperationSite } from "./operations.js";
import { parametersOf } from "./parameters.js";
import { requestBodyOf } from "./request-body.js";
import { responseOf } from "./response.js";
import { DefsCollector } from "./schema-defs.js";
import { serverOf } from "./servers.js";
import type { MappedOperation, SchemaObject } from "./types.js";

/** What an operation may change, by method: the node type's `constraints.gates.side_effect_class`. */
const SIDE_EFFECT_CLASS_BY_METHOD: Readonly<Record<string, "read" | "write" | "irreversible">> = {
  get: "read",
  head: "read",
  options: "read",
  trace: "read",
  post: "write",
  put: "write",
  patch: "write",
  delete: "irreversible",
};

export function mapOperation(site: OperationSite, ctx: MapContext): MappedOperation | { reason: string } {
  const { operation, method } = site;
  const notes: string[] = [];
  const METHOD = method.toUpperCase();

  const security = ctx.security.forOperation(operation);
  if (security.unusable) return { reason: security.unusable };
  notes.push(...security.notes);

  const defs = new DefsCollector();
  const parameters = parametersOf(site, ctx, notes, defs);
  if ("reason" in parameters) return parameters;
  let body: { schema: SchemaObject; spec: OperationBody } | undefined;
  if ((method === "get" || method === "head") && operation.requestBody !== undefined) {
    // Fetch cannot send a body with GET or HEAD, and the runtime refuses such a descriptor.
    const followed = ctx.follow(operation.requestBody);
    if ("value" in followed && isRecord(followed.value) && followed.value.required === true) return { reason: `its request body is required, and a ${METHOD} request cannot carry one` };
    notes.push(`its optional request body is left out: a ${METHOD} request cannot carry one`);
  } else {
    const read = requestBodyOf(operation, ctx, notes, defs);
    if (read && "reason" in read) return read;
    body = read;
  }

  const properties: Array<[string, unknown]> = [...parameters.properties];
  const required = [...parameters.required];
  let bodySpec: OperationBody | undefined;
  if (body) {
    properties.push(["body", body.schema]);
    if (body.spec.required) required.push("body");
    bodySpec = body.spec;
  }
  const inputSchema: SchemaObject = {
    type: "object",
    properties: Object.fromEntries(properties),
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
  defs.attachTo(inputSchema);

  const answer = responseOf(operation, ctx, notes);
  const server = serverOf(site, ctx, notes);

  const descriptor: HttpOperationDescriptor = {
    api: { title: ctx.title, version: ctx.apiVersion },
    operation_id: site.operationId,
    method: METHOD,
    path: site.sentPath,
    server: server.server,
    settings: { base_url: ctx.baseUrlSetting, ...(server.variableSettings ? { server_variables: server.variableSettings } : {}) },
    parameters: parameters.parameters,
    ...(bodySpec ? { body: bodySpec } : {}),
    security_schemes: security.security_schemes,
    security: security.security,
    response: answer.response,
  };
  const nodeType: NodeType = {
    node_type_id: site.nodeTypeId,
    version: ctx.nodeTypeVersion,
    kind: "atomic",
    description: describeOperation(operation, METHOD, site.path, ctx.title),
    input_schema: inputSchema,
    output_schema: answer.outputSchema,
    constraints: { gates: { side_effect_class: SIDE_EFFECT_CLASS_BY_METHOD[method] } },
    extensions: { [OPENAPI_EXTENSION]: descriptor as unknown as Record<string, unknown> },
  };

  const validate = validatorFor("node_type");
  if (!validate(nodeType)) {
    return { reason: `its node type is not valid: ${(validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ")}` };
  }
  try {
    operationDescriptorOf(nodeType);
  } catch (err) {
    return { reason: `the runtime would refuse it: ${err instanceof Error ? err.message : String(err)}` };
  }
  for (const [which, schema] of [["input", inputSchema], ["output", answer.outputSchema]] as const) {
    const problem = ctx.checker.problemOf(schema);
    if (problem) return { reason: `its ${which} schema does not compile: ${problem}` };
  }
  return { nodeType, descriptor, tags: site.tags, fileName: "", notes };
}

function describeOperation(operation: Record<string, unknown>, method: string, path: string, title: string): string {
  const summary = typeof operation.summary === "string" && operation.summary.trim() !== "" ? operation.summary : typeof operation.description === "string" ? operation.description.trim().split(/\n\s*\n/)[0] : "";
  const text = oneLine(summary ?? "").replace(/[.:]$/, "");
  const call = `${method} ${path} of ${title}`;
  const sentence = text === "" ? `Calls ${call}.` : `${text}: calls ${call}.`;
  return operation.deprecated === true ? `${sentence} Deprecated by the API.` : sentence;
}
