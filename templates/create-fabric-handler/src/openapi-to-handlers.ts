/**
 * An OpenAPI 3.0/3.1 document (already dereferenced) turned into a handler package's files: one atomic node type per
 * operation, each calling its operation through the package's `src/http-operation.ts`.
 *
 * The rules, which the generated README repeats:
 * - node_type_id is `<prefix>.<operationId>`, every run of characters a node type id cannot hold replaced by `-`;
 *   an operation without operationId is named `<method>-<path segments>` (GET /pets/{petId} → `get-pets-petId`);
 * - input_schema has one property per path, query and header parameter (keyed by name; by `<in>_<name>` when two
 *   share a name) and `body` for a JSON request body, required as the document says;
 * - output_schema is the JSON schema of the first 2xx answer that has one (200, 201, … then 2XX); a value that is not
 *   an object is answered as `{ result: <value> }`; no JSON answer gives `{ type: "object" }` and outputs `{}`;
 * - side_effect_class: GET, HEAD, OPTIONS, TRACE → read; POST, PUT, PATCH → write; DELETE → irreversible.
 */
import { ScaffoldError } from "./errors.js";
import { describesOnlyObjects, toJsonSchema, type SchemaObject } from "./openapi-schema.js";
import { exampleOf } from "./schema-example.js";
import { renderTemplateFolder, type GeneratedFile } from "./template-files.js";
import { tsLiteral, tsString } from "./ts-literal.js";

/** The parts of an OpenAPI 3.x document this generator reads. */
export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: OpenApiServer[];
  paths?: Record<string, OpenApiPathItem | undefined>;
}

/** An entry of `servers`. */
export interface OpenApiServer {
  url: string;
  variables?: Record<string, { default?: string }>;
}

/** A Path Item Object: the operations on one path and the parameters they share. */
export type OpenApiPathItem = Partial<Record<HttpMethod, OpenApiOperation>> & { parameters?: OpenApiParameter[] };

/** An Operation Object. */
export interface OpenApiOperation {
  operationId?: string;
  summary?: string;
  description?: string;
  deprecated?: boolean;
  parameters?: OpenApiParameter[];
  requestBody?: { required?: boolean; description?: string; content?: Record<string, OpenApiMediaType> };
  responses?: Record<string, { description?: string; content?: Record<string, OpenApiMediaType> } | undefined>;
}

/** A Parameter Object. */
export interface OpenApiParameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  description?: string;
  deprecated?: boolean;
  schema?: unknown;
  content?: Record<string, OpenApiMediaType>;
  example?: unknown;
  examples?: Record<string, { value?: unknown } | undefined>;
}

/** A Media Type Object. */
export interface OpenApiMediaType {
  schema?: unknown;
  example?: unknown;
}

/** The HTTP methods an OpenAPI path item can hold, in the order operations are generated. */
export const HTTP_METHODS = ["get", "head", "options", "trace", "post", "put", "patch", "delete"] as const;

/** One of HTTP_METHODS. */
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** What an operation may change, by method: the node type's `constraints.gates.side_effect_class`. */
export const SIDE_EFFECT_CLASS_BY_METHOD: Readonly<Record<HttpMethod, "read" | "write" | "irreversible">> = {
  get: "read",
  head: "read",
  options: "read",
  trace: "read",
  post: "write",
  put: "write",
  patch: "write",
  delete: "irreversible",
};

/** Header parameters OpenAPI says to ignore: the request's own headers carry them. */
const IGNORED_HEADERS = new Set(["accept", "content-type", "authorization"]);

/** What node type ids may hold (the NodeType schema's pattern). */
const NODE_TYPE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** One input sent as a parameter of the request. */
export interface HttpParameterMapping {
  input: string;
  name: string;
  in: "path" | "query" | "header";
}

/** One operation as a node type: its NodeType fields, how it calls the upstream, and an example exchange for its test. */
export interface HttpNodeType {
  nodeTypeId: string;
  /** The document's operationId, or the name made for an operation without one. */
  operationId: string;
  method: Uppercase<HttpMethod>;
  path: string;
  description: string;
  sideEffectClass: "read" | "write" | "irreversible";
  inputSchema: SchemaObject;
  outputSchema: SchemaObject;
  parameters: HttpParameterMapping[];
  jsonBody: boolean;
  outputs: "object" | "result" | "none";
  example: HttpExchangeExample;
  /** File (without extension) under src/operations/ and exported name. */
  fileName: string;
  exportName: string;
}

/** Valid inputs, the upstream answer a test mocks for them, and the outputs that answer gives. */
export interface HttpExchangeExample {
  inputs: Record<string, unknown>;
  status: number;
  responseBody?: unknown;
  outputs: Record<string, unknown>;
}

/** An operation left out, and why. */
export interface SkippedOperation {
  method: Uppercase<HttpMethod>;
  path: string;
  reason: string;
}

/** The node types made from a document. */
export interface OpenApiMapping {
  title: string;
  apiVersion: string;
  /** From `servers[0]`; empty when the document names no absolute server URL. */
  defaultBaseUrl: string;
  nodeTypes: HttpNodeType[];
  skipped: SkippedOperation[];
}

/** Throws a ScaffoldError unless `document` is an OpenAPI 3.0 or 3.1 document (Swagger 2 is refused by name). */
export function assertOpenApi3(document: unknown, source: string): asserts document is OpenApiDocument {
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw new ScaffoldError(`${source} is not an OpenAPI document (expected a JSON or YAML object)`);
  }
  const d = document as Record<string, unknown>;
  if (d.swagger !== undefined) {
    throw new ScaffoldError(`${source} is Swagger ${String(d.swagger)}, which is not supported: convert it to OpenAPI 3.0 or 3.1 first`);
  }
  if (typeof d.openapi !== "string" || !/^3\.[01]\.\d+/.test(d.openapi)) {
    throw new ScaffoldError(`${source} is not OpenAPI 3.0 or 3.1 (its "openapi" field is ${JSON.stringify(d.openapi ?? null)})`);
  }
  const info = d.info as Record<string, unknown> | undefined;
  if (typeof info?.title !== "string") throw new ScaffoldError(`${source} has no info.title`);
}

/** Options of mapOpenApi. */
export interface MapOpenApiOptions {
  /** The part of every node_type_id before the dot. */
  nodeTypePrefix: string;
  /** Where the document came from; a relative server URL is resolved against it when it is an http(s) URL. */
  source?: string;
}

/** The node types of every operation of `document`; throws a ScaffoldError on clashing ids or when nothing is left. */
export function mapOpenApi(document: OpenApiDocument, options: MapOpenApiOptions): OpenApiMapping {
  const source = options.source ?? "the OpenAPI document";
  assertOpenApi3(document, source);
  const nodeTypes: HttpNodeType[] = [];
  const skipped: SkippedOperation[] = [];
  const byId = new Map<string, string>();
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    if (!item) continue;
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const where = `${method.toUpperCase()} ${path}`;
      const result = mapOperation(document, path, method, operation, item.parameters ?? [], options.nodeTypePrefix);
      if ("reason" in result) {
        skipped.push(result);
        continue;
      }
      const prior = byId.get(result.nodeTypeId);
      if (prior) {
        throw new ScaffoldError(`${prior} and ${where} both give the node type id ${result.nodeTypeId}; give them distinct operationIds`);
      }
      byId.set(result.nodeTypeId, where);
      nodeTypes.push(result);
    }
  }
  if (nodeTypes.length === 0) {
    const why = skipped.length > 0 ? `: ${skipped.map((s) => `${s.method} ${s.path} (${s.reason})`).join("; ")}` : "";
    throw new ScaffoldError(`${source} has no operation a node type can be made from${why}`);
  }
  assignNames(nodeTypes);
  return {
    title: document.info.title,
    apiVersion: String(document.info.version ?? ""),
    defaultBaseUrl: defaultBaseUrlOf(document, options.source),
    nodeTypes,
    skipped,
  };
}

/** The absolute base URL of `servers[0]`, its variables set to their defaults; "" when there is none. */
export function defaultBaseUrlOf(document: OpenApiDocument, source?: string): string {
  const server = document.servers?.[0];
  if (!server || typeof server.url !== "string") return "";
  const url = server.url.replace(/\{([^}]+)\}/g, (whole, name: string) => server.variables?.[name]?.default ?? whole);
  if (/^https?:\/\/[^/{}]+/i.test(url)) return url.replace(/\/+$/, "");
  if (source && /^https?:\/\//i.test(source) && !url.includes("{")) return new URL(url, source).href.replace(/\/+$/, "");
  return "";
}

function mapOperation(
  document: OpenApiDocument,
  path: string,
  method: HttpMethod,
  operation: OpenApiOperation,
  pathLevelParameters: OpenApiParameter[],
  nodeTypePrefix: string,
): HttpNodeType | SkippedOperation {
  const METHOD = method.toUpperCase() as Uppercase<HttpMethod>;
  const skip = (reason: string): SkippedOperation => ({ method: METHOD, path, reason });
  const where = operation.operationId ? `operation ${operation.operationId} (${METHOD} ${path})` : `${METHOD} ${path}`;
  const operationId = operation.operationId ?? `${method}-${pathSlug(path)}`;
  const idPart = operationId.replace(/[^A-Za-z0-9._:-]+/g, "-").replace(/^[^A-Za-z0-9]+/, "").replace(/-+$/, "");
  const nodeTypeId = `${nodeTypePrefix}.${idPart}`;
  if (idPart === "" || !NODE_TYPE_ID.test(nodeTypeId)) {
    throw new ScaffoldError(`${where}: cannot make a node type id from it (${JSON.stringify(nodeTypeId)} is not 1-128 of [A-Za-z0-9._:-]); give it a shorter operationId`);
  }

  const body = requestBodyOf(operation);
  if (body === "unsupported") return skip(`its required request body is not JSON (${Object.keys(operation.requestBody?.content ?? {}).join(", ")})`);

  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  const parameters: HttpParameterMapping[] = [];
  const exampleInputs: Record<string, unknown> = {};
  for (const parameter of parametersOf(path, pathLevelParameters, operation.parameters ?? [])) {
    if (parameter.in === "cookie") {
      if (parameter.required) return skip(`cookie parameters are not supported (${parameter.name})`);
      continue;
    }
    if (parameter.in === "header" && IGNORED_HEADERS.has(parameter.name.toLowerCase())) continue;
    let input = parameter.name;
    if (input in properties || (input === "body" && body)) input = `${parameter.in}_${parameter.name}`;
    if (input in properties) throw new ScaffoldError(`${where}: two parameters both map to the input ${input}`);
    const schema = parameterSchema(parameter, document.openapi);
    properties[input] = schema;
    if (parameter.required || parameter.in === "path") required.push(input);
    parameters.push({ input, name: parameter.name, in: parameter.in });
    exampleInputs[input] = exampleOf(schema);
  }
  if (body) {
    const schema = toJsonSchema(body.schema, "request", document.openapi);
    if (operation.requestBody?.description && schema.description === undefined) schema.description = operation.requestBody.description;
    properties.body = schema;
    if (operation.requestBody?.required) required.push("body");
    exampleInputs.body = exampleOf(schema);
  }
  const inputSchema: SchemaObject = { type: "object", properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false };

  const answer = successAnswerOf(operation);
  let outputs: HttpNodeType["outputs"] = "none";
  let outputSchema: SchemaObject = { type: "object" };
  let responseBody: unknown;
  let exampleOutputs: Record<string, unknown> = {};
  if (answer.schema !== undefined) {
    const schema = toJsonSchema(answer.schema, "response", document.openapi);
    responseBody = exampleOf(schema);
    if (describesOnlyObjects(schema)) {
      outputs = "object";
      outputSchema = schema;
      exampleOutputs = responseBody as Record<string, unknown>;
    } else {
      outputs = "result";
      outputSchema = { type: "object", properties: { result: schema }, required: ["result"], additionalProperties: false };
      exampleOutputs = { result: responseBody };
    }
  }

  return {
    nodeTypeId,
    operationId,
    method: METHOD,
    path,
    description: describeOperation(operation, METHOD, path, document.info.title),
    sideEffectClass: SIDE_EFFECT_CLASS_BY_METHOD[method],
    inputSchema,
    outputSchema,
    parameters,
    jsonBody: body !== undefined,
    outputs,
    example: { inputs: exampleInputs, status: answer.status, ...(outputs === "none" ? {} : { responseBody }), outputs: exampleOutputs },
    fileName: "",
    exportName: "",
  };
}

/** The path's segments joined by `-`, braces dropped: `/pets/{petId}` → `pets-petId`; `/` → `root`. */
function pathSlug(path: string): string {
  const slug = path
    .split("/")
    .map((segment) => segment.replace(/[{}]/g, ""))
    .filter((segment) => segment !== "")
    .join("-");
  return slug === "" ? "root" : slug;
}

/** Path-level parameters overridden by operation-level ones (same name and location), plus any path template name left undeclared. */
function parametersOf(path: string, pathLevel: OpenApiParameter[], operationLevel: OpenApiParameter[]): OpenApiParameter[] {
  const byKey = new Map<string, OpenApiParameter>();
  for (const parameter of [...pathLevel, ...operationLevel]) {
    if (parameter && typeof parameter.name === "string") byKey.set(`${parameter.in}:${parameter.name}`, parameter);
  }
  for (const match of path.matchAll(/\{([^}]+)\}/g)) {
    const key = `path:${match[1]}`;
    // Documents sometimes forget to declare a path parameter; the request cannot be made without it.
    if (!byKey.has(key)) byKey.set(key, { name: match[1], in: "path", required: true, schema: { type: "string" } });
  }
  return [...byKey.values()];
}

function parameterSchema(parameter: OpenApiParameter, openapiVersion: string): SchemaObject {
  const raw = parameter.schema ?? jsonMediaOf(parameter.content)?.schema ?? {};
  const schema = toJsonSchema(raw, "request", openapiVersion);
  if (parameter.description && schema.description === undefined) schema.description = parameter.description;
  if (parameter.deprecated) schema.deprecated = true;
  const example = parameter.example ?? Object.values(parameter.examples ?? {}).find((e) => e?.value !== undefined)?.value;
  if (example !== undefined && schema.examples === undefined) schema.examples = [structuredClone(example)];
  if (parameter.in === "path" && schema.type === "string" && schema.minLength === undefined) {
    // An empty path segment would address another resource.
    schema.minLength = 1;
  }
  return schema;
}

function isJsonMediaType(mediaType: string): boolean {
  return /^application\/(?:[\w.+-]+\+)?json(?:\s*;.*)?$/i.test(mediaType.trim());
}

function jsonMediaOf(content: Record<string, OpenApiMediaType> | undefined): OpenApiMediaType | undefined {
  if (!content) return undefined;
  const key = Object.keys(content).find((k) => k.toLowerCase() === "application/json") ?? Object.keys(content).find(isJsonMediaType);
  return key === undefined ? undefined : (content[key] ?? {});
}

/** The JSON request body, undefined when there is none (or an optional non-JSON one), "unsupported" for a required non-JSON one. */
function requestBodyOf(operation: OpenApiOperation): { schema: unknown } | undefined | "unsupported" {
  const requestBody = operation.requestBody;
  if (!requestBody?.content || Object.keys(requestBody.content).length === 0) return undefined;
  const media = jsonMediaOf(requestBody.content);
  if (media) return { schema: media.schema ?? {} };
  return requestBody.required ? "unsupported" : undefined;
}

/** The status a test's mocked upstream answers with, and the JSON schema of that answer when the document gives one. */
function successAnswerOf(operation: OpenApiOperation): { status: number; schema?: unknown } {
  const codes = Object.keys(operation.responses ?? {})
    .filter((code) => /^2(\d\d|XX)$/i.test(code))
    // Exact codes in order (200, 201, …), then the 2XX range.
    .sort((a, b) => (a.toUpperCase() === "2XX" ? 1 : b.toUpperCase() === "2XX" ? -1 : a.localeCompare(b)));
  for (const code of codes) {
    const media = jsonMediaOf(operation.responses?.[code]?.content);
    if (media) return { status: statusOf(code), schema: media.schema ?? {} };
  }
  return { status: codes.length > 0 ? statusOf(codes[0]) : 200 };
}

function statusOf(code: string): number {
  return /^\d+$/.test(code) ? Number(code) : 200;
}

function describeOperation(operation: OpenApiOperation, method: string, path: string, title: string): string {
  const summary = (operation.summary ?? operation.description?.split(/\n\s*\n/)[0] ?? "").trim().replace(/\s+/g, " ").replace(/\.$/, "");
  const call = `${method} ${path} of ${title}`;
  const text = summary === "" ? `Calls ${call}.` : `${summary}: calls ${call}.`;
  return operation.deprecated ? `${text} Deprecated by the API.` : text;
}

/** Words that cannot name a variable, and names the generated files already use. */
const TAKEN_NAMES = new Set([
  ...["break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete", "do", "else", "enum", "export", "extends"],
  ...["false", "finally", "for", "function", "if", "import", "in", "instanceof", "new", "null", "return", "super", "switch", "this"],
  ...["throw", "true", "try", "typeof", "var", "void", "while", "with", "yield", "let", "static", "implements", "interface", "package"],
  ...["private", "protected", "public", "await", "arguments", "eval", "undefined"],
  ...["nock", "runHandler", "describe", "it", "expect", "beforeAll", "afterAll", "afterEach", "BASE_URL_SETTING", "DEFAULT_BASE_URL", "UPSTREAM", "RUN_OPTIONS"],
]);

/** Gives each node type a distinct file name (kebab-case) and export name (camelCase), both made from its id. */
function assignNames(nodeTypes: HttpNodeType[]): void {
  const files = new Set<string>();
  const exports = new Set<string>();
  for (const nodeType of nodeTypes) {
    const idPart = nodeType.nodeTypeId.slice(nodeType.nodeTypeId.indexOf(".") + 1);
    const kebab =
      idPart
        .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
        .replace(/([A-Z]+)([A-Z][a-z])/g, "$1-$2")
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, "-")
        .replace(/^-+|-+$/g, "") || "operation";
    nodeType.fileName = distinctName(kebab, files, (base, n) => `${base}-${n}`);
    let camel = kebab.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    if (/^[0-9]/.test(camel)) camel = `op${camel}`;
    if (TAKEN_NAMES.has(camel)) camel = `${camel}Operation`;
    nodeType.exportName = distinctName(camel, exports, (base, n) => `${base}${n}`);
  }
}

function distinctName(base: string, taken: Set<string>, numbered: (base: string, n: number) => string): string {
  let name = base;
  for (let n = 2; taken.has(name); n++) name = numbered(base, n);
  taken.add(name);
  return name;
}

/** Options of openApiToHandlers. */
export interface OpenApiToHandlersOptions extends MapOpenApiOptions {
  packageName: string;
  /** The setting that overrides the base URL (see package-name.ts). */
  baseUrlSetting: string;
  /** One sentence on where the package came from, for its README. */
  origin: string;
}

/** The files of a handler package made from `document`: src/, test/handler.test.ts and README.md. */
export function openApiToHandlers(document: OpenApiDocument, options: OpenApiToHandlersOptions): { files: GeneratedFile[]; mapping: OpenApiMapping } {
  const mapping = mapOpenApi(document, options);
  const shared = renderTemplateFolder("http", {
    packageName: options.packageName,
    apiTitle: mapping.title,
    apiVersion: mapping.apiVersion,
    origin: options.origin,
    defaultBaseUrl: mapping.defaultBaseUrl,
    defaultBaseUrlText: mapping.defaultBaseUrl === "" ? "none (the document names no absolute server URL), so it must be set" : `\`${mapping.defaultBaseUrl}\``,
    baseUrlSetting: options.baseUrlSetting,
    operationsTable: operationsTable(mapping),
    skippedOperations: skippedText(mapping),
    tryIt: tryItCommand(mapping),
  });
  const files = [
    ...shared,
    ...mapping.nodeTypes.map((nodeType) => ({ path: `src/operations/${nodeType.fileName}.ts`, content: operationSource(nodeType, mapping) })),
    { path: "src/index.ts", content: indexSource(mapping, options.packageName) },
    { path: "test/handler.test.ts", content: testSource(mapping) },
  ];
  return { files, mapping };
}

/** The node type and inputs a user would try first: the first read-only operation, else the first one. */
export function firstNodeTypeToTry(mapping: OpenApiMapping): HttpNodeType {
  return mapping.nodeTypes.find((n) => n.sideEffectClass === "read") ?? mapping.nodeTypes[0];
}

function tryItCommand(mapping: OpenApiMapping): string {
  const nodeType = firstNodeTypeToTry(mapping);
  return `npx fabric run ${nodeType.nodeTypeId} --input '${JSON.stringify(nodeType.example.inputs).replace(/'/g, "'\\''")}'`;
}

function operationsTable(mapping: OpenApiMapping): string {
  const rows = mapping.nodeTypes.map((n) => {
    const inputs = Object.keys((n.inputSchema.properties ?? {}) as object);
    const outputs = n.outputs === "none" ? "`{}`" : n.outputs === "result" ? "`{ result }`" : "the JSON answer";
    return `| \`${n.nodeTypeId}@1.0.0\` | \`${n.method} ${n.path}\` | ${inputs.length === 0 ? "none" : inputs.map((i) => `\`${i}\``).join(", ")} | ${outputs} | ${n.sideEffectClass} |`;
  });
  return ["| Node type | Operation | Inputs | Outputs | Side effects |", "|---|---|---|---|---|", ...rows].join("\n");
}

function skippedText(mapping: OpenApiMapping): string {
  if (mapping.skipped.length === 0) return "";
  return `\nLeft out, because a node type cannot call them as they are described:\n\n${mapping.skipped.map((s) => `- \`${s.method} ${s.path}\`: ${s.reason}`).join("\n")}\n`;
}

function operationSource(n: HttpNodeType, mapping: OpenApiMapping): string {
  const operation = {
    operationId: n.operationId,
    method: n.method,
    path: n.path,
    parameters: n.parameters,
    jsonBody: n.jsonBody,
    outputs: n.outputs,
  };
  const nodeType = {
    node_type_id: n.nodeTypeId,
    version: "1.0.0",
    description: n.description,
    input_schema: n.inputSchema,
    output_schema: n.outputSchema,
    constraints: { gates: { side_effect_class: n.sideEffectClass } },
    extensions: { "openapi.operation": { api: mapping.title, api_version: mapping.apiVersion, method: n.method, path: n.path, operation_id: n.operationId } },
  };
  return `/**
 * \`${n.nodeTypeId}\`: ${n.method} ${n.path} of ${mapping.title} ${mapping.apiVersion}, as an atomic node type.
 * Generated by create-fabric-handler; edit freely.
 */
import { defineAtomic } from "@nodefabric/core/sdk";
import { callOperation, type HttpOperation } from "../http-operation.js";

const operation: HttpOperation = ${tsLiteral(operation)};

/** ${commentText(n.description)} */
export const ${n.exportName} = defineAtomic({
  nodeType: ${tsLiteral(nodeType, "  ")},
  handler: (inputs, ctx) => callOperation(operation, inputs, ctx),
});
`;
}

function commentText(text: string): string {
  return text.replace(/\*\//g, "*\\/");
}

function indexSource(mapping: OpenApiMapping, packageName: string): string {
  const names = mapping.nodeTypes.map((n) => n.exportName);
  return `/**
 * ${commentText(packageName)}: NodeFabric node types for ${commentText(mapping.title)} ${commentText(mapping.apiVersion)}, one per operation.
 */
${mapping.nodeTypes.map((n) => `import { ${n.exportName} } from "./operations/${n.fileName}.js";`).join("\n")}

export { BASE_URL_SETTING, DEFAULT_BASE_URL } from "./http-operation.js";
export { ${names.join(", ")} };

// The executor loads every definition this module exports.
export default [${names.join(", ")}];
`;
}

/** Where a test's mocked upstream lives: the default base URL when there is one, else one the tests configure. */
function testUpstream(mapping: OpenApiMapping): { base: string; configured: boolean } {
  return mapping.defaultBaseUrl !== "" ? { base: mapping.defaultBaseUrl, configured: false } : { base: "https://upstream.test", configured: true };
}

/** The request a node type sends for `inputs`, as nock matches it: path under the origin, query, headers and body. */
function expectedRequest(n: HttpNodeType, inputs: Record<string, unknown>, base: string) {
  const url = new URL(base.replace(/\/+$/, "") + "/");
  let path = n.path;
  const query = new URLSearchParams();
  const headers: Record<string, string> = {};
  for (const p of n.parameters) {
    const value = inputs[p.input];
    if (value === undefined || value === null) continue;
    if (p.in === "path") path = path.split(`{${p.name}}`).join(encodeURIComponent(simpleValue(value)));
    else if (p.in === "header") headers[p.name] = simpleValue(value);
    else if (Array.isArray(value)) value.forEach((item) => query.append(p.name, simpleValue(item)));
    else if (typeof value === "object") Object.entries(value as object).forEach(([k, v]) => query.append(k, simpleValue(v)));
    else query.append(p.name, String(value));
  }
  const queryObject: Record<string, string | string[]> = {};
  for (const key of new Set(query.keys())) {
    const all = query.getAll(key);
    queryObject[key] = all.length === 1 ? all[0] : all;
  }
  return {
    origin: url.origin,
    path: url.pathname.replace(/\/+$/, "") + path,
    query: queryObject,
    headers,
    body: n.jsonBody ? inputs.body : undefined,
  };
}

/** Mirrors http-operation.ts: arrays joined by commas, objects as JSON. */
function simpleValue(value: unknown): string {
  if (Array.isArray(value)) return value.map((item) => (typeof item === "object" && item !== null ? JSON.stringify(item) : String(item))).join(",");
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return String(value);
}

function testSource(mapping: OpenApiMapping): string {
  const upstream = testUpstream(mapping);
  const runOptions = upstream.configured ? ", RUN_OPTIONS" : "";
  const cases = mapping.nodeTypes.map((n) => {
    const request = expectedRequest(n, n.example.inputs, upstream.base);
    const chain = [`nock(${tsString(request.origin)})`];
    for (const [name, value] of Object.entries(request.headers)) chain.push(`.matchHeader(${tsString(name)}, ${tsString(value)})`);
    chain.push(`.intercept(${tsString(request.path)}, ${tsString(n.method)}${request.body === undefined ? "" : `, ${tsLiteral(request.body, "      ")}`})`);
    if (Object.keys(request.query).length > 0) chain.push(`.query(${tsLiteral(request.query, "      ")})`);
    chain.push(`.reply(${n.example.status}${n.outputs === "none" ? "" : `, ${tsLiteral(n.example.responseBody, "      ")}`})`);
    return `describe(${tsString(`${n.nodeTypeId} (${n.method} ${n.path})`)}, () => {
  it("sends the request the operation describes, and answers with the upstream's 2xx answer", async () => {
    const scope = ${chain.join("\n      ")};

    const result = await runHandler(${n.exportName}, ${tsLiteral(n.example.inputs, "    ")}${runOptions});

    expect(result.error).toBeUndefined();
    expect(result.state).toBe("completed");
    expect(result.outputs).toEqual(${tsLiteral(n.example.outputs, "    ")});
    scope.done();
  });
});`;
  });

  const first = firstNodeTypeToTry(mapping);
  const firstRequest = expectedRequest(first, first.example.inputs, upstream.base);
  const anyRequest = (origin: string, path: string) => `nock(${tsString(origin)}).intercept(${tsString(path)}, ${tsString(first.method)}).query(true)`;
  const configuredBase = "http://api.internal:8080/base";
  const configuredRequest = expectedRequest(first, first.example.inputs, configuredBase);
  const imports = mapping.nodeTypes.map((n) => n.exportName).sort();

  return `import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runHandler } from "@nodefabric/core/testing";
import { BASE_URL_SETTING, ${imports.join(", ")} } from "../src/index.js";

// The upstream is someone else's: nock answers for it, and any other outbound request fails the test.
beforeAll(() => {
  nock.disableNetConnect();
  // The tests below choose the base URL themselves.
  delete process.env[BASE_URL_SETTING];
});
afterEach(() => nock.cleanAll());
afterAll(() => nock.enableNetConnect());
${
  upstream.configured
    ? `
// The document names no absolute server URL, so every test configures one, as the executor would.
const RUN_OPTIONS = { secrets: { [BASE_URL_SETTING]: ${tsString(upstream.base)} } };
`
    : ""
}
${cases.join("\n\n")}

describe("upstream errors and configuration", () => {
  it("answers a 5xx or a 429 with a retryable upstream_error, and other refusals with a final one", async () => {
    for (const [status, retryable] of [[503, true], [429, true], [404, false]] as const) {
      ${anyRequest(firstRequest.origin, firstRequest.path)}.reply(status, { message: "refused" });

      const result = await runHandler(${first.exportName}, ${tsLiteral(first.example.inputs, "      ")}${runOptions});

      expect(result.state).toBe("failed");
      expect(result.error).toMatchObject({ code: "upstream_error", message: \`${first.operationId.replace(/[`\\$]/g, "\\$&")} answered \${status}\`, retryable, details: { status } });
    }
  });

  it("calls the base URL the executor is configured with", async () => {
    const scope = ${anyRequest(configuredRequest.origin, configuredRequest.path)}.reply(${first.example.status}${first.outputs === "none" ? "" : `, ${tsLiteral(first.example.responseBody, "    ")}`});

    const result = await runHandler(${first.exportName}, ${tsLiteral(first.example.inputs, "    ")}, { secrets: { [BASE_URL_SETTING]: ${tsString(configuredBase)} } });

    expect(result.state).toBe("completed");
    scope.done();
  });
${
  upstream.configured
    ? `
  it("refuses to run without a base URL", async () => {
    const result = await runHandler(${first.exportName}, ${tsLiteral(first.example.inputs, "    ")});

    expect(result.error).toMatchObject({ code: "configuration_error", retryable: false });
  });
`
    : ""
}});
`;
}
