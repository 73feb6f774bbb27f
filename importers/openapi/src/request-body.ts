/**
 * An operation's request body as the `body` input and how it is sent: JSON first, then a form, multipart (files as
 * base64), text, and anything else as base64 bytes.
 */
import { base64Rules, type OperationBody, type ParameterStyle } from "@nodefabric/sdk";
import { isRecord } from "./json-values.js";
import type { MapContext } from "./map-context.js";
import { isJsonMediaType, isTextMediaType } from "./media-types.js";
import { STYLES_BY_LOCATION } from "./parameters.js";
import type { RefFollower } from "./refs.js";
import { describesOnlyObjects, type DefsCollector } from "./schema-defs.js";
import type { SchemaObject } from "./types.js";

/** The `body` input and how it is sent; undefined when the operation takes no body. */
export function requestBodyOf(operation: Record<string, unknown>, ctx: MapContext, notes: string[], defs: DefsCollector): { schema: SchemaObject; spec: OperationBody } | { reason: string } | undefined {
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
