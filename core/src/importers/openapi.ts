/**
 * The OpenAPI importer as `fabric node-types import --from-openapi` uses it: @nodefabric/importer-openapi, loaded
 * when asked for. It brings the OpenAPI parser and the Swagger 2.0 converter with it; core depends on none of them.
 */
import type { NodeType } from "@nodefabric/schemas";
import { loadImporter, type ImporterPackage } from "./load-importer.js";

/** The package that holds the OpenAPI importer. */
export const OPENAPI_IMPORTER: ImporterPackage = { name: "@nodefabric/importer-openapi", imports: "an OpenAPI document", runBy: "http.request of @nodefabric/handler-http" };

/** What `mapOpenApi` gives (OpenApiMapping of @nodefabric/importer-openapi), as far as the command reads it. */
export interface OpenApiMapping {
  title: string;
  apiVersion: string;
  defaultBaseUrl: string;
  operations: Array<{ nodeType: NodeType }>;
  leftOut: Array<{ method: string; path: string; operationId?: string; reason: string }>;
  secrets: Array<{ name: string; description: string; default?: string; scheme?: string }>;
  settings: Array<{ name: string; description: string; default?: string }>;
  notes: string[];
}

/** The importer's functions this fabric uses. */
export interface OpenApiImporter {
  loadOpenApi(source: string, options: { cwd?: string; onProgress?: (message: string) => void }): Promise<{ document: { info?: { title?: string } }; location: string; notes: string[] }>;
  mapOpenApi(
    document: unknown,
    options: { prefix: string; settingsPrefix: string; include?: string[]; exclude?: string[]; location?: string; nodeTypeVersion?: string; onProgress?: (message: string) => void },
  ): OpenApiMapping;
  OpenApiImportError: new (message: string) => Error;
}

/** Loads the OpenAPI importer (see loadImporter). */
export function loadOpenApiImporter(cwd?: string): Promise<OpenApiImporter> {
  return loadImporter<OpenApiImporter>(OPENAPI_IMPORTER, cwd);
}
