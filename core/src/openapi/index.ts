/**
 * @nodefabric/core/openapi: reads OpenAPI 2.0, 3.0 and 3.1 documents and makes node types of their operations.
 */
export { loadOpenApi, OpenApiImportError } from "./load.js";
export { mapOpenApi } from "./map.js";
export { createSchemaConverter, DEFAULT_MAX_SCHEMA_BYTES, type SchemaConverter, type SchemaConverterOptions, type SchemaDirection } from "./schema.js";
export { translatePattern, type TranslatedPattern } from "./regex.js";
export { sampleFor, type SampleOptions, type SampleResult } from "./samples.js";
export type * from "./types.js";
