/**
 * The operations of an OpenAPI 3.0/3.1 document made into node types: one atomic NodeType per operation, carrying the
 * HttpOperationDescriptor that `callHttpOperation` (a generated package) or `http.request` (no code) runs. Every
 * operation is either made into a node type or listed in `leftOut` with its reason; nothing is dropped silently.
 *
 * The document's `$ref`s are followed where they are read (path items, parameters, request bodies, responses,
 * security schemes); schemas go to the schema converter with their `$ref`s kept, so shared components are never
 * copied per operation. The rules (ids, inputs, bodies, outputs, security, servers) are on mapOpenApi.
 */
import { createHash } from "node:crypto";
import type { NodeType } from "@nodefabric/schemas";
import { validatorFor } from "@nodefabric/schemas";
import { compileHandlerSchema, createHandlerAjv } from "@nodefabric/sdk/runtime";
import { base64Rules, operationDescriptorOf, parameterRules, type SchemaRules } from "@nodefabric/sdk";
import {
  OPENAPI_EXTENSION,
  type HttpOperationDescriptor,
  type OperationBody,
  type OperationParameter,
  type OperationServer,
  type ParameterStyle,
} from "@nodefabric/sdk";
import { loaderNotesOf, OpenApiImportError, resolveServerUrl } from "./load.js";
import { sampleFor } from "./samples.js";
import { createSchemaConverter } from "./schema.js";
import { createSecurityMapper, upperSnakeWords, type RefFollower } from "./security.js";
import type { LeftOutOperation, MapOpenApiOptions, MappedOperation, OpenApiDocument, OpenApiMapping, SchemaObject, SettingDescription } from "./types.js";

/** The HTTP methods a path item can hold. */
const HTTP_METHODS = new Set(["get", "put", "post", "delete", "options", "head", "patch", "trace"]);

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

/** Header parameters OpenAPI says to ignore: the request's own headers carry them. */
const IGNORED_HEADERS = new Set(["accept", "content-type", "authorization"]);

/** What an HTTP header name may be (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** What a node type id may be (the NodeType schema's pattern). */
const NODE_TYPE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const NODE_TYPE_ID_MAX = 128;

/** The styles each parameter location allows, the first being OpenAPI's default. */
const STYLES_BY_LOCATION: Readonly<Record<OperationParameter["in"], ParameterStyle[]>> = {
  path: ["simple", "label", "matrix"],
  query: ["form", "spaceDelimited", "pipeDelimited", "deepObject"],
  header: ["simple"],
  cookie: ["form"],
};

/** Parts of schemas up to this long (serialised) are remembered by their text when checked. */
const SMALL_PART_CHARS = 4096;

/** Operations between two `onProgress` lines. */
const PROGRESS_EVERY = 100;

/** At most this many distinct notes are repeated at the document level. */
const DOCUMENT_NOTES_MAX = 60;

interface OperationSite {
  path: string;
  /** The path as sent: without a `#fragment`. */
  sentPath: string;
  method: string;
  operation: Record<string, unknown>;
  pathItem: Record<string, unknown>;
  operationId: string;
  nodeTypeId: string;
  tags: string[];
}

/**
 * The node types of the operations of `document` (as loadOpenApi gives it: internal `$ref`s kept).
 *
 * - node_type_id is `<prefix>.<operationId>`, characters an id cannot hold replaced by `-`; an operation without one
 *   is `<method>-<path segments>` (GET /pets/{petId} → `get-pets-petId`); a `#fragment` of the path is not sent but
 *   tells operations apart; a clash gets `-2`, `-3`… in document order; an id too long is cut and given a short
 *   hash. Ids are made for every operation before include/exclude, so they do not depend on the selection.
 * - inputs: one per path, query, header and cookie parameter (by name, `<in>_<name>` when two share a name or the
 *   name is `body`), plus `body`; Accept, Content-Type and Authorization headers are ignored.
 * - the request body's media type: JSON, then form, multipart, text, then anything else as base64 bytes.
 * - outputs: the first 2xx answer (then `2XX`, then `default` when there is no 2xx) with JSON, as `object` when it
 *   describes only objects, else `{ result }`; a text answer is `{ result: string }`; none gives `{}`.
 * - side_effect_class: GET, HEAD, OPTIONS, TRACE → read; POST, PUT, PATCH → write; DELETE → irreversible.
 *
 * `notes` begins with the loader's notes when `document` came from loadOpenApi. Throws an OpenApiImportError only for
 * unusable options or a document without `paths`; a mapping may hold no operation at all (all left out).
 */
export function mapOpenApi(document: OpenApiDocument, options: MapOpenApiOptions): OpenApiMapping {
  checkOptions(options);
  if (!isRecord(document) || !isRecord(document.paths)) throw new OpenApiImportError("the OpenAPI document has no paths: there is no operation to make a node type of");
  const progress = options.onProgress ?? (() => {});
  const follow = createRefFollower(document);
  const converter = createSchemaConverter(document);
  const title = typeof document.info?.title === "string" && document.info.title.trim() !== "" ? document.info.title : "API";
  const apiVersion = document.info?.version === undefined ? "" : String(document.info.version);
  const documentNotes: string[] = [...loaderNotesOf(document)];
  const leftOut: LeftOutOperation[] = [];

  const P = options.settingsPrefix;
  const baseUrlSetting = `${P}_BASE_URL`;
  const settings = new Map<string, SettingDescription>();
  const location = options.location !== undefined && /^https?:\/\//i.test(options.location) ? options.location : undefined;
  const defaultBaseUrl = defaultBaseUrlOf(document, location);
  settings.set(baseUrlSetting, {
    name: baseUrlSetting,
    description: `Base URL of ${title}, replacing the server URL the document names${defaultBaseUrl ? "" : " (it names no absolute one, so this must be set)"}.`,
    ...(defaultBaseUrl ? { default: defaultBaseUrl } : {}),
  });
  const variableSettings = variableSettingNames(document, follow, P);
  const reserved = new Set([baseUrlSetting, ...variableSettings.values()]);
  const security = createSecurityMapper(document, {
    settingsPrefix: P,
    follow,
    reservedNames: reserved,
    resolveUrl: (url) => absoluteUrlAgainst(url, defaultBaseUrl || location),
  });

  const sites = collectOperations(document, follow, options.prefix, leftOut, documentNotes);
  if (isRecord(document.webhooks) && Object.keys(document.webhooks).length > 0) {
    documentNotes.push(`its ${Object.keys(document.webhooks).length} webhooks are requests the API sends, not operations to call; they are not imported`);
  }

  const components = isRecord(document.components) ? document.components : {};
  if (!isRecord(components.securitySchemes) || Object.keys(components.securitySchemes).length === 0) {
    documentNotes.push("the document declares no security schemes: its operations are called without credentials");
  }

  const include = lowerSet(options.include);
  const exclude = lowerSet(options.exclude);
  const matched = new Set<string>();
  const checker = new SchemaChecker();
  const operations: MappedOperation[] = [];
  const noteCounts = new Map<string, number>();
  let done = 0;
  for (const site of sites) {
    const keys = [site.operationId, ...(typeof site.operation.operationId === "string" ? [site.operation.operationId] : []), ...site.tags].map((k) => k.toLowerCase());
    for (const key of keys) if (include.has(key) || exclude.has(key)) matched.add(key);
    const leave = (reason: string) =>
      leftOut.push({ method: site.method.toUpperCase(), path: site.path, ...(typeof site.operation.operationId === "string" ? { operationId: site.operation.operationId } : {}), reason });
    if (include.size > 0 && !keys.some((k) => include.has(k))) leave(`not selected (--include ${options.include!.join(",")})`);
    else if (keys.some((k) => exclude.has(k))) leave(`excluded (--exclude ${options.exclude!.join(",")})`);
    else {
      let result: MappedOperation | { reason: string };
      try {
        result = mapOperation(site, {
          document,
          title,
          apiVersion,
          follow,
          convert: (schema, direction, notes) => converter.convert(schema, direction, notes),
          security,
          baseUrlSetting,
          variableSettings,
          location,
          nodeTypeVersion: options.nodeTypeVersion ?? "1.0.0",
          checker,
        });
      } catch (err) {
        result = { reason: `it could not be mapped: ${err instanceof Error ? err.message : String(err)}` };
      }
      if ("reason" in result) leave(result.reason);
      else {
        operations.push(result);
        for (const note of result.notes) noteCounts.set(note, (noteCounts.get(note) ?? 0) + 1);
      }
    }
    done++;
    if (sites.length >= PROGRESS_EVERY && (done % PROGRESS_EVERY === 0 || done === sites.length)) progress(`mapped ${done} of ${sites.length} operations`);
  }

  for (const [flag, list] of [["--include", options.include], ["--exclude", options.exclude]] as const) {
    const unmatched = (list ?? []).filter((value) => !matched.has(value.toLowerCase()));
    if (unmatched.length > 0) documentNotes.push(`${flag} ${unmatched.join(",")} matched no tag or operationId`);
  }
  assignFileNames(operations);

  // Settings of the server variables the imported operations use, with the first default seen.
  for (const operation of operations) {
    for (const [variable, setting] of Object.entries(operation.descriptor.settings.server_variables ?? {})) {
      if (settings.has(setting)) continue;
      const spec = operation.descriptor.server.variables?.[variable];
      settings.set(setting, {
        name: setting,
        description: `The server variable {${variable}} of ${title}${spec?.enum ? `: one of ${spec.enum.join(", ")}` : ""}${spec?.description ? ` (${oneLine(spec.description)})` : ""}; unused when ${baseUrlSetting} is set.`,
        ...(spec?.default !== undefined ? { default: spec.default } : {}),
      });
    }
  }
  const usedSchemes = new Set(operations.flatMap((o) => Object.keys(o.descriptor.security_schemes)));

  const repeated = [...noteCounts.entries()].sort((a, b) => b[1] - a[1]);
  for (const [note, count] of repeated.slice(0, DOCUMENT_NOTES_MAX)) documentNotes.push(count > 1 ? `${note} (${count} operations)` : note);
  if (repeated.length > DOCUMENT_NOTES_MAX) documentNotes.push(`and ${repeated.length - DOCUMENT_NOTES_MAX} more notes on single operations`);

  return {
    title,
    apiVersion,
    defaultBaseUrl,
    operations,
    leftOut,
    secrets: security.secretsOf(usedSchemes),
    settings: [...settings.values()],
    notes: documentNotes,
  };
}

function checkOptions(options: MapOpenApiOptions): void {
  if (typeof options.prefix !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_:-]{0,63}$/.test(options.prefix)) {
    throw new OpenApiImportError(`the node type id prefix ${JSON.stringify(options.prefix)} must be 1-64 of [A-Za-z0-9_:-], starting with a letter or digit, with no dot`);
  }
  if (typeof options.settingsPrefix !== "string" || !/^[A-Z][A-Z0-9_]{0,63}$/.test(options.settingsPrefix) || options.settingsPrefix.endsWith("_")) {
    throw new OpenApiImportError(`the settings prefix ${JSON.stringify(options.settingsPrefix)} must be UPPER_SNAKE_CASE, such as PETSTORE`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// $ref

/**
 * Follows local `$ref`s (`#/components/…`, `#/paths/…`) to the value they name, through chains, with JSON Pointer
 * escapes (`~0`, `~1`) and percent-encoding. External refs should have been brought in by loadOpenApi.
 */
export function createRefFollower(document: Record<string, unknown>): RefFollower {
  return (value) => {
    let current = value;
    const seen = new Set<string>();
    while (isRecord(current) && typeof current.$ref === "string") {
      const ref = current.$ref;
      if (seen.has(ref)) return { error: `the $ref ${ref} refers to itself` };
      seen.add(ref);
      if (!ref.startsWith("#")) return { error: `the $ref ${ref} names another document, which could not be brought in` };
      const target = pointerTarget(document, ref.slice(1));
      if (target === undefined) return { error: `the $ref ${ref} names nothing in the document` };
      current = target;
    }
    return { value: current };
  };
}

function pointerTarget(document: unknown, pointer: string): unknown {
  if (pointer === "") return document;
  if (!pointer.startsWith("/")) return undefined;
  let current = document;
  for (const raw of pointer.slice(1).split("/")) {
    let token: string;
    try {
      token = decodeURIComponent(raw);
    } catch {
      token = raw;
    }
    token = token.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(current)) {
      if (!/^\d+$/.test(token)) return undefined;
      current = current[Number(token)];
    } else if (isRecord(current) && Object.prototype.hasOwnProperty.call(current, token)) {
      current = current[token];
    } else {
      return undefined;
    }
  }
  return current;
}

// ---------------------------------------------------------------------------------------------------------------
// Operations and their ids

/** Every operation of the document in document order, with its id; broken path items go to `leftOut`. */
function collectOperations(document: OpenApiDocument, follow: RefFollower, prefix: string, leftOut: LeftOutOperation[], documentNotes: string[]): OperationSite[] {
  const sites: OperationSite[] = [];
  for (const [path, rawItem] of Object.entries(document.paths ?? {})) {
    const followed = follow(rawItem);
    if ("error" in followed) {
      leftOut.push({ method: "*", path, reason: `its path item cannot be read: ${followed.error}` });
      continue;
    }
    if (!isRecord(followed.value)) {
      if (followed.value !== null && followed.value !== undefined) leftOut.push({ method: "*", path, reason: "its path item is not an object" });
      continue;
    }
    const pathItem = followed.value;
    const hash = path.indexOf("#");
    const sentPath = hash >= 0 ? path.slice(0, hash) : path;
    for (const [key, operation] of Object.entries(pathItem)) {
      const method = key.toLowerCase();
      if (!HTTP_METHODS.has(method)) continue;
      if (!isRecord(operation)) {
        leftOut.push({ method: method.toUpperCase(), path, reason: "the operation is not an object" });
        continue;
      }
      const documentId = typeof operation.operationId === "string" && operation.operationId.trim() !== "" ? operation.operationId.trim() : undefined;
      const operationId = documentId ?? `${method}-${pathSlug(path)}`;
      const tags = Array.isArray(operation.tags) ? operation.tags.filter((t): t is string => typeof t === "string") : [];
      sites.push({ path, sentPath: sentPath.startsWith("/") ? sentPath : `/${sentPath}`, method, operation, pathItem, operationId, nodeTypeId: "", tags });
    }
  }
  assignNodeTypeIds(sites, prefix, documentNotes);
  return sites;
}

/** The path's segments joined by `-`, braces dropped: `/pets/{petId}` → `pets-petId`; a fragment is one more segment. */
function pathSlug(path: string): string {
  const slug = path
    .split(/[/#]/)
    .map((segment) => segment.replace(/[{}]/g, ""))
    .filter((segment) => segment !== "")
    .join("-");
  return slug === "" ? "root" : slug;
}

/** `<prefix>.<id>` for each operation: valid, at most 128 characters, distinct (document order decides clashes). */
function assignNodeTypeIds(sites: OperationSite[], prefix: string, documentNotes: string[]): void {
  const taken = new Map<string, OperationSite>();
  for (const site of sites) {
    let part = sanitizeIdPart(site.operationId);
    if (part === "") part = sanitizeIdPart(`${site.method}-${pathSlug(site.path)}`) || "operation";
    const base = fitId(prefix, part, "");
    let id = base;
    for (let n = 2; taken.has(id); n++) id = fitId(prefix, part, `-${n}`);
    if (id !== base) {
      const first = taken.get(base)!;
      documentNotes.push(`${site.method.toUpperCase()} ${site.path} would have the node type id ${base}, like ${first.method.toUpperCase()} ${first.path}; it is ${id}`);
    }
    taken.set(id, site);
    site.nodeTypeId = id;
  }
}

function sanitizeIdPart(text: string): string {
  return text
    .replace(/[^A-Za-z0-9._:-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .replace(/[-.]+$/, "");
}

/** `<prefix>.<part><suffix>`, `part` cut and given a stable 8-character hash when the whole would pass 128 characters. */
function fitId(prefix: string, part: string, suffix: string): string {
  const whole = `${prefix}.${part}${suffix}`;
  if (whole.length <= NODE_TYPE_ID_MAX && NODE_TYPE_ID.test(whole)) return whole;
  const hash = createHash("sha256").update(part).digest("hex").slice(0, 8);
  const room = NODE_TYPE_ID_MAX - prefix.length - 1 - suffix.length - hash.length - 1;
  const cut = part.slice(0, Math.max(0, room)).replace(/[-.]+$/, "");
  return `${prefix}.${cut === "" ? "" : `${cut}-`}${hash}${suffix}`;
}

/** A kebab-case file name per operation, from its id, distinct in the mapping. */
function assignFileNames(operations: MappedOperation[]): void {
  const taken = new Set<string>();
  for (const operation of operations) {
    const id = operation.nodeType.node_type_id;
    const kebab =
      id
        .slice(id.indexOf(".") + 1)
        .replace(/([a-z0-9])([A-Z])/g, "$1-$2")
        .replace(/([A-Z]+)([A-Z][a-z])/g, "$1-$2")
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, "-")
        .replace(/^-+|-+$/g, "") || "operation";
    let name = kebab;
    for (let n = 2; taken.has(name); n++) name = `${kebab}-${n}`;
    taken.add(name);
    operation.fileName = name;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One operation

interface MapContext {
  document: OpenApiDocument;
  title: string;
  apiVersion: string;
  follow: RefFollower;
  convert: (schema: unknown, direction: "request" | "response", notes: string[]) => SchemaObject;
  security: ReturnType<typeof createSecurityMapper>;
  baseUrlSetting: string;
  variableSettings: Map<string, string>;
  location: string | undefined;
  nodeTypeVersion: string;
  checker: SchemaChecker;
}

function mapOperation(site: OperationSite, ctx: MapContext): MappedOperation | { reason: string } {
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

/**
 * Tells whether schemas compile with the executor's validator (`compileHandlerSchema(createHandlerAjv(), schema)`),
 * at a cost that does not grow with how often a definition is shared: converted schemas share their `$defs` entries
 * (the same objects) across operations, so each entry is compiled once, on its own, with the names beside it standing
 * in as `true`; then each schema's own top is compiled the same way. A compile error belongs to one schema object, so
 * a schema whose parts all compile compiles. Any failure is confirmed by compiling the whole schema, whose error is
 * the one reported.
 */
class SchemaChecker {
  /** One Ajv for the whole mapping; it forgets each schema once compiled. */
  private readonly ajv = createHandlerAjv();
  /** Per definition object: the compile error, or null when it compiles. */
  private readonly definitions = new WeakMap<object, string | null>();
  /** Small parts whose `$ref`s resolve, by their text: the compile error, or null. */
  private readonly smallParts = new Map<string, string | null>();

  /** Why `schema` does not compile, or undefined when it does. */
  problemOf(schema: SchemaObject): string | undefined {
    const defs = isRecord(schema.$defs) ? schema.$defs : {};
    const standIns = Object.fromEntries(Object.keys(defs).map((name) => [name, true]));
    for (const def of Object.values(defs)) {
      if (!isRecord(def)) continue;
      let problem = this.definitions.get(def);
      if (problem === undefined) {
        problem = this.partProblem(def, standIns);
        this.definitions.set(def, problem);
      }
      if (problem !== null) return this.compileError(schema);
    }
    const { $defs: _defs, ...top } = schema;
    return this.partProblem(top, standIns) === null ? undefined : this.compileError(schema);
  }

  /**
   * The compile error of one part (a definition or a top), with the definition names standing in as `true`; null
   * when it compiles. Parts repeat as new objects (the same parameters on many paths, the converter's placeholders
   * for trimmed definitions): the same text whose `$ref`s all resolve compiles the same way, so small parts are
   * remembered by their text.
   */
  private partProblem(part: SchemaObject, standIns: Record<string, boolean>): string | null {
    const text = JSON.stringify(part);
    const small = text.length <= SMALL_PART_CHARS && [...text.matchAll(/"\$ref":"#\/\$defs\/([^"]*)"/g)].every((m) => m[1] in standIns);
    const remembered = small ? this.smallParts.get(text) : undefined;
    if (remembered !== undefined) return remembered;
    const problem = this.compileError(Object.keys(standIns).length > 0 ? { ...part, $defs: standIns } : part) ?? null;
    if (small) this.smallParts.set(text, problem);
    return problem;
  }

  private compileError(schema: SchemaObject): string | undefined {
    try {
      compileHandlerSchema(this.ajv, schema);
      return undefined;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    } finally {
      this.ajv.removeSchema(schema);
    }
  }
}

function describeOperation(operation: Record<string, unknown>, method: string, path: string, title: string): string {
  const summary = typeof operation.summary === "string" && operation.summary.trim() !== "" ? operation.summary : typeof operation.description === "string" ? operation.description.trim().split(/\n\s*\n/)[0] : "";
  const text = oneLine(summary ?? "").replace(/[.:]$/, "");
  const call = `${method} ${path} of ${title}`;
  const sentence = text === "" ? `Calls ${call}.` : `${text}: calls ${call}.`;
  return operation.deprecated === true ? `${sentence} Deprecated by the API.` : sentence;
}

// ---------------------------------------------------------------------------------------------------------------
// Parameters

interface ParameterObject {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  deprecated?: boolean;
  schema?: unknown;
  content?: unknown;
  style?: unknown;
  explode?: unknown;
  allowReserved?: unknown;
  example?: unknown;
  examples?: unknown;
}

/** The inputs and wire form of the operation's parameters (path-level ones overridden by the operation's own). */
function parametersOf(
  site: OperationSite,
  ctx: MapContext,
  notes: string[],
  defs: DefsCollector,
): { properties: Array<[string, unknown]>; required: string[]; parameters: OperationParameter[] } | { reason: string } {
  const byKey = new Map<string, ParameterObject>();
  for (const list of [site.pathItem.parameters, site.operation.parameters]) {
    if (list === undefined) continue;
    if (!Array.isArray(list)) {
      notes.push("a parameters field that is not a list is ignored");
      continue;
    }
    for (const raw of list) {
      const followed = ctx.follow(raw);
      if ("error" in followed) return { reason: `a parameter cannot be read: ${followed.error}` };
      const p = followed.value;
      if (!isRecord(p) || typeof p.name !== "string" || typeof p.in !== "string") {
        notes.push(`a parameter without a name or location is ignored (${JSON.stringify(raw).slice(0, 80)})`);
        continue;
      }
      const location = p.in.toLowerCase();
      byKey.set(`${location}:${location === "header" ? p.name.toLowerCase() : p.name}`, { ...(p as unknown as ParameterObject), in: location });
    }
  }
  const templateNames = [...site.sentPath.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  for (const name of templateNames) {
    // Documents sometimes forget to declare a path parameter; the request cannot be made without it.
    if (!byKey.has(`path:${name}`)) {
      byKey.set(`path:${name}`, { name, in: "path", required: true, schema: { type: "string" } });
      notes.push(`the path parameter ${name} is not declared; it is a required string input`);
    }
  }

  const kept: ParameterObject[] = [];
  for (const p of byKey.values()) {
    if (p.in === "path" && !templateNames.includes(p.name)) {
      notes.push(`the path parameter ${p.name} does not appear in the path; it is left out`);
      continue;
    }
    if (p.name === "") {
      notes.push(`a ${p.in} parameter with an empty name is ignored`);
      continue;
    }
    if (p.in === "header" && IGNORED_HEADERS.has(p.name.toLowerCase())) {
      notes.push(`the header parameter ${p.name} is ignored, as OpenAPI says (the request sets it)`);
      continue;
    }
    if (!(p.in in STYLES_BY_LOCATION)) {
      if (p.required === true) return { reason: `its required parameter ${p.name} is in "${p.in}", which is not a parameter location` };
      notes.push(`the parameter ${p.name} in "${p.in}" is ignored (not a parameter location)`);
      continue;
    }
    if (p.in === "header" && !HEADER_NAME.test(p.name)) {
      if (p.required === true) return { reason: `its required header parameter ${JSON.stringify(p.name)} is not a valid header name` };
      notes.push(`the header parameter ${JSON.stringify(p.name)} is ignored (not a valid header name)`);
      continue;
    }
    kept.push(p);
  }

  const nameCounts = new Map<string, number>();
  for (const p of kept) nameCounts.set(p.name, (nameCounts.get(p.name) ?? 0) + 1);
  const inputs = new Set<string>(["body"]);
  const properties: Array<[string, unknown]> = [];
  const required: string[] = [];
  const parameters: OperationParameter[] = [];
  for (const p of kept) {
    const location = p.in as OperationParameter["in"];
    let input = nameCounts.get(p.name)! > 1 || p.name === "body" ? `${location}_${p.name}` : p.name;
    const wanted = input;
    for (let n = 2; inputs.has(input); n++) input = `${wanted}_${n}`;
    inputs.add(input);

    let contentType: string | undefined;
    let rawSchema: unknown = p.schema;
    if (rawSchema === undefined && isRecord(p.content)) {
      const keys = Object.keys(p.content);
      contentType = keys.find(isJsonMediaType) ?? keys[0];
      if (contentType !== undefined) {
        const media = ctx.follow(p.content[contentType]);
        rawSchema = "value" in media && isRecord(media.value) ? media.value.schema : undefined;
      }
    }
    if (rawSchema === undefined) notes.push(`the parameter ${p.name} has no schema; any value is accepted`);
    const schema: SchemaObject = { ...defs.take(ctx.convert(rawSchema ?? {}, "request", notes), notes) };
    if (typeof p.description === "string" && schema.description === undefined) schema.description = p.description;
    if (p.deprecated === true) schema.deprecated = true;
    // What the runtime refuses beyond the schema (an empty path value, a line break in a header) is said in the schema.
    const rules = parameterRules(location, typesAllowed(schema, defs));
    if (rules) addRules(schema, rules);
    addParameterExample(p, schema, ctx, defs, notes);

    const styles = STYLES_BY_LOCATION[location];
    let style = styles[0];
    if (typeof p.style === "string") {
      if ((styles as string[]).includes(p.style)) style = p.style as ParameterStyle;
      else notes.push(`the style ${p.style} of the parameter ${p.name} is not one ${location} parameters can have; ${style} is used`);
    }
    const explode = typeof p.explode === "boolean" ? p.explode : style === "form";
    properties.push([input, schema]);
    if (location === "path" || p.required === true) required.push(input);
    parameters.push({
      input,
      name: p.name,
      in: location,
      style,
      explode,
      ...(location === "query" && p.allowReserved === true ? { allow_reserved: true } : {}),
      ...(contentType !== undefined ? { content_type: contentType } : {}),
    });
  }
  return { properties, required, parameters };
}

/** JSON types, as `type` names them. */
const JSON_TYPES = ["string", "number", "integer", "boolean", "array", "object", "null"];

/**
 * The JSON types a value of `schema` may have (through `$ref`s into the collected definitions, `allOf`, `anyOf` and
 * `oneOf`); undefined when any type may do.
 */
function typesAllowed(schema: unknown, defs: DefsCollector, seen: Set<unknown> = new Set()): Set<string> | undefined {
  if (!isRecord(schema) || seen.has(schema)) return undefined;
  seen.add(schema);
  let types: Set<string> | undefined;
  const narrow = (other: Set<string> | undefined) => {
    if (other === undefined) return;
    types = types === undefined ? new Set(other) : new Set([...types].filter((t) => other.has(t) || (t === "integer" && other.has("number"))));
  };
  if (schema.type !== undefined) {
    const listed = (Array.isArray(schema.type) ? schema.type : [schema.type]).filter((t): t is string => typeof t === "string");
    narrow(new Set(listed.includes("number") ? [...listed, "integer"] : listed));
  }
  if (typeof schema.$ref === "string") narrow(typesAllowed(defs.resolve(schema.$ref), defs, seen));
  if (Array.isArray(schema.allOf)) for (const part of schema.allOf) narrow(typesAllowed(part, defs, seen));
  for (const key of ["anyOf", "oneOf"] as const) {
    const branches = schema[key];
    if (!Array.isArray(branches) || branches.length === 0) continue;
    const union = new Set<string>();
    let any = false;
    for (const branch of branches) {
      const t = typesAllowed(branch, defs, new Set(seen));
      if (t === undefined) any = true;
      else for (const name of t) union.add(name);
    }
    if (!any) narrow(union);
  }
  if (Array.isArray(schema.enum)) narrow(new Set(schema.enum.map(jsonTypeOf)));
  if (schema.const !== undefined) narrow(new Set([jsonTypeOf(schema.const)]));
  return types;
}

function jsonTypeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return JSON_TYPES.includes(typeof value) ? typeof value : "null";
}

/** Bounds a rule raises: a schema's own stricter bound is kept. */
const LOWER_BOUNDS = new Set(["minLength", "minItems", "minProperties"]);

/**
 * Adds `rules` to a parameter's schema: as its own keywords where it has none of them (or a lower bound), the others
 * in one more `allOf` part, so both the document's constraint and the rule hold.
 */
function addRules(schema: SchemaObject, rules: SchemaRules): void {
  const rest: SchemaRules = {};
  for (const [key, value] of Object.entries(rules)) {
    const own = schema[key];
    if (LOWER_BOUNDS.has(key) && (own === undefined || (typeof own === "number" && own < (value as number)))) schema[key] = value;
    else if (LOWER_BOUNDS.has(key)) continue;
    // additionalProperties beside `properties` would spare the named ones: it goes in a part of its own.
    else if (own === undefined && key !== "additionalProperties") schema[key] = value;
    else rest[key] = value;
  }
  if (Object.keys(rest).length > 0) schema.allOf = [...(Array.isArray(schema.allOf) ? schema.allOf : []), rest];
}

/**
 * The parameter's `example` (or first of `examples`) as the input's `examples`, only when the samples module accepts
 * it as valid against the input's schema; otherwise it is left out, with a note.
 */
function addParameterExample(p: ParameterObject, schema: SchemaObject, ctx: MapContext, defs: DefsCollector, notes: string[]): void {
  if (schema.examples !== undefined) return;
  let candidate = p.example;
  if (candidate === undefined && isRecord(p.examples)) {
    for (const raw of Object.values(p.examples)) {
      const followed = ctx.follow(raw);
      if ("value" in followed && isRecord(followed.value) && followed.value.value !== undefined) {
        candidate = followed.value.value;
        break;
      }
    }
  }
  if (candidate === undefined) return;
  const sample = sampleFor(defs.standalone(schema), { examples: [candidate] });
  if ("value" in sample && sameJson(sample.value, candidate)) schema.examples = [candidate];
  else notes.push(`the example of the parameter ${p.name} is not valid against its schema; it is left out`);
}

// ---------------------------------------------------------------------------------------------------------------
// Request body

/** The `body` input and how it is sent; undefined when the operation takes no body. */
function requestBodyOf(operation: Record<string, unknown>, ctx: MapContext, notes: string[], defs: DefsCollector): { schema: SchemaObject; spec: OperationBody } | { reason: string } | undefined {
  if (operation.requestBody === undefined) return undefined;
  const followed = ctx.follow(operation.requestBody);
  if ("error" in followed) return { reason: `its request body cannot be read: ${followed.error}` };
  const requestBody = followed.value;
  if (!isRecord(requestBody)) return undefined;
  const required = requestBody.required === true;
  const content = isRecord(requestBody.content) ? requestBody.content : {};
  const keys = Object.keys(content);
  if (keys.length === 0) {
    notes.push("the request body names no media type; no body is sent");
    return undefined;
  }
  const chosen = chooseRequestMedia(keys);
  if (keys.length > 1) notes.push(`request body: ${chosen.key} chosen among ${keys.join(", ")}`);
  const media = ctx.follow(content[chosen.key]);
  if ("error" in media) return { reason: `its request body's ${chosen.key} cannot be read: ${media.error}` };
  const mediaObject = isRecord(media.value) ? media.value : {};
  const spec: OperationBody = { input: "body", media_type: chosen.mediaType, encoding: chosen.encoding, required };
  if (chosen.mediaType !== chosen.key) notes.push(`request body: ${chosen.key} is sent as ${chosen.mediaType}`);

  let schema: SchemaObject;
  switch (chosen.encoding) {
    case "json":
      schema = { ...defs.take(ctx.convert(mediaObject.schema ?? {}, "request", notes), notes) };
      break;
    case "form":
    case "multipart": {
      const prepared = chosen.encoding === "multipart" ? withBase64Files(mediaObject.schema, ctx, spec) : mediaObject.schema;
      schema = { ...defs.take(ctx.convert(prepared ?? { type: "object" }, "request", notes), notes) };
      if (Object.keys(schema).every((k) => k === "description" || k === "title")) schema.type = "object";
      // Form fields and multipart parts are named by an object's properties; any other shape cannot be sent as one.
      if (!describesOnlyObjects(schema)) return { reason: `its ${chosen.key} body is not described as an object of named fields, so it cannot be sent as ${chosen.encoding === "form" ? "a form" : "named parts"}` };
      if (spec.binary_fields?.length) notes.push(`request body: the file fields ${spec.binary_fields.join(", ")} are given as base64`);
      const encoding = encodingProperties(mediaObject.encoding, chosen.encoding);
      if (encoding) spec.properties = encoding;
      break;
    }
    case "text":
      schema = { type: "string" };
      break;
    default:
      schema = { type: "string", contentEncoding: "base64", ...base64Rules(), ...(chosen.key.includes("*") ? {} : { contentMediaType: chosen.key }) };
      notes.push(`request body: ${chosen.key} is given as base64 and sent as its bytes`);
  }
  if (typeof requestBody.description === "string" && schema.description === undefined) schema.description = requestBody.description;
  return { schema, spec };
}

function chooseRequestMedia(keys: string[]): { key: string; mediaType: string; encoding: OperationBody["encoding"] } {
  const base = (key: string) => key.split(";")[0].trim().toLowerCase();
  const json = keys.find((k) => base(k) === "application/json") ?? keys.find(isJsonMediaType);
  if (json) return { key: json, mediaType: json, encoding: "json" };
  const wildcard = keys.find((k) => base(k) === "*/*" || base(k) === "application/*");
  if (wildcard) return { key: wildcard, mediaType: "application/json", encoding: "json" };
  const form = keys.find((k) => base(k) === "application/x-www-form-urlencoded");
  if (form) return { key: form, mediaType: form, encoding: "form" };
  const multipart = keys.find((k) => base(k) === "multipart/form-data");
  if (multipart) return { key: multipart, mediaType: multipart, encoding: "multipart" };
  const text = keys.find((k) => isTextMediaType(k));
  if (text) return { key: text, mediaType: text.includes("*") ? "text/plain" : text, encoding: "text" };
  const other = keys[0];
  return { key: other, mediaType: other.includes("*") ? "application/octet-stream" : other, encoding: "binary" };
}

/**
 * A multipart schema whose file properties (`format: binary`, `contentEncoding: base64`, a `contentMediaType` that is
 * not text, Swagger's `type: file`, or lists of these) are base64 strings; their names go to `spec.binary_fields`.
 * Only the top object is copied (shallowly): the rest of the schema is passed on as it is, `$ref`s and all.
 */
function withBase64Files(schema: unknown, ctx: MapContext, spec: OperationBody): unknown {
  const followed = ctx.follow(schema);
  if (!("value" in followed) || !isRecord(followed.value) || !isRecord(followed.value.properties)) return schema;
  const top = followed.value;
  const properties: Array<[string, unknown]> = [];
  const binary: string[] = [];
  for (const [name, raw] of Object.entries(top.properties as Record<string, unknown>)) {
    const property = ctx.follow(raw);
    const value = "value" in property ? property.value : undefined;
    if (isFileSchema(value)) {
      binary.push(name);
      properties.push([name, base64Field(value as Record<string, unknown>)]);
    } else if (isRecord(value) && value.type === "array" && isFileSchema(followedValue(ctx.follow(value.items)))) {
      binary.push(name);
      properties.push([name, { type: "array", items: { type: "string", contentEncoding: "base64", ...base64Rules() }, ...(typeof value.description === "string" ? { description: value.description } : {}) }]);
    } else {
      properties.push([name, raw]);
    }
  }
  if (binary.length === 0) return schema;
  spec.binary_fields = binary;
  return { ...top, properties: Object.fromEntries(properties) };
}

function isFileSchema(value: unknown): boolean {
  if (!isRecord(value)) return false;
  if (value.type === "file" || value.format === "binary" || value.contentEncoding === "base64") return true;
  // OpenAPI 3.1 spells a file part as a string of some media type's bytes.
  return typeof value.contentMediaType === "string" && !isTextMediaType(value.contentMediaType) && !isJsonMediaType(value.contentMediaType);
}

function followedValue(followed: ReturnType<RefFollower>): unknown {
  return "value" in followed ? followed.value : undefined;
}

function base64Field(source: Record<string, unknown>): SchemaObject {
  return { type: "string", contentEncoding: "base64", ...base64Rules(), ...(typeof source.description === "string" ? { description: source.description } : {}) };
}

/** Encoding Objects of a form or multipart body, as the descriptor carries them. */
function encodingProperties(encoding: unknown, kind: "form" | "multipart"): OperationBody["properties"] | undefined {
  if (!isRecord(encoding)) return undefined;
  const out: NonNullable<OperationBody["properties"]> = {};
  for (const [name, raw] of Object.entries(encoding)) {
    if (!isRecord(raw)) continue;
    const entry: { content_type?: string; style?: ParameterStyle; explode?: boolean } = {};
    if (typeof raw.contentType === "string") entry.content_type = raw.contentType;
    if (kind === "form" && typeof raw.style === "string" && (STYLES_BY_LOCATION.query as string[]).includes(raw.style)) entry.style = raw.style as ParameterStyle;
    if (kind === "form" && typeof raw.explode === "boolean") entry.explode = raw.explode;
    if (Object.keys(entry).length > 0) out[name] = entry;
  }
  return Object.keys(out).length > 0 ? Object.fromEntries(Object.entries(out)) : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Answer

/** The answer that becomes the outputs: its status, how it is read, and the output schema. */
function responseOf(operation: Record<string, unknown>, ctx: MapContext, notes: string[]): { response: HttpOperationDescriptor["response"]; outputSchema: SchemaObject } {
  const responses = isRecord(operation.responses) ? operation.responses : {};
  const codes = Object.keys(responses);
  const exact = codes.filter((c) => /^2\d\d$/.test(c)).sort((a, b) => Number(a) - Number(b));
  const range = codes.filter((c) => c.toUpperCase() === "2XX");
  let candidates = [...exact, ...range];
  if (candidates.length === 0 && codes.includes("default")) candidates = ["default"];
  const statusOf = (code: string) => (/^\d+$/.test(code) ? Number(code) : 200);

  const contents = candidates.map((code) => {
    const followed = ctx.follow(responses[code]);
    const response = "value" in followed && isRecord(followed.value) ? followed.value : {};
    if ("error" in followed) notes.push(`the ${code} answer cannot be read: ${followed.error}`);
    return { code, content: isRecord(response.content) ? response.content : {} };
  });
  // 204 and 205 answers carry no body (RFC 9110), whatever content a document gives them.
  const noBody = (code: string) => code === "204" || code === "205";
  for (const { code, content } of contents) if (noBody(code) && Object.keys(content).length > 0) notes.push(`its ${code} answer is described with content, but a ${code} carries no body; it is read as no content`);
  for (const { code, content } of contents) {
    if (noBody(code)) continue;
    const keys = Object.keys(content);
    const key = keys.find((k) => k.split(";")[0].trim().toLowerCase() === "application/json") ?? keys.find(isJsonMediaType) ?? keys.find((k) => k.split(";")[0].trim() === "*/*");
    if (key === undefined) continue;
    const media = ctx.follow(content[key]);
    const schemaSource = "value" in media && isRecord(media.value) ? media.value.schema : undefined;
    const converted = ctx.convert(schemaSource ?? {}, "response", notes);
    const status = statusOf(code);
    if (describesOnlyObjects(converted)) return { response: { status, outputs: "object", media_type: key }, outputSchema: converted };
    const defs = new DefsCollector();
    const result = defs.take(converted, notes);
    const outputSchema: SchemaObject = { type: "object", properties: { result }, required: ["result"], additionalProperties: false };
    defs.attachTo(outputSchema);
    return { response: { status, outputs: "result", media_type: key }, outputSchema };
  }
  for (const { code, content } of contents) {
    if (noBody(code)) continue;
    const key = Object.keys(content).find(isTextMediaType);
    if (key === undefined) continue;
    return { response: { status: statusOf(code), outputs: "result", media_type: key }, outputSchema: { type: "object", properties: { result: { type: "string" } }, required: ["result"], additionalProperties: false } };
  }
  const other = contents.filter(({ code }) => !noBody(code)).flatMap(({ content }) => Object.keys(content));
  if (other.length > 0) notes.push(`its answer (${[...new Set(other)].join(", ")}) is neither JSON nor text; the outputs are {}`);
  return { response: { status: candidates.length > 0 ? statusOf(candidates[0]) : 200, outputs: "none" }, outputSchema: { type: "object" } };
}

/** True when every value valid under `schema` (a converted schema, `$ref`s into its `$defs`) is a JSON object. */
export function describesOnlyObjects(schema: SchemaObject): boolean {
  const defs = isRecord(schema.$defs) ? schema.$defs : {};
  const check = (s: unknown, seen: Set<string>): boolean => {
    if (!isRecord(s)) return false;
    if (typeof s.$ref === "string") {
      const match = /^#\/\$defs\/(.+)$/.exec(s.$ref);
      if (!match) return false;
      const name = decodeURIComponent(match[1]).replace(/~1/g, "/").replace(/~0/g, "~");
      if (seen.has(name)) return false;
      const target = defs[name];
      const next = new Set(seen).add(name);
      if (check(target, next)) return true;
      // A sibling of $ref (2020-12 allows them) may say object too.
      const { $ref: _ignored, ...rest } = s;
      return Object.keys(rest).length > 0 && check(rest, next);
    }
    if (s.type === "object") return true;
    if (Array.isArray(s.type)) return s.type.length === 1 && s.type[0] === "object";
    if (s.type !== undefined) return false;
    if (Array.isArray(s.allOf) && s.allOf.some((sub) => check(sub, seen))) return true;
    for (const key of ["oneOf", "anyOf"] as const) {
      const list = s[key];
      if (Array.isArray(list) && list.length > 0) return list.every((sub) => check(sub, seen));
    }
    // No type but object keywords: an object is what the document means, and the answer is checked at run time.
    return s.properties !== undefined || s.additionalProperties !== undefined || s.required !== undefined;
  };
  return check(schema, new Set());
}

// ---------------------------------------------------------------------------------------------------------------
// Servers

/** Setting names of every server variable the document declares (document, path and operation servers). */
function variableSettingNames(document: OpenApiDocument, follow: RefFollower, prefix: string): Map<string, string> {
  const names = new Map<string, string>();
  const add = (servers: unknown) => {
    if (!Array.isArray(servers)) return;
    for (const server of servers) {
      if (!isRecord(server) || typeof server.url !== "string") continue;
      const declared = isRecord(server.variables) ? Object.keys(server.variables) : [];
      const used = [...server.url.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const variable of [...declared, ...used]) {
        if (!names.has(variable)) names.set(variable, `${prefix}_SERVER_${upperSnakeWords(variable).join("_") || "VARIABLE"}`);
      }
    }
  };
  add(document.servers);
  for (const raw of Object.values(document.paths ?? {})) {
    const item = follow(raw);
    if (!("value" in item) || !isRecord(item.value)) continue;
    add(item.value.servers);
    for (const [key, operation] of Object.entries(item.value)) if (HTTP_METHODS.has(key.toLowerCase()) && isRecord(operation)) add(operation.servers);
  }
  // Two variables whose names differ only in case or punctuation would share a setting; later ones are numbered.
  const seen = new Map<string, number>();
  for (const [variable, setting] of names) {
    const count = (seen.get(setting) ?? 0) + 1;
    seen.set(setting, count);
    if (count > 1) names.set(variable, `${setting}_${count}`);
  }
  return names;
}

/** The operation's server (its own, else its path's, else the document's first) as the descriptor holds it. */
function serverOf(site: OperationSite, ctx: MapContext, notes: string[]): { server: OperationServer; variableSettings?: Record<string, string> } {
  const pick = (servers: unknown) => (Array.isArray(servers) ? servers.find((s) => isRecord(s) && typeof s.url === "string") : undefined) as Record<string, unknown> | undefined;
  const server = pick(site.operation.servers) ?? pick(site.pathItem.servers) ?? pick(ctx.document.servers);
  if (!server) return { server: { url: "" } };
  const url = absoluteServerUrl(server.url as string, ctx.location, notes);
  if (url === "") return { server: { url: "" } };
  const variables: NonNullable<OperationServer["variables"]> = {};
  const variableSettings: Record<string, string> = {};
  const declared = isRecord(server.variables) ? server.variables : {};
  for (const match of url.matchAll(/\{([^}]+)\}/g)) {
    const name = match[1];
    const setting = ctx.variableSettings.get(name);
    if (setting) variableSettings[name] = setting;
    const spec = declared[name];
    if (!isRecord(spec)) {
      notes.push(`the server variable {${name}} is not declared; it must be set with ${setting}`);
      continue;
    }
    const enumValues = Array.isArray(spec.enum) ? spec.enum.filter((v) => v !== null && v !== undefined).map(String) : undefined;
    const fallback = spec.default !== undefined && spec.default !== null ? String(spec.default) : enumValues?.[0];
    if (fallback === undefined) {
      notes.push(`the server variable {${name}} has no default; it must be set with ${setting}`);
      continue;
    }
    variables[name] = {
      default: fallback,
      ...(enumValues && enumValues.length > 0 ? { enum: enumValues } : {}),
      ...(typeof spec.description === "string" ? { description: oneLine(spec.description) } : {}),
    };
  }
  return {
    server: { url, ...(Object.keys(variables).length > 0 ? { variables } : {}) },
    ...(Object.keys(variableSettings).length > 0 ? { variableSettings } : {}),
  };
}

/** A server URL as the descriptor holds it: absolute http(s) (or a template), no trailing slash; "" when unusable. */
function absoluteServerUrl(url: string, location: string | undefined, notes: string[]): string {
  let text = url.trim();
  if (!/^[a-z][a-z0-9+.-]*:/i.test(text) && !text.startsWith("{")) {
    if (location === undefined) {
      notes.push(`the server URL ${JSON.stringify(url)} is relative and the document was not read from a URL; the base URL must be set`);
      return "";
    }
    text = resolveServerUrl(text, location);
  } else if (!/^https?:\/\//i.test(text) && !text.startsWith("{")) {
    notes.push(`the server URL ${url} is not http(s); the base URL must be set`);
    return "";
  }
  return text.replace(/\/+$/, "");
}

/** The absolute base URL of `servers[0]`, its variables at their defaults; "" when there is none. */
function defaultBaseUrlOf(document: OpenApiDocument, location: string | undefined): string {
  const server = Array.isArray(document.servers) ? document.servers[0] : undefined;
  if (!isRecord(server) || typeof server.url !== "string") return "";
  const variables = isRecord(server.variables) ? server.variables : {};
  let url = server.url.trim().replace(/\{([^}]+)\}/g, (whole, name: string) => {
    const spec = variables[name];
    if (!isRecord(spec)) return whole;
    if (spec.default !== undefined && spec.default !== null) return String(spec.default);
    return Array.isArray(spec.enum) && spec.enum.length > 0 ? String(spec.enum[0]) : whole;
  });
  if (url.includes("{")) return "";
  if (!/^[a-z][a-z0-9+.-]*:/i.test(url)) {
    if (location === undefined) return "";
    url = resolveServerUrl(url, location);
  }
  return /^https?:\/\/[^/]+/i.test(url) ? url.replace(/\/+$/, "") : "";
}

function absoluteUrlAgainst(url: string, base: string | undefined): string | undefined {
  if (/^https?:\/\//i.test(url)) return url;
  if (base === undefined || base === "") return undefined;
  try {
    return new URL(url, base.endsWith("/") ? base : `${base}/`).href;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// $defs of converted schemas

/**
 * Gathers the `$defs` of converted schemas placed under one root (an input schema's properties, an output's
 * `result`): each converted schema's `$ref`s are `#/$defs/…`, so its definitions move to the root. Definitions are
 * shared by reference, never copied; the same name for different definitions is renamed in the schema that brought it.
 */
class DefsCollector {
  private readonly defs = new Map<string, unknown>();

  /** `converted` without its `$defs`, which join the root's. */
  take(converted: SchemaObject, notes: string[]): SchemaObject {
    if (!isRecord(converted.$defs)) return converted;
    let schema = converted;
    const renames = new Map<string, string>();
    for (const [name, def] of Object.entries(converted.$defs)) {
      const existing = this.defs.get(name);
      if (existing === undefined) this.defs.set(name, def);
      else if (existing !== def && !sameJson(existing, def)) {
        let renamed = `${name}_2`;
        for (let n = 3; this.defs.has(renamed); n++) renamed = `${name}_${n}`;
        renames.set(name, renamed);
      }
    }
    if (renames.size > 0) {
      // Rare: two schemas of one operation gave different definitions one name. That schema is rewritten (copied).
      schema = rewriteDefRefs(converted, renames) as SchemaObject;
      for (const [name, renamed] of renames) this.defs.set(renamed, (schema.$defs as Record<string, unknown>)[renamed]);
      notes.push(`schema definitions renamed to keep them apart: ${[...renames].map(([a, b]) => `${a} → ${b}`).join(", ")}`);
    }
    const { $defs: _defs, ...rest } = schema;
    return rest;
  }

  /** The definition a `#/$defs/<name>` reference names, if gathered. */
  resolve(ref: string): unknown {
    const m = /^#\/\$defs\/([^/]+)$/.exec(ref);
    if (!m) return undefined;
    let name = m[1];
    try {
      name = decodeURIComponent(name);
    } catch {
      // As written.
    }
    return this.defs.get(name.replace(/~1/g, "/").replace(/~0/g, "~"));
  }

  /** Puts the gathered definitions on `root`. */
  attachTo(root: SchemaObject): void {
    if (this.defs.size > 0) root.$defs = Object.fromEntries(this.defs);
  }

  /** `schema` (taken earlier) with the definitions it may use, as a schema of its own. */
  standalone(schema: SchemaObject): SchemaObject {
    return this.defs.size > 0 ? { ...schema, $defs: Object.fromEntries(this.defs) } : schema;
  }
}

function rewriteDefRefs(value: unknown, renames: Map<string, string>): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteDefRefs(item, renames));
  if (!isRecord(value)) return value;
  const out: Array<[string, unknown]> = [];
  for (const [key, child] of Object.entries(value)) {
    if (key === "$ref" && typeof child === "string") {
      const match = /^#\/\$defs\/([^/]+)(.*)$/.exec(child);
      const renamed = match ? renames.get(decodeURIComponent(match[1])) : undefined;
      out.push([key, renamed ? `#/$defs/${encodeURIComponent(renamed)}${match![2]}` : child]);
    } else if (key === "$defs" && isRecord(child)) {
      out.push([key, Object.fromEntries(Object.entries(child).map(([name, def]) => [renames.get(name) ?? name, rewriteDefRefs(def, renames)]))]);
    } else {
      out.push([key, rewriteDefRefs(child, renames)]);
    }
  }
  return Object.fromEntries(out);
}

// ---------------------------------------------------------------------------------------------------------------
// Small helpers

function isJsonMediaType(mediaType: string): boolean {
  const base = mediaType.split(";")[0].trim().toLowerCase();
  const slash = base.indexOf("/");
  if (slash <= 0) return false;
  const subtype = base.slice(slash + 1);
  return subtype === "json" || subtype.endsWith("+json");
}

function isTextMediaType(mediaType: string): boolean {
  const base = mediaType.split(";")[0].trim().toLowerCase();
  return base.startsWith("text/") || base === "application/xml" || base.endsWith("+xml") || base === "application/yaml" || base === "application/x-yaml";
}

function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  try {
    return JSON.stringify(a) === JSON.stringify(b);
  } catch {
    return false;
  }
}

function lowerSet(values: string[] | undefined): Set<string> {
  return new Set((values ?? []).map((v) => v.trim().toLowerCase()).filter((v) => v !== ""));
}

function oneLine(text: string): string {
  return text.trim().replace(/\s+/g, " ");
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
