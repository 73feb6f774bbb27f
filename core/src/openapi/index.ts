/**
 * @nodefabric/core/openapi: reads OpenAPI 2.0, 3.0 and 3.1 documents and makes node types of their operations.
 */
export { loadOpenApi, OpenApiImportError } from "./load.js";
export { mapOpenApi } from "./map.js";
export { createSchemaConverter } from "./schema.js";
export { translatePattern } from "./regex.js";
export { sampleFor } from "./samples.js";
export type * from "./types.js";
