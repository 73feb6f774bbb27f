/**
 * The answer that becomes an operation's outputs: the first 2xx (then `2XX`, then `default`) with JSON, as the
 * object it describes or `{ result }`; a text answer as `{ result: string }`; otherwise `{}`.
 */
import type { HttpOperationDescriptor } from "@nodefabric/sdk";
import { isRecord } from "./json-values.js";
import type { MapContext } from "./map-context.js";
import { isJsonMediaType, isTextMediaType } from "./media-types.js";
import { DefsCollector, describesOnlyObjects } from "./schema-defs.js";
import type { SchemaObject } from "./types.js";

/** The answer that becomes the outputs: its status, how it is read, and the output schema. */
export function responseOf(operation: Record<string, unknown>, ctx: MapContext, notes: string[]): { response: HttpOperationDescriptor["response"]; outputSchema: SchemaObject } {
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
