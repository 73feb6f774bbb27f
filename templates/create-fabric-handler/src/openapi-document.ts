/**
 * Reads an OpenAPI document from a file or an http(s) URL, JSON or YAML, with every `$ref` resolved.
 */
import path from "node:path";
import SwaggerParser from "@apidevtools/swagger-parser";
import { ScaffoldError } from "./errors.js";
import { assertOpenApi3, type OpenApiDocument } from "./openapi-to-handlers.js";

/** A dereferenced OpenAPI 3.0/3.1 document and where it was read from (an absolute path or a URL). */
export interface LoadedOpenApiDocument {
  document: OpenApiDocument;
  location: string;
}

/** Reads and dereferences the document at `source` (a path relative to `cwd`, or a URL); refuses Swagger 2. */
export async function loadOpenApiDocument(source: string, cwd: string): Promise<LoadedOpenApiDocument> {
  const isUrl = /^https?:\/\//i.test(source);
  const location = isUrl ? source : path.resolve(cwd, source);
  // The resolver refuses loopback and private hosts by default (a guard for servers resolving untrusted documents);
  // here the person at the keyboard named the URL, often a local dev server, so it is fetched as asked.
  const options = isUrl ? { resolve: { http: { safeUrlResolver: false } } } : {};
  let parsed: unknown;
  try {
    parsed = await SwaggerParser.parse(location, options);
  } catch (err) {
    throw new ScaffoldError(`cannot read the OpenAPI document ${source}: ${messageOf(err)}`, { cause: err });
  }
  // Checked before dereferencing, so a Swagger 2 document is refused by name rather than by a resolver error.
  assertOpenApi3(parsed, source);
  let document: unknown;
  try {
    document = await SwaggerParser.dereference(location, options);
  } catch (err) {
    throw new ScaffoldError(`cannot resolve the $refs of ${source}: ${messageOf(err)}`, { cause: err });
  }
  assertOpenApi3(document, source);
  if (isUrl) restoreServerPort(document, location);
  return { document, location };
}

/**
 * swagger-parser resolves a server URL such as `/v2` against the document's URL but drops its port
 * (`http://localhost:8080/spec.yaml` gives `http://localhost/v2`); this puts the port back.
 */
function restoreServerPort(document: OpenApiDocument, location: string): void {
  const url = new URL(location);
  if (url.port === "") return;
  const portless = `${url.protocol}//${url.hostname}/`;
  for (const server of document.servers ?? []) {
    if (typeof server.url === "string" && server.url.startsWith(portless)) server.url = `${url.origin}/${server.url.slice(portless.length)}`;
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
