/** The context every part of mapping one operation reads. */
import type { RefFollower } from "./refs.js";
import type { SchemaChecker } from "./schema-checker.js";
import type { SecurityMapper } from "./security.js";
import type { OpenApiDocument, SchemaObject } from "./types.js";

/** What mapping one operation reads: the document, its converters and mappers, and the choices made for all. */
export interface MapContext {
  document: OpenApiDocument;
  title: string;
  apiVersion: string;
  follow: RefFollower;
  convert: (schema: unknown, direction: "request" | "response", notes: string[]) => SchemaObject;
  security: SecurityMapper;
  baseUrlSetting: string;
  variableSettings: Map<string, string>;
  location: string | undefined;
  nodeTypeVersion: string;
  checker: SchemaChecker;
}
