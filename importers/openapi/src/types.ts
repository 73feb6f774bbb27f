/**
 * What the OpenAPI importer reads and makes: shared by `npm create fabric-handler --from-openapi` (a handler package)
 * and `fabric node-types import --from-openapi` (node types published with no code, run by `http.request`).
 */
import type { NodeType } from "@nodefabric/schemas";
import type { HttpOperationDescriptor, ImportResult } from "@nodefabric/sdk";

/** A JSON Schema or OpenAPI Schema Object, as plain data. */
export type SchemaObject = Record<string, unknown>;

/** An OpenAPI 3.0/3.1 document as parsed: internal `$ref`s are kept (never dereferenced into copies). */
export type OpenApiDocument = Record<string, unknown> & {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: Array<{ url: string; description?: string; variables?: Record<string, { default?: unknown; enum?: unknown[]; description?: string }> }>;
  paths?: Record<string, unknown>;
  components?: Record<string, unknown>;
};

/** A document read from a file or URL, with external `$ref`s brought in and Swagger 2.0 converted. */
export interface LoadedOpenApi {
  document: OpenApiDocument;
  /** Absolute path or URL it was read from. */
  location: string;
  /** "2.0" when the document was Swagger 2.0 and was converted to OpenAPI 3.0. */
  convertedFrom?: string;
  /** What the reader noticed and worked around (for the generated README). */
  notes: string[];
}

/** Options of loadOpenApi. */
export interface LoadOpenApiOptions {
  /** Where a relative path starts (default: process.cwd()). */
  cwd?: string;
  /** Called with short progress lines on a long load. */
  onProgress?: (message: string) => void;
}

/** Options of mapOpenApi. */
export interface MapOpenApiOptions {
  /** The part of every node_type_id before the first dot, e.g. `petstore`. */
  prefix: string;
  /** Upper-case prefix of every setting and secret name, e.g. `PETSTORE` (PETSTORE_BASE_URL, PETSTORE_API_KEY…). */
  settingsPrefix: string;
  /** Keep only operations with one of these tags or operationIds (case-insensitive); all when absent or empty. */
  include?: string[];
  /** Leave out operations with one of these tags or operationIds (case-insensitive); listed under leftOut. */
  exclude?: string[];
  /** Where the document came from; a relative server URL is resolved against it when it is an http(s) URL. */
  location?: string;
  /** Version given to every node type (default "1.0.0"). */
  nodeTypeVersion?: string;
  onProgress?: (message: string) => void;
}

/** One operation made into a node type. */
export interface MappedOperation {
  /** An atomic NodeType; `extensions["nodefabric.openapi"]` holds `descriptor`. */
  nodeType: NodeType;
  descriptor: HttpOperationDescriptor;
  tags: string[];
  /** A kebab-case name unique in the mapping, for files (`list-pets`). */
  fileName: string;
  /** What was simplified for this operation (a pattern dropped, a media type chosen…). */
  notes: string[];
}

/** An operation that was not made into a node type, and why. */
export interface LeftOutOperation {
  method: string;
  path: string;
  operationId?: string;
  reason: string;
}

/** A secret or setting the node types read at run time. */
export interface SettingDescription {
  name: string;
  description: string;
  /** Set for settings with a default (server variables, the base URL). */
  default?: string;
  /** The security scheme it belongs to, for secrets. */
  scheme?: string;
}

/** The node types made from a document: the importers' one shape (ImportResult), and what only OpenAPI has. */
export interface OpenApiMapping extends ImportResult<LeftOutOperation> {
  title: string;
  apiVersion: string;
  /** The base URL from `servers[0]` with its variables at their defaults; "" when the document names no absolute URL. */
  defaultBaseUrl: string;
  operations: MappedOperation[];
  /** The node type of each operation, in the same order (`operations[i].nodeType`). */
  nodeTypes: NodeType[];
  leftOut: LeftOutOperation[];
  /** Secrets of the security schemes the operations use. */
  secrets: SettingDescription[];
  /** The base URL setting and one per server variable. */
  settings: SettingDescription[];
  /** Notes on the whole document (converted from Swagger 2.0, patterns translated…). */
  notes: string[];
}
