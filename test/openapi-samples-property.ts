/**
 * The property behind openapi-samples-property*.test.ts: for every operation of an OpenAPI document, the sample inputs
 * the scaffolder writes into the generated package's tests (`sampleInputsOf`: the same generator, the same seed) are
 * valid against the node type's input_schema, with the executor's own validator, and the runtime
 * (`buildOperationRequest`) builds a request from them without error. A failure names the document, the operation
 * and the parameter.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadOpenApi, mapOpenApi, type MappedOperation, type OpenApiMapping } from "@nodefabric/importer-openapi";
import { buildOperationRequest, HandlerError, type HttpOperationDescriptor, type JsonObject } from "@nodefabric/sdk";
import { compileHandlerSchema, createHandlerAjv } from "@nodefabric/sdk/runtime";
import { sampleInputsOf } from "../templates/create-fabric-handler/src/openapi-package.js";
import { baseUrlSettingOf, nodeTypePrefixOf } from "../templates/create-fabric-handler/src/package-name.js";

export interface CorpusEntry {
  file: string;
  name: string;
  operations: number;
}

const fixtures = fileURLToPath(new URL("./fixtures/openapi/", import.meta.url));

/**
 * Operations whose input_schema no value satisfies, because the document's own schema contradicts itself; the
 * generated package lists each as a `todo` with the reason. Any other operation without a sample is a failure.
 */
export const UNSATISFIABLE: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  // Each value is the keyword at fault.
  // A `oneOf` of three identical `{ type: object, properties: {} }` branches: every object matches all three.
  "intellifi-brain.json": { addItem: "oneOf" },
  // `additionalProperties: false` beside an `allOf` that holds the properties: no property is allowed, some are required.
  "shipengine.yaml": {
    add_funds_to_carrier: "additionalProperties",
    add_funds_to_insurance: "additionalProperties",
    calculate_rates: "additionalProperties",
    compare_bulk_rates: "additionalProperties",
    create_label: "additionalProperties",
    create_package_type: "additionalProperties",
    create_shipments: "additionalProperties",
    create_warehouse: "additionalProperties",
    estimate_rates: "additionalProperties",
    update_package_type: "additionalProperties",
    update_shipment: "additionalProperties",
    update_warehouse: "additionalProperties",
  },
  // A property `required` that `properties` does not name, with `additionalProperties: false`.
  "jira.json": { addSecurityLevelMembers: "securitySchemeLevelMembers", createScreenScheme: "defaultScreen" },
};

export const corpus = JSON.parse(readFileSync(path.join(fixtures, "corpus.json"), "utf8")) as CorpusEntry[];

/** What the property saw on one document. */
export interface DocumentCheck {
  file: string;
  /** Operations made into node types, each checked. */
  checked: number;
  /** One line per broken operation: document, operation, parameter, why. */
  failures: string[];
  /**
   * Operations the scaffolder writes no sample for (their generated test is a `todo` saying why), by operationId:
   * the sampler found no value the input_schema accepts.
   */
  unsampled: Record<string, string>;
}

/** The package name openapi-corpus.test.ts gives the document, so node type ids (and so seeds) are the ones its generated tests use. */
export function packageNameOf(file: string): string {
  return `corpus-${file.replace(/\.(json|yaml)$/, "").toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
}

/** Where a request goes when the document names no absolute server URL, as in the generated tests. */
const TEST_BASE_URL = "https://upstream.test";

/** The input a message is about: `/pathName/0` → `pathName`, `body.file` → `body`. */
function inputOf(pointerOrField: string | undefined): string | undefined {
  if (!pointerOrField) return undefined;
  const first = pointerOrField.replace(/^\//, "").split(/[/.]/)[0];
  return first === "" ? undefined : first?.replace(/~1/g, "/").replace(/~0/g, "~");
}

/** `the path parameter workflowName`, `the body`, or `the inputs` when no one input is named. */
function describeInput(op: HttpOperationDescriptor, input: string | undefined): string {
  if (input === undefined) return "the inputs";
  if (op.body && op.body.input === input) return "the body";
  const p = op.parameters.find((q) => q.input === input);
  return p ? `the ${p.in} parameter ${p.name}${p.input !== p.name ? ` (input ${p.input})` : ""}` : `the input ${input}`;
}

/** The secret a security scheme reads, made up; server variables keep their defaults. */
function requestOptions(op: HttpOperationDescriptor, configuredBase: string | undefined) {
  return {
    setting: (name: string) => (name === op.settings.base_url ? configuredBase : undefined),
    secret: (name: string) => `test-${name.toLowerCase()}`,
    fetch: (() => Promise.reject(new Error("no network in this check"))) as unknown as typeof fetch,
  };
}

/** Checks one operation: a line naming what broke, `{ unsampled }` when no sample is written, or undefined. */
async function checkOperation(file: string, operation: MappedOperation, configuredBase: string | undefined, ajv: ReturnType<typeof createHandlerAjv>): Promise<string | { unsampled: string } | undefined> {
  const op = operation.descriptor;
  const where = `${file} ${op.method} ${op.path} (${op.operation_id}, ${operation.nodeType.node_type_id})`;
  const sample = sampleInputsOf(operation);
  if ("error" in sample) return { unsampled: sample.error };
  const schema = operation.nodeType.input_schema as Record<string, unknown>;
  let valid: boolean;
  let errors: Array<{ instancePath: string; message?: string }> | null | undefined;
  try {
    const validate = compileHandlerSchema(ajv, schema);
    valid = validate(sample.inputs) as boolean;
    errors = validate.errors;
  } finally {
    ajv.removeSchema(schema);
  }
  if (!valid) {
    const first = errors?.[0];
    return `${where}: ${describeInput(op, inputOf(first?.instancePath))} has the sample ${JSON.stringify(sample.inputs[inputOf(first?.instancePath) ?? ""] ?? sample.inputs).slice(0, 200)}, which the input_schema refuses: ${first?.instancePath || "/"} ${first?.message ?? ""}`;
  }
  try {
    await buildOperationRequest(op, sample.inputs as JsonObject, requestOptions(op, configuredBase));
  } catch (err) {
    const field = HandlerError.is(err) ? (err.details as { field?: string } | undefined)?.field : undefined;
    const input = inputOf(field);
    const value = input !== undefined ? JSON.stringify(sample.inputs[input])?.slice(0, 200) : undefined;
    return `${where}: ${describeInput(op, input)}${value !== undefined ? ` has the sample ${value}, and` : ":"} the runtime refuses the request: ${err instanceof Error ? err.message : String(err)}`;
  }
  return undefined;
}

/** Maps one corpus document as the scaffolder does and checks every operation it makes. */
export async function checkDocument(entry: CorpusEntry): Promise<DocumentCheck> {
  const loaded = await loadOpenApi(path.join(fixtures, entry.file));
  const nodeTypePrefix = nodeTypePrefixOf(packageNameOf(entry.file));
  const mapping = mapOpenApi(loaded.document, {
    prefix: nodeTypePrefix,
    settingsPrefix: baseUrlSettingOf(nodeTypePrefix).replace(/_BASE_URL$/, ""),
    location: loaded.location,
  });
  return checkMapping(entry.file, mapping);
}

/** Checks every operation of a mapping, made from the document `file`. */
export async function checkMapping(file: string, mapping: OpenApiMapping): Promise<DocumentCheck> {
  const configuredBase = mapping.defaultBaseUrl === "" ? TEST_BASE_URL : undefined;
  const failures: string[] = [];
  const unsampled: Record<string, string> = {};
  const ajv = createHandlerAjv();
  for (const operation of mapping.operations) {
    const outcome = await checkOperation(file, operation, configuredBase, ajv);
    if (typeof outcome === "string") failures.push(outcome);
    else if (outcome) unsampled[operation.descriptor.operation_id] = outcome.unsampled;
  }
  return { file, checked: mapping.operations.length, failures, unsampled };
}
