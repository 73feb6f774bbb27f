/**
 * Reads an OpenAPI document from a file or an http(s) URL, JSON or YAML, the way real documents need: internal `$ref`s
 * are kept as they are (never dereferenced into copies, which multiplies the memory of documents with large shared
 * components), external ones are brought in, Swagger 2.0 is converted to OpenAPI 3.0, and small faults are noted
 * rather than refused. Only what cannot be used at all is refused, with an OpenApiImportError.
 */
import { stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import SwaggerParser from "@apidevtools/swagger-parser";
import { convertObj } from "swagger2openapi";
import type { LoadedOpenApi, LoadOpenApiOptions, OpenApiDocument } from "./types.js";

/** An OpenAPI document that cannot be read or used: the message says which and why. */
export class OpenApiImportError extends Error {
  /** The scaffolder's and the CLI's exit code for work that cannot be done. */
  readonly exitCode = 1;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "OpenApiImportError";
  }
}

/** Documents at least this big get `onProgress` lines for each step. */
const BIG_DOCUMENT_BYTES = 1_000_000;

/** Notes of each document loadOpenApi made, so mapOpenApi can repeat them (the document is the key, nothing is copied). */
const loaderNotes = new WeakMap<object, string[]>();

/** The notes loadOpenApi gave `document` (Swagger 2.0 converted, a default title…); empty for a document it did not make. */
export function loaderNotesOf(document: object): string[] {
  return loaderNotes.get(document) ?? [];
}

/**
 * json-schema-ref-parser's own `parse`, which swagger-parser overrides with checks stricter than real documents pass
 * (a numeric `info.version`, an `openapi` patch version it does not list yet). The version is checked here instead.
 */
const plainParse = (Object.getPrototypeOf(SwaggerParser.prototype) as { parse: (...args: unknown[]) => Promise<unknown> }).parse;

/** swagger-parser with the plain parse, so `bundle` (which parses first) accepts what loadOpenApi accepts. */
class LenientParser extends SwaggerParser {}
Object.defineProperty(LenientParser.prototype, "parse", { value: plainParse, writable: true, configurable: true });

/**
 * Reads the document at `source`: a path (relative to `options.cwd`, default the working directory), a `file:` URL or
 * an http(s) URL. Swagger 2.0, OpenAPI 3.0.x and 3.1.x are accepted; anything else throws an OpenApiImportError.
 */
export async function loadOpenApi(source: string, options: LoadOpenApiOptions = {}): Promise<LoadedOpenApi> {
  const progress = options.onProgress ?? (() => {});
  const isUrl = /^https?:\/\//i.test(source);
  let location: string;
  if (isUrl) location = source;
  else if (/^file:/i.test(source)) location = fileURLToPath(source);
  else if (/^[a-z][a-z0-9+.-]+:\/\//i.test(source)) throw new OpenApiImportError(`cannot read ${source}: only files and http(s) URLs are read`);
  else location = path.resolve(options.cwd ?? process.cwd(), source);

  if (!isUrl) await assertReadableFile(location, source);

  let bytes = 0;
  const readerOptions = {
    // The resolver refuses loopback and private hosts by default (a guard for servers resolving untrusted documents);
    // here the person at the keyboard named the URL, often a local dev server, so it is fetched as asked.
    ...(isUrl ? { resolve: { http: { safeUrlResolver: false } } } : {}),
    parse: {
      // Counts the bytes of every file read, then declines, so the JSON and YAML parsers parse it.
      size: {
        order: 1,
        canParse(file: { data?: { length?: number } }) {
          bytes += typeof file.data?.length === "number" ? file.data.length : 0;
          return false;
        },
        parse() {
          throw new Error("not a parser");
        },
      },
    },
  };
  const parser = new LenientParser();
  let parsed: unknown;
  try {
    parsed = await (parser.parse as (...args: unknown[]) => Promise<unknown>)(location, readerOptions);
  } catch (err) {
    // The reader refuses a file that parses to plain text or a number with "… is not a valid JSON Schema".
    if (/is not a valid JSON Schema/.test(messageOf(err))) {
      throw new OpenApiImportError(`${source} is not an OpenAPI document: expected a JSON or YAML object, found plain text`, { cause: err });
    }
    throw new OpenApiImportError(`cannot read the OpenAPI document ${source}: ${messageOf(err)}`, { cause: err });
  }
  const big = bytes >= BIG_DOCUMENT_BYTES;
  if (big) progress(`read ${megabytes(bytes)}`);

  const notes: string[] = [];
  const version = versionOf(parsed, source, notes);

  const external = externalRefsOf(parsed).length;
  if (external > 0) {
    if (big) progress(`bundling ${external} external $ref${external === 1 ? "" : "s"}`);
    parsed = await bundleExternalRefs(parsed as Record<string, unknown>, location, source, readerOptions, notes);
  }

  let convertedFrom: string | undefined;
  if (version === "2.0") {
    parsed = await convertSwagger2(parsed as Record<string, unknown>, source, notes);
    convertedFrom = "2.0";
    progress("converted Swagger 2.0");
  }

  const document = usableDocument(parsed as Record<string, unknown>, source, location, notes);
  if (isUrl) resolveRelativeServers(document, location, notes);
  loaderNotes.set(document, notes);
  return { document, location, ...(convertedFrom ? { convertedFrom } : {}), notes };
}

async function assertReadableFile(location: string, source: string): Promise<void> {
  let isFile: boolean;
  try {
    isFile = (await stat(location)).isFile();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new OpenApiImportError(`cannot read the OpenAPI document ${source}: ${code === "ENOENT" ? "no such file" : messageOf(err)}`, { cause: err });
  }
  if (!isFile) throw new OpenApiImportError(`cannot read the OpenAPI document ${source}: it is not a file`);
}

/** "2.0", or the OpenAPI 3.0/3.1 version; throws for anything else. Fixes a version written as a number, with a note. */
function versionOf(parsed: unknown, source: string, notes: string[]): string {
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new OpenApiImportError(`${source} is not an OpenAPI document: expected a JSON or YAML object, found ${describeValue(parsed)}`);
  }
  const d = parsed as Record<string, unknown>;
  if (d.swagger !== undefined) {
    if (d.swagger === "2.0" || d.swagger === 2) {
      if (d.swagger === 2) notes.push('its "swagger" field is the number 2.0; read as "2.0"');
      d.swagger = "2.0";
      return "2.0";
    }
    throw new OpenApiImportError(`${source} is Swagger ${JSON.stringify(d.swagger)}, which is not supported: NodeFabric reads Swagger 2.0 and OpenAPI 3.0 and 3.1`);
  }
  if (d.openapi === undefined) {
    throw new OpenApiImportError(`${source} is not an OpenAPI document: it has neither an "openapi" nor a "swagger" field`);
  }
  if (typeof d.openapi === "number" && (d.openapi === 3 || d.openapi === 3.1)) {
    const text = d.openapi === 3 ? "3.0.0" : "3.1.0";
    notes.push(`its "openapi" field is the number ${d.openapi}; read as "${text}"`);
    d.openapi = text;
  }
  if (typeof d.openapi !== "string" || !/^3\.[01](\.\d+)?(-[\w.]+)?$/.test(d.openapi.trim())) {
    throw new OpenApiImportError(`${source} is OpenAPI ${JSON.stringify(d.openapi)}, which is not supported: NodeFabric reads Swagger 2.0 and OpenAPI 3.0 and 3.1`);
  }
  return d.openapi;
}

/** Swagger 2.0 as OpenAPI 3.0, with the converter fixing the small faults real documents have. */
async function convertSwagger2(swagger: Record<string, unknown>, source: string, notes: string[]): Promise<Record<string, unknown>> {
  if (typeof swagger.info === "object" && swagger.info !== null) {
    const info = swagger.info as Record<string, unknown>;
    if (typeof info.version === "number") {
      notes.push(`its info.version is the number ${info.version}; read as "${String(info.version)}"`);
      info.version = String(info.version);
    }
  }
  if (typeof swagger.paths !== "object" || swagger.paths === null || Array.isArray(swagger.paths)) {
    throw new OpenApiImportError(`${source} has no paths: there is no operation to make a node type of`);
  }
  const options = { patch: true, warnOnly: true, resolve: false, text: "-" } as unknown as Parameters<typeof convertObj>[1];
  let converted: { openapi: unknown; patches?: number };
  try {
    converted = (await convertObj(swagger as never, options)) as unknown as { openapi: unknown; patches?: number };
  } catch (err) {
    throw new OpenApiImportError(`cannot convert the Swagger 2.0 document ${source} to OpenAPI 3.0: ${messageOf(err)}`, { cause: err });
  }
  const patches = converted.patches ?? 0;
  notes.push(`converted from Swagger 2.0 to OpenAPI 3.0${patches > 0 ? ` (${patches} small fault${patches === 1 ? "" : "s"} patched on the way)` : ""}`);
  requireFormBodiesWithRequiredFields(converted.openapi, notes);
  const warnings = collectConversionWarnings(converted.openapi);
  for (const warning of warnings.slice(0, 20)) notes.push(`Swagger 2.0 conversion: ${warning}`);
  if (warnings.length > 20) notes.push(`Swagger 2.0 conversion: and ${warnings.length - 20} more warnings`);
  return converted.openapi as Record<string, unknown>;
}

/**
 * Swagger 2.0 form parameters become one request body; the converter marks it required only when its first
 * parameter is. A body with a required field is required, so it is marked so again.
 */
function requireFormBodiesWithRequiredFields(document: unknown, notes: string[]): void {
  const paths = (document as { paths?: Record<string, unknown> }).paths ?? {};
  let fixed = 0;
  for (const item of Object.values(paths)) {
    if (typeof item !== "object" || item === null) continue;
    for (const operation of Object.values(item as Record<string, unknown>)) {
      const body = (operation as { requestBody?: Record<string, unknown> } | null)?.requestBody;
      if (typeof body !== "object" || body === null || body.required === true || typeof body.content !== "object" || body.content === null) continue;
      const content = body.content as Record<string, { schema?: { required?: unknown } } | undefined>;
      const form = content["multipart/form-data"] ?? content["application/x-www-form-urlencoded"];
      if (Array.isArray(form?.schema?.required) && form.schema.required.length > 0) {
        body.required = true;
        fixed++;
      }
    }
  }
  if (fixed > 0) notes.push(`${fixed} form request bod${fixed === 1 ? "y" : "ies"} with required fields marked required (the conversion had lost it)`);
}

/** The `x-s2o-warning`s the converter left where it worked around a fault (warnOnly). */
function collectConversionWarnings(document: unknown): string[] {
  const warnings: string[] = [];
  const seen = new Set<object>();
  const walk = (value: unknown): void => {
    if (typeof value !== "object" || value === null || seen.has(value)) return;
    seen.add(value);
    if (Array.isArray(value)) {
      for (const item of value) walk(item);
      return;
    }
    const record = value as Record<string, unknown>;
    if (typeof record["x-s2o-warning"] === "string") warnings.push(record["x-s2o-warning"]);
    for (const key in record) walk(record[key]);
  };
  walk(document);
  return warnings;
}

/** The document as mapOpenApi reads it: refuses what cannot be used, and notes and fills what can be guessed. */
function usableDocument(d: Record<string, unknown>, source: string, location: string, notes: string[]): OpenApiDocument {
  if (typeof d.paths !== "object" || d.paths === null || Array.isArray(d.paths)) {
    const webhooks = typeof d.webhooks === "object" && d.webhooks !== null;
    throw new OpenApiImportError(`${source} has no paths: there is no operation to make a node type of${webhooks ? " (it describes only webhooks, which the API calls, not operations to call)" : ""}`);
  }
  if (typeof d.info !== "object" || d.info === null || Array.isArray(d.info)) d.info = {};
  const info = d.info as Record<string, unknown>;
  if (typeof info.title !== "string" || info.title.trim() === "") {
    const title = defaultTitle(location);
    notes.push(`the document has no info.title; "${title}" is used, from where it was read`);
    info.title = title;
  }
  if (typeof info.version === "number" || typeof info.version === "boolean") {
    notes.push(`its info.version is the ${typeof info.version} ${String(info.version)}; read as "${String(info.version)}"`);
    info.version = String(info.version);
  } else if (typeof info.version !== "string") {
    notes.push('the document has no info.version; "0.0.0" is used');
    info.version = "0.0.0";
  }
  if (d.servers !== undefined && !Array.isArray(d.servers)) {
    notes.push("its servers field is not a list; it is ignored");
    delete d.servers;
  }
  return d as OpenApiDocument;
}

/** A title from the file name or the URL's host, for a document without one. */
function defaultTitle(location: string): string {
  if (/^https?:\/\//i.test(location)) {
    const url = new URL(location);
    const file = path.posix.basename(url.pathname).replace(/\.(json|ya?ml)$/i, "");
    return file !== "" && !/^(openapi|swagger|api|spec|api-docs)$/i.test(file) ? file : url.hostname;
  }
  const file = path.basename(location).replace(/\.(json|ya?ml)$/i, "");
  return file === "" ? "API" : file;
}

/**
 * Server URLs without a scheme and host (`/v2`, `../api`) name a place relative to the document's URL; each becomes
 * absolute, with the document's port kept. Templates (`{scheme}://…`) are left alone.
 */
function resolveRelativeServers(document: OpenApiDocument, location: string, notes: string[]): void {
  const resolved = new Set<string>();
  const fix = (servers: unknown): void => {
    if (!Array.isArray(servers)) return;
    for (const server of servers) {
      if (typeof server !== "object" || server === null || typeof server.url !== "string") continue;
      const absolute = resolveServerUrl(server.url, location);
      if (absolute !== server.url) {
        resolved.add(`${server.url} → ${absolute}`);
        server.url = absolute;
      }
    }
  };
  fix(document.servers);
  for (const item of Object.values(document.paths ?? {})) {
    if (typeof item !== "object" || item === null) continue;
    const record = item as Record<string, unknown>;
    fix(record.servers);
    for (const value of Object.values(record)) {
      if (typeof value === "object" && value !== null && !Array.isArray(value)) fix((value as Record<string, unknown>).servers);
    }
  }
  for (const line of resolved) notes.push(`relative server URL resolved against the document's URL: ${line}`);
}

/** `url` made absolute against `base` (an http(s) URL) when it is relative; `{variables}` survive as they are. */
export function resolveServerUrl(url: string, base: string): string {
  const trimmed = url.trim();
  if (/^[a-z][a-z0-9+.-]*:/i.test(trimmed) || trimmed.startsWith("{")) return url;
  try {
    // new URL() would percent-encode the braces of `{variable}`; they are put back.
    return new URL(trimmed === "" ? "." : trimmed, base).href.replace(/%7B/gi, "{").replace(/%7D/gi, "}");
  } catch {
    return url;
  }
}

/**
 * Every object whose `$ref` names another file or URL (`#…` pointers are internal). Examples are literal values, so a
 * `$ref` key inside one does not count (GitHub's descriptions have some), unless `inExamples`: the bundler follows them.
 */
function externalRefsOf(document: unknown, inExamples = false): Array<Record<string, unknown> & { $ref: string }> {
  const found: Array<Record<string, unknown> & { $ref: string }> = [];
  const stack: unknown[] = [document];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== "object" || value === null || seen.has(value)) continue;
    seen.add(value);
    if (Array.isArray(value)) {
      for (const item of value) if (typeof item === "object" && item !== null) stack.push(item);
      continue;
    }
    const record = value as Record<string, unknown>;
    if (typeof record.$ref === "string" && !record.$ref.startsWith("#")) found.push(record as Record<string, unknown> & { $ref: string });
    for (const key in record) {
      const child = record[key];
      if (key === "example" && !inExamples) continue;
      if (key === "examples" && !inExamples && typeof child === "object" && child !== null && !Array.isArray(child)) {
        // Example Objects: their `value` is literal, the rest (a `$ref` to a shared example) is not.
        for (const example of Object.values(child)) {
          if (typeof example === "object" && example !== null && typeof (example as Record<string, unknown>).$ref === "string") stack.push({ $ref: (example as Record<string, unknown>).$ref });
        }
        continue;
      }
      if (typeof child === "object" && child !== null) stack.push(child);
    }
  }
  return found;
}

/**
 * The document with its external `$ref`s brought in (internal ones kept). A file or URL that cannot be read does not
 * stop the import: its `$ref`s stay as they are, with a note, and what needs them is left out by the mapper.
 */
async function bundleExternalRefs(document: Record<string, unknown>, location: string, source: string, readerOptions: object, notes: string[]): Promise<unknown> {
  const bundle = (parser: SwaggerParser) => (parser.bundle as (...args: unknown[]) => Promise<unknown>)(location, document, readerOptions);
  const count = externalRefsOf(document).length;
  const brought = () => notes.push(`${count} external $ref${count === 1 ? " was" : "s were"} brought into the document`);
  try {
    const bundled = await bundle(new LenientParser());
    brought();
    return bundled;
  } catch (err) {
    const unreadable = await unreadableSources(document, location, readerOptions);
    if (unreadable.size === 0) throw new OpenApiImportError(`cannot bring in the external $refs of ${source}: ${messageOf(err)}`, { cause: err });
    // The $refs into what cannot be read point at a placeholder while the rest is bundled, then are put back.
    const placeholder = "x-nodefabric-unreadable";
    const real = new Set<object>(externalRefsOf(document));
    const parked: Array<[Record<string, unknown>, string]> = [];
    for (const ref of externalRefsOf(document, true)) {
      if (unreadable.has(refTarget(ref.$ref, location))) {
        parked.push([ref, ref.$ref]);
        ref.$ref = `#/${placeholder}`;
      }
    }
    document[placeholder] = {};
    let bundled: unknown;
    try {
      bundled = externalRefsOf(document, true).length > 0 ? await bundle(new LenientParser()) : document;
    } catch (again) {
      throw new OpenApiImportError(`cannot bring in the external $refs of ${source}: ${messageOf(again)}`, { cause: again });
    } finally {
      for (const [ref, original] of parked) ref.$ref = original;
      delete document[placeholder];
      delete (bundled as Record<string, unknown> | undefined)?.[placeholder];
    }
    // Only $refs that mean one are reported (not those inside examples).
    const missing = parked.filter(([ref]) => real.has(ref));
    const names = [...new Set(missing.map(([, original]) => path.basename(refTarget(original, location))))];
    const n = missing.length;
    if (n > 0) notes.push(`${n} $ref${n === 1 ? "" : "s"} name${n === 1 ? "s" : ""} what cannot be read (${names.join(", ")}); ${n === 1 ? "it is" : "they are"} left as ${n === 1 ? "it is" : "they are"}`);
    if (count > n) notes.push(`${count - n} external $ref${count - n === 1 ? " was" : "s were"} brought into the document`);
    return bundled;
  }
}

/** The files and URLs the document's external `$ref`s name that cannot be read (from a resolve that goes on after errors). */
async function unreadableSources(document: Record<string, unknown>, location: string, readerOptions: object): Promise<Set<string>> {
  const unreadable = new Set<string>();
  const parser = new LenientParser();
  try {
    await (parser.resolve as (...args: unknown[]) => Promise<unknown>)(location, document, { ...readerOptions, continueOnError: true });
  } catch {
    // What was read and what was not is in $refs either way.
  }
  // A file that could not be read holds its error as its value.
  for (const [file, value] of Object.entries(parser.$refs.values())) {
    if (value instanceof Error) unreadable.add(refTarget(file, location));
  }
  return unreadable;
}

/** The file or URL a `$ref` names, without its pointer, as an absolute path or URL. */
function refTarget(ref: string, base: string): string {
  const withoutHash = ref.split("#")[0];
  if (/^https?:\/\//i.test(base) || /^https?:\/\//i.test(withoutHash)) return new URL(withoutHash, base).href;
  return path.resolve(path.dirname(base), withoutHash);
}

function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "string") return value.trim() === "" ? "an empty file" : "plain text";
  return `a ${typeof value}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
