/**
 * A completed remote task's artifacts as a NodeRun's outputs (docs/a2a-import.md):
 * - the data parts that are JSON objects, merged in order (a later key wins): the outputs themselves;
 * - data parts that are not objects: `data`, a list;
 * - text parts: `text`, joined by blank lines (unless a data part already gave a `text`);
 * - file parts: `files`, each `{ name?, media_type?, url }` or `{ name?, media_type?, bytes }` (base64).
 */
import type { JsonObject } from "@nodefabric/sdk";
import type { Artifact, Message, Part } from "@a2a-js/sdk";

/** The output schema of a node type made from a skill that gives none: any of the keys above. */
export const DEFAULT_OUTPUT_SCHEMA: Record<string, unknown> = {
  type: "object",
  description: "What the agent's artifacts hold: the fields of their data parts, their text parts as text, their files as files.",
  properties: {
    text: { type: "string" },
    data: { type: "array" },
    files: { type: "array", items: { type: "object" } },
  },
};

/** The input schema of a node type made from a skill that gives none and takes data: any object, `text` a string. */
export const DEFAULT_DATA_INPUT_SCHEMA: Record<string, unknown> = {
  type: "object",
  description: "Sent to the agent as one data part; a text for the agent goes in text.",
  properties: { text: { type: "string" } },
};

/** The input schema of a node type made from a skill that takes text only. */
export const TEXT_INPUT_SCHEMA: Record<string, unknown> = {
  type: "object",
  description: "Sent to the agent as one text part.",
  properties: { text: { type: "string" } },
  required: ["text"],
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The text of a message's text parts. */
export function textOfMessage(m: Message): string {
  return m.parts
    .flatMap((p) => (p.content?.$case === "text" ? [p.content.value] : []))
    .join("\n")
    .trim();
}

/** The outputs the parts of `artifacts` make. */
export function outputsOf(artifacts: Artifact[]): JsonObject {
  const merged: Record<string, unknown> = {};
  const texts: string[] = [];
  const data: unknown[] = [];
  const files: Record<string, unknown>[] = [];
  const parts: Part[] = artifacts.flatMap((a) => a.parts ?? []);
  for (const p of parts) {
    const c = p.content;
    if (!c) continue;
    if (c.$case === "data") {
      if (isObject(c.value)) Object.assign(merged, c.value);
      else data.push(c.value);
    } else if (c.$case === "text") texts.push(c.value);
    else {
      const file: Record<string, unknown> = {};
      if (p.filename) file.name = p.filename;
      if (p.mediaType) file.media_type = p.mediaType;
      if (c.$case === "url") file.url = c.value;
      else file.bytes = Buffer.from(c.value).toString("base64");
      files.push(file);
    }
  }
  if (texts.length > 0 && merged.text === undefined) merged.text = texts.join("\n\n");
  if (data.length > 0 && merged.data === undefined) merged.data = data;
  if (files.length > 0 && merged.files === undefined) merged.files = files;
  return merged as JsonObject;
}
