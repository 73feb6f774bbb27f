/**
 * @nodefabric/core/openapi: reads OpenAPI 2.0, 3.0 and 3.1 documents and makes node types of their operations.
 */
export type * from "./types.js";
