/**
 * A handler package made from an OpenAPI document: one atomic node type per operation, kept as data.
 *
 * - `node-types/<operation>.json` holds each NodeType, with the operation it calls in `extensions["nodefabric.openapi"]`;
 *   `node-types/index.json` lists them. An executor reads the index at start and a NodeType only when it is first
 *   needed, so a package of a 1,000-operation API starts in a moment and holds little.
 * - `src/index.ts` is one `defineAtomicSet` whose shared handler is `callHttpOperation` from the SDK: it builds the
 *   request the descriptor describes (parameter styles, body encodings, security), sends it with `ctx.fetch` and
 *   turns the answer into outputs.
 * - `test/exchanges.json` holds, per operation, valid sample inputs, the request they must produce, a valid mocked
 *   answer and the outputs it gives; `test/handler.test.ts` replays each one with nock. Samples are generated from the
 *   schemas and checked with the executor's own validator; the document's examples are used only when valid.
 */
import type { NodeType } from "@nodefabric/schemas";
import type { HttpOperationDescriptor, OperationSecurityScheme } from "@nodefabric/sdk";
import { mapOpenApi, sampleFor, type MappedOperation, type OpenApiDocument, type OpenApiMapping, type SchemaObject } from "@nodefabric/importer-openapi";
import { ScaffoldError } from "./errors.js";
import { renderTemplateFolder, type GeneratedFile } from "./template-files.js";

/** Options of openApiPackage. */
export interface OpenApiPackageOptions {
  packageName: string;
  /** The part of every node_type_id before the dot. */
  nodeTypePrefix: string;
  /** Upper-case prefix of setting and secret names (`PETSTORE` → `PETSTORE_BASE_URL`). */
  settingsPrefix: string;
  /** One sentence on where the package came from, for its README. */
  origin: string;
  /** Where the document was read from (resolves relative server URLs). */
  location?: string;
  include?: string[];
  exclude?: string[];
  onProgress?: (message: string) => void;
}

/** What a test sends and expects for one operation, or why the operation has no test. */
export type Exchange = TestedExchange | { node_type_id: string; operation: string; untested: string };

/** One replayed call: inputs and secrets in, the request nock must see, its answer, and the outputs. */
export interface TestedExchange {
  node_type_id: string;
  /** `METHOD /path`, for the test's name. */
  operation: string;
  inputs: Record<string, unknown>;
  /** The base URL the operation calls by default (its own server, when it names one). */
  base: string;
  /** Secrets the run is given: the first security alternative the operation accepts, with made-up values. */
  secrets: Record<string, string>;
  request: {
    method: string;
    /** The exact path (after the base URL's path), or a regular expression source when a value's encoding is not simple. */
    path: string | { pattern: string };
    /** The exact query, or true when any query is accepted (a style the test does not spell out). */
    query: Record<string, string | string[]> | true;
    headers: Record<string, string>;
    /** Header values that must match a regular expression (cookies, multipart content types). */
    header_patterns: Record<string, string>;
    /** The JSON body (`json`) or form fields (`form`) the request must carry. */
    body?: { json: unknown } | { form: Record<string, string | string[]> };
  };
  reply: { status: number; body?: string; headers?: Record<string, string> };
  outputs: Record<string, unknown>;
}

/** The generated package's own files (package.json and the shared files are added by the caller). */
export interface OpenApiPackage {
  files: GeneratedFile[];
  mapping: OpenApiMapping;
  exchanges: Exchange[];
  /** The operation to try first, with sample inputs. */
  tryIt: { nodeTypeId: string; inputs: Record<string, unknown> };
  /** The setting that overrides the base URL. */
  baseUrlSetting: string;
}

/** Where tests send requests when the document names no absolute server URL; the tests configure it. */
const TEST_BASE_URL = "https://upstream.test";

/** Makes the package's files from `document`; throws a ScaffoldError when no operation can be made into a node type. */
export function openApiPackage(document: OpenApiDocument, options: OpenApiPackageOptions): OpenApiPackage {
  let mapping: OpenApiMapping;
  try {
    mapping = mapOpenApi(document, {
      prefix: options.nodeTypePrefix,
      settingsPrefix: options.settingsPrefix,
      include: options.include,
      exclude: options.exclude,
      location: options.location,
      onProgress: options.onProgress,
    });
  } catch (err) {
    throw new ScaffoldError((err as Error).message, { cause: err });
  }
  if (mapping.operations.length === 0) {
    const why = mapping.leftOut.length > 0 ? `: ${mapping.leftOut.slice(0, 10).map((l) => `${l.method} ${l.path} (${l.reason})`).join("; ")}` : "";
    throw new ScaffoldError(`the OpenAPI document has no operation a node type can be made from${why}`);
  }
  const baseUrlSetting = mapping.operations[0].descriptor.settings.base_url;
  const testBase = mapping.defaultBaseUrl !== "" ? mapping.defaultBaseUrl : TEST_BASE_URL;
  const exchanges: Exchange[] = [];
  mapping.operations.forEach((operation, i) => {
    exchanges.push(exchangeFor(operation, mapping.defaultBaseUrl === "" ? TEST_BASE_URL : (serverUrlOf(operation.descriptor) ?? testBase)));
    if ((i + 1) % 200 === 0) options.onProgress?.(`made test samples for ${i + 1} of ${mapping.operations.length} operations`);
  });
  const first = firstToTry(mapping, exchanges);
  const tryIt = { nodeTypeId: first.nodeType.node_type_id, inputs: testedInputs(exchanges, first.nodeType.node_type_id) };

  const files: GeneratedFile[] = [
    ...renderTemplateFolder("http", {
      packageName: options.packageName,
      apiTitle: mapping.title,
      apiVersion: mapping.apiVersion,
      origin: options.origin,
      defaultBaseUrlText: mapping.defaultBaseUrl === "" ? "none (the document names no absolute server URL), so it must be set" : `\`${mapping.defaultBaseUrl}\``,
      baseUrlSetting,
      operationCount: String(mapping.operations.length),
      operationsTable: operationsTable(mapping),
      leftOut: leftOutText(mapping),
      settingsTable: settingsTable(mapping),
      notes: notesText(mapping, exchanges),
      tryIt: `npx fabric run ${tryIt.nodeTypeId} --input '${JSON.stringify(tryIt.inputs).replace(/'/g, "'\\''")}'`,
    }),
    { path: "node-types/index.json", content: json({ node_types: mapping.operations.map((o) => ({ node_type_id: o.nodeType.node_type_id, version: o.nodeType.version, file: `${o.fileName}.json` })) }) },
    ...mapping.operations.map((o) => ({ path: `node-types/${o.fileName}.json`, content: json(o.nodeType) })),
    { path: "src/index.ts", content: indexSource(mapping, options.packageName, baseUrlSetting) },
    { path: "test/exchanges.json", content: json(exchanges) },
    { path: "test/handler.test.ts", content: testSource(mapping, testBase, first.nodeType.node_type_id) },
  ];
  return { files, mapping, exchanges, tryIt, baseUrlSetting };
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

function testedInputs(exchanges: Exchange[], nodeTypeId: string): Record<string, unknown> {
  const e = exchanges.find((x) => x.node_type_id === nodeTypeId);
  return e && "inputs" in e ? e.inputs : {};
}

/** The operation a user would try first: a tested read that needs no credentials, else any tested one, else the first. */
function firstToTry(mapping: OpenApiMapping, exchanges: Exchange[]): MappedOperation {
  const tested = new Set(exchanges.filter((e) => "inputs" in e).map((e) => e.node_type_id));
  const open = (o: MappedOperation) => o.descriptor.security.length === 0 || o.descriptor.security.some((alt) => alt.length === 0);
  const side = (o: MappedOperation) => (o.nodeType.constraints as { gates?: { side_effect_class?: string } } | undefined)?.gates?.side_effect_class;
  return (
    mapping.operations.find((o) => tested.has(o.nodeType.node_type_id) && side(o) === "read" && open(o)) ??
    mapping.operations.find((o) => tested.has(o.nodeType.node_type_id) && side(o) === "read") ??
    mapping.operations.find((o) => tested.has(o.nodeType.node_type_id)) ??
    mapping.operations[0]
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Samples and the request they must produce

/** A stable seed per node type, so regenerating a package gives the same samples. */
function seedOf(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

/**
 * The sample inputs the generated test of `operation` sends: a value of the node type's input_schema, made by
 * `sampleFor` with the node type's own seed. What the runtime refuses beyond JSON Schema (an empty path value, a line
 * break in a header) is written into the input_schema by the mapper, so a sample the schema accepts is one the
 * runtime sends.
 */
export function sampleInputsOf(operation: MappedOperation): { inputs: Record<string, unknown> } | { error: string } {
  const sample = sampleFor(operation.nodeType.input_schema as SchemaObject, { seed: seedOf(operation.nodeType.node_type_id) });
  if ("error" in sample) return { error: `no valid sample inputs could be made: ${sample.error}` };
  const inputs = sample.value;
  if (typeof inputs !== "object" || inputs === null || Array.isArray(inputs)) return { error: "the sample inputs are not an object" };
  return { inputs: inputs as Record<string, unknown> };
}

function exchangeFor(operation: MappedOperation, testBase: string): Exchange {
  const { nodeType, descriptor: op } = operation;
  const id = nodeType.node_type_id;
  const title = `${op.method} ${op.path}`;
  const untested = (why: string): Exchange => ({ node_type_id: id, operation: title, untested: why });
  const seed = seedOf(id);
  const inputSample = sampleInputsOf(operation);
  if ("error" in inputSample) return untested(inputSample.error);
  const inputs = inputSample.inputs;

  let responseBody: unknown;
  let outputs: Record<string, unknown> = {};
  if (op.response.outputs !== "none") {
    const answerSchema = answerSchemaOf(nodeType, op);
    const answer = sampleFor(answerSchema, { seed: seed + 1 });
    if ("error" in answer) return untested(`no valid sample answer could be made: ${answer.error}`);
    responseBody = answer.value;
    outputs = op.response.outputs === "object" ? (answer.value as Record<string, unknown>) : { result: answer.value };
  }
  const secrets = secretsFor(op);
  if (secrets === undefined) return untested("its security schemes need credentials the test cannot make up (mutual TLS)");
  const request = expectedRequest(op, inputs, secrets);
  if (typeof request === "string") return untested(request);
  const isText = op.response.outputs === "result" && op.response.media_type !== undefined && /^text\//i.test(op.response.media_type);
  const reply: TestedExchange["reply"] =
    op.response.outputs === "none"
      ? { status: op.response.status }
      : {
          status: op.response.status,
          body: isText ? String(responseBody) : JSON.stringify(responseBody),
          headers: { "content-type": isText ? (op.response.media_type as string) : jsonMediaTypeOf(op.response.media_type) },
        };
  return { node_type_id: id, operation: title, inputs, base: testBase, secrets, request, reply, outputs };
}

function jsonMediaTypeOf(mediaType: string | undefined): string {
  return mediaType && /json/i.test(mediaType) && !mediaType.includes("*") ? mediaType : "application/json";
}

/** The schema of the upstream's answer: the output schema, or its `result` property when outputs wrap the answer. */
function answerSchemaOf(nodeType: NodeType, op: HttpOperationDescriptor): SchemaObject {
  const output = nodeType.output_schema as SchemaObject;
  if (op.response.outputs !== "result") return output;
  const result = (output.properties as Record<string, SchemaObject> | undefined)?.result ?? {};
  // Keep the shared definitions the wrapped schema points into.
  return output.$defs === undefined ? result : { ...result, $defs: output.$defs };
}

/** The operation's own server URL with its variables at their defaults, when it is absolute. */
function serverUrlOf(op: HttpOperationDescriptor): string | undefined {
  const url = op.server.url.replace(/\{([^}]+)\}/g, (whole, name: string) => op.server.variables?.[name]?.default ?? whole);
  return /^https?:\/\/[^/{}]+/i.test(url) && !url.includes("{") ? url.replace(/\/+$/, "") : undefined;
}

/** Made-up values for the secrets of the first security alternative a test can satisfy; undefined when none can be. */
function secretsFor(op: HttpOperationDescriptor): Record<string, string> | undefined {
  if (op.security.length === 0 || op.security.some((alt) => alt.length === 0)) return {};
  for (const alternative of op.security) {
    const secrets: Record<string, string> = {};
    let usable = true;
    for (const name of alternative) {
      const scheme = op.security_schemes[name];
      if (!scheme) {
        usable = false;
        break;
      }
      for (const secret of secretNamesFor(scheme)) secrets[secret] = `test-${secret.toLowerCase().replace(/_/g, "-")}`;
    }
    if (usable) return secrets;
  }
  return undefined;
}

/** The secrets a test sets for a scheme: OAuth 2 is given an access token directly, so no token endpoint is needed. */
function secretNamesFor(scheme: OperationSecurityScheme): string[] {
  if (scheme.type === "apiKey") return [scheme.secret];
  if (scheme.type === "oauth2") return [scheme.access_token_secret];
  if ("username_secret" in scheme) return [scheme.username_secret, scheme.password_secret];
  return [scheme.secret];
}

/** A path segment with only RFC 3986 unreserved characters left as they are (`A-Z a-z 0-9 - . _ ~`). */
function encodeSegment(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function isPrimitive(value: unknown): value is string | number | boolean {
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean";
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/**
 * The request the runtime must send for `inputs`, written out independently of the runtime for the common styles
 * (simple path and header values, exploded form queries, JSON and flat form bodies); other styles are matched loosely
 * here and exactly by the SDK's own tests. A string is a reason the operation cannot be replayed.
 */
function expectedRequest(op: HttpOperationDescriptor, inputs: Record<string, unknown>, secrets: Record<string, string>): TestedExchange["request"] | string {
  let exactPath = true;
  // A query written into the document's path is sent as it is, before the parameters.
  const [pathPart, fixedQuery] = op.path.split("?", 2) as [string, string | undefined];
  let path = pathPart;
  let pattern = escapeRegExp(pathPart);
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(fixedQuery ?? "")) addQuery(query, name, value);
  let exactQuery = true;
  const headers: Record<string, string> = {};
  const headerPatterns: Record<string, string> = {};
  const cookies: string[] = [];
  for (const p of op.parameters) {
    const value = inputs[p.input];
    if (p.in === "path") {
      const placeholder = `{${p.name}}`;
      pattern = pattern.split(escapeRegExp(placeholder)).join("[^/?#]+");
      if (value === undefined) return `the sample inputs lack the path parameter ${p.name}`;
      if (isPrimitive(value) && p.style === "simple" && p.content_type === undefined) path = path.split(placeholder).join(encodeSegment(String(value)));
      else exactPath = false;
      continue;
    }
    if (value === undefined || value === null) continue;
    if (p.in === "query") {
      const simpleForm = p.style === "form" && p.explode && p.content_type === undefined && !p.allow_reserved;
      if (simpleForm && isPrimitive(value)) addQuery(query, p.name, String(value));
      else if (simpleForm && Array.isArray(value) && value.every(isPrimitive)) value.forEach((item) => addQuery(query, p.name, String(item)));
      else exactQuery = false;
    } else if (p.in === "header") {
      if (isPrimitive(value) && p.content_type === undefined) headers[p.name.toLowerCase()] = String(value);
    } else if (p.in === "cookie") {
      cookies.push(p.name);
    }
  }
  const alternative = op.security.find((alt) => alt.every((name) => op.security_schemes[name] && secretNamesFor(op.security_schemes[name]).every((s) => s in secrets))) ?? [];
  for (const name of alternative) {
    const scheme = op.security_schemes[name];
    if (scheme.type === "apiKey") {
      if (scheme.in === "header") headers[scheme.name.toLowerCase()] = secrets[scheme.secret];
      else if (scheme.in === "query") addQuery(query, scheme.name, secrets[scheme.secret]);
      else cookies.push(scheme.name);
    } else if (scheme.type === "oauth2") {
      headers.authorization = `Bearer ${secrets[scheme.access_token_secret]}`;
    } else if ("username_secret" in scheme) {
      headers.authorization = `Basic ${Buffer.from(`${secrets[scheme.username_secret]}:${secrets[scheme.password_secret]}`).toString("base64")}`;
    } else {
      headers.authorization = `${scheme.scheme.toLowerCase() === "bearer" ? "Bearer" : scheme.scheme} ${scheme.secret in secrets ? secrets[scheme.secret] : ""}`;
    }
  }
  if (cookies.length > 0) headerPatterns.cookie = cookies.map((name) => `(^|;\\s*)${escapeRegExp(encodeURIComponent(name))}=`).join("|");
  let body: TestedExchange["request"]["body"];
  const bodyValue = op.body ? inputs[op.body.input] : undefined;
  if (op.body && bodyValue !== undefined) {
    if (op.body.encoding === "json") {
      body = { json: bodyValue };
      headerPatterns["content-type"] = `^${escapeRegExp(op.body.media_type)}`;
    } else if (op.body.encoding === "form" && isFlatObject(bodyValue) && !op.body.properties) {
      const form: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(bodyValue)) {
        if (Array.isArray(v)) form[k] = v.map(String);
        else form[k] = String(v);
      }
      body = { form };
      headerPatterns["content-type"] = "^application/x-www-form-urlencoded";
    } else if (op.body.encoding === "multipart") {
      headerPatterns["content-type"] = "^multipart/form-data; ?boundary=";
    } else {
      headerPatterns["content-type"] = `^${escapeRegExp(op.body.media_type.split(";")[0])}`;
    }
  }
  return {
    method: op.method,
    path: exactPath ? path : { pattern: `${pattern}$` },
    query: exactQuery ? query : true,
    headers,
    header_patterns: headerPatterns,
    ...(body === undefined ? {} : { body }),
  };
}

function addQuery(query: Record<string, string | string[]>, name: string, value: string): void {
  const prior = query[name];
  if (prior === undefined) query[name] = value;
  else query[name] = Array.isArray(prior) ? [...prior, value] : [prior, value];
}

function isFlatObject(value: unknown): value is Record<string, string | number | boolean | Array<string | number | boolean>> {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => isPrimitive(v) || (Array.isArray(v) && v.every(isPrimitive)))
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Sources and README parts

function commentText(text: string): string {
  return text.replace(/\*\//g, "*\\/");
}

function indexSource(mapping: OpenApiMapping, packageName: string, baseUrlSetting: string): string {
  return `/**
 * ${commentText(packageName)}: NodeFabric node types for ${commentText(mapping.title)} ${commentText(mapping.apiVersion)}, one per operation.
 * Each NodeType is a JSON file under node-types/, read when the executor first needs it; all of them share one
 * handler, which calls the operation described in the NodeType's extensions["nodefabric.openapi"].
 * Generated by create-fabric-handler; edit freely.
 */
import { callHttpOperation, defineAtomicSet } from "@nodefabric/sdk";

/** The setting (executor secret or environment variable) that overrides the API's base URL. */
export const BASE_URL_SETTING = ${JSON.stringify(baseUrlSetting)};

/** The API's base URL from its OpenAPI document ("" when it names none). */
export const DEFAULT_BASE_URL = ${JSON.stringify(mapping.defaultBaseUrl)};

/** Every operation of the API as a node type; \`operations.get("<node_type_id>")\` gives one definition. */
export const operations = defineAtomicSet({
  directory: new URL("../node-types/", import.meta.url),
  handler: (inputs, ctx) => callHttpOperation(inputs, ctx),
});

// The executor loads every definition this module exports.
export default operations;
`;
}

function testSource(mapping: OpenApiMapping, testBase: string, firstId: string): string {
  const configured = mapping.defaultBaseUrl === "";
  return `/**
 * Replays, for every operation, the exchange in exchanges.json: valid sample inputs, the request they must produce,
 * a valid answer from the API (mocked with nock), and the outputs it must give. Generated by create-fabric-handler.
 */
import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import nock from "nock";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runHandler } from "@nodefabric/sdk/testing";
import { BASE_URL_SETTING, operations } from "../src/index.js";

interface Exchange {
  node_type_id: string;
  operation: string;
  untested?: string;
  inputs: Record<string, unknown>;
  base: string;
  secrets: Record<string, string>;
  request: {
    method: string;
    path: string | { pattern: string };
    query: Record<string, string | string[]> | true;
    headers: Record<string, string>;
    header_patterns: Record<string, string>;
    body?: { json: unknown } | { form: Record<string, string | string[]> };
  };
  reply: { status: number; body?: string; headers?: Record<string, string> };
  outputs: Record<string, unknown>;
}

const exchanges = JSON.parse(readFileSync(new URL("./exchanges.json", import.meta.url), "utf8")) as Exchange[];

/** Where the mocked API lives: ${configured ? "the document names no absolute server URL, so every run is given one" : "the document's own server URL"}. */
const BASE_URL = ${JSON.stringify(testBase)};
const CONFIGURED: Record<string, string> = ${configured ? "{ [BASE_URL_SETTING]: BASE_URL }" : "{}"};

// The API is someone else's: nock answers for it, and any other outbound request fails the test.
beforeAll(() => {
  nock.disableNetConnect();
  // The tests choose the base URL themselves.
  delete process.env[BASE_URL_SETTING];
});
afterEach(() => nock.cleanAll());
afterAll(() => nock.enableNetConnect());

/** Whether a request body nock saw is the one expected. */
function bodyMatches(expected: NonNullable<Exchange["request"]["body"]>, actual: unknown): boolean {
  if ("json" in expected) {
    // nock hands a JSON body over parsed, and a bare JSON string as that string; anything else is parsed here.
    if (isDeepStrictEqual(actual, expected.json)) return true;
    if (typeof actual !== "string") return false;
    try {
      return isDeepStrictEqual(JSON.parse(actual), expected.json);
    } catch {
      return false;
    }
  }
  // nock hands a form body over already parsed; a string is parsed here. A field sent once is one value either way.
  const one = (form: Record<string, unknown>) => Object.fromEntries(Object.entries(form).map(([k, v]) => [k, Array.isArray(v) && v.length === 1 ? v[0] : v]));
  if (typeof actual === "object" && actual !== null) return isDeepStrictEqual(one({ ...actual }), one(expected.form));
  const form: Record<string, string | string[]> = {};
  for (const [key, value] of new URLSearchParams(typeof actual === "string" ? actual : "")) {
    const prior = form[key];
    form[key] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  return isDeepStrictEqual(one(form), one(expected.form));
}

/** Mocks the request an exchange expects, at \`base\` (the operation's own by default), answering its reply. */
function mockUpstream(e: Exchange, base = e.base): nock.Scope {
  const url = new URL(base);
  const prefix = url.pathname.replace(/\\/+$/, "");
  const pattern = typeof e.request.path === "string" ? undefined : new RegExp("^" + e.request.path.pattern);
  // A path whose values are not simple is matched by its shape, under the base URL's path.
  const path = pattern === undefined ? prefix + e.request.path : (uri: string) => uri.split("?")[0].startsWith(prefix) && pattern.test(uri.split("?")[0].slice(prefix.length));
  let scope = nock(url.origin);
  for (const [name, value] of Object.entries(e.request.headers)) scope = scope.matchHeader(name, value);
  for (const [name, pattern] of Object.entries(e.request.header_patterns)) scope = scope.matchHeader(name, new RegExp(pattern));
  const body = e.request.body;
  const interceptor = body === undefined ? scope.intercept(path, e.request.method) : scope.intercept(path, e.request.method, (actual: unknown) => bodyMatches(body, actual));
  return interceptor.query(e.request.query).reply(e.reply.status, e.reply.body, e.reply.headers);
}

function options(e: Exchange) {
  return { secrets: { ...CONFIGURED, ...e.secrets } };
}

describe("each operation", () => {
  for (const e of exchanges) {
    if (e.untested) {
      it.todo(\`\${e.node_type_id} (\${e.operation}): \${e.untested}\`);
      continue;
    }
    it(\`\${e.node_type_id} (\${e.operation}) sends the request the document describes and answers with the API's answer\`, async () => {
      const scope = mockUpstream(e);

      const result = await runHandler(operations.get(e.node_type_id), e.inputs, options(e));

      expect(result.error).toBeUndefined();
      expect(result.state).toBe("completed");
      expect(result.outputs).toEqual(e.outputs);
      scope.done();
    });
  }
});

describe("upstream errors and configuration", () => {
  const first = exchanges.find((e) => e.node_type_id === ${JSON.stringify(firstId)} && !e.untested) ?? exchanges.find((e) => !e.untested);

  it("answers a 5xx or a 429 with a retryable upstream_error, and other refusals with a final one", async () => {
    if (!first) return;
    for (const [status, retryable] of [[503, true], [429, true], [404, false]] as const) {
      mockUpstream({ ...first, reply: { status, body: JSON.stringify({ message: "refused" }), headers: { "content-type": "application/json" } } });

      const result = await runHandler(operations.get(first.node_type_id), first.inputs, options(first));

      expect(result.state).toBe("failed");
      expect(result.error).toMatchObject({ code: "upstream_error", retryable, details: { status } });
    }
  });

  it("calls the base URL the executor is configured with", async () => {
    if (!first) return;
    const base = "http://api.internal.example:8080/base";
    const scope = mockUpstream(first, base);

    const result = await runHandler(operations.get(first.node_type_id), first.inputs, { secrets: { ...first.secrets, [BASE_URL_SETTING]: base } });

    expect(result.error).toBeUndefined();
    expect(result.state).toBe("completed");
    scope.done();
  });
${
  configured
    ? `
  it("refuses to run without a base URL", async () => {
    if (!first) return;
    const result = await runHandler(operations.get(first.node_type_id), first.inputs, { secrets: first.secrets });

    expect(result.error).toMatchObject({ code: "invalid_configuration", retryable: false });
  });
`
    : ""
}});
`;
}

function operationsTable(mapping: OpenApiMapping): string {
  const rows = mapping.operations.map((o) => {
    const op = o.descriptor;
    const inputs = Object.keys(((o.nodeType.input_schema as SchemaObject).properties ?? {}) as object);
    const outputs = op.response.outputs === "none" ? "`{}`" : op.response.outputs === "result" ? "`{ result }`" : "the JSON answer";
    const side = (o.nodeType.constraints as { gates?: { side_effect_class?: string } } | undefined)?.gates?.side_effect_class ?? "";
    const shown = inputs.length === 0 ? "none" : inputs.length > 6 ? `${inputs.slice(0, 6).map((i) => `\`${i}\``).join(", ")}, … (${inputs.length})` : inputs.map((i) => `\`${i}\``).join(", ");
    return `| \`${o.nodeType.node_type_id}@${o.nodeType.version}\` | \`${op.method} ${op.path.replace(/\|/g, "\\|")}\` | ${shown} | ${outputs} | ${side} |`;
  });
  return ["| Node type | Operation | Inputs | Outputs | Side effects |", "|---|---|---|---|---|", ...rows].join("\n");
}

function leftOutText(mapping: OpenApiMapping): string {
  if (mapping.leftOut.length === 0) return "Every operation of the document is a node type.\n";
  return `Left out (${mapping.leftOut.length}):\n\n${mapping.leftOut
    .map((l) => `- \`${l.method} ${l.path}\`${l.operationId ? ` (${l.operationId})` : ""}: ${l.reason}`)
    .join("\n")}\n`;
}

function settingsTable(mapping: OpenApiMapping): string {
  const rows = [...mapping.settings, ...mapping.secrets].map(
    (s) => `| \`${s.name}\` | ${s.description.replace(/\|/g, "\\|").replace(/\n/g, " ")}${s.default !== undefined && s.default !== "" ? ` Default: \`${s.default}\`.` : ""} |`,
  );
  return ["| Setting | Meaning |", "|---|---|", ...rows].join("\n");
}

function notesText(mapping: OpenApiMapping, exchanges: Exchange[]): string {
  const untested = exchanges.filter((e): e is Extract<Exchange, { untested: string }> => "untested" in e);
  const lines = [...mapping.notes.map((n) => `- ${n}`)];
  for (const o of mapping.operations) for (const n of o.notes) lines.push(`- \`${o.nodeType.node_type_id}\`: ${n}`);
  for (const e of untested) lines.push(`- \`${e.node_type_id}\` has no generated test: ${e.untested}`);
  if (lines.length === 0) return "";
  return `## Notes\n\nWhat the generator noticed in the document, and how it dealt with it:\n\n${lines.join("\n")}\n`;
}
