/**
 * @nodefabric/importer-openapi: an OpenAPI 3.0, 3.1 or Swagger 2.0 document in (loadOpenApi), one atomic node type
 * per operation out, run by `http.request` or by a generated package (mapOpenApi), plus what was left out and why.
 * `fabric node-types import --from-openapi` loads it only when asked; `npm create fabric-handler -- --from-openapi`
 * bundles it. What the node types need at run time (the HttpOperationDescriptor and its runtime) is in @nodefabric/sdk.
 */
export { loadOpenApi, OpenApiImportError } from "./load.js";
export { mapOpenApi } from "./map.js";
export { createSchemaConverter, DEFAULT_MAX_SCHEMA_BYTES, type SchemaConverter, type SchemaConverterOptions, type SchemaDirection } from "./schema.js";
export { translatePattern, type TranslatedPattern } from "./regex-dialects.js";
/** Sample values of schemas; they live in @nodefabric/sdk/samples and are re-exported for the importer's users. */
export { sampleFor, type SampleOptions, type SampleResult } from "@nodefabric/sdk/samples";
export type * from "./types.js";
