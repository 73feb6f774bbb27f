/**
 * The importers, as the `fabric` command reaches them: each takes an external description of tools and gives NodeTypes
 * as data, plus what was left out and why (ImportResult of @nodefabric/sdk). Each lives in a package of its own under
 * importers/ and is loaded only when a command asks for it, so a fabric's install carries none of them.
 * - OpenAPI (`--from-openapi`): @nodefabric/importer-openapi; a document in, one node type per operation, run by
 *   `http.request`.
 * - MCP (`--from-mcp`): @nodefabric/importer-mcp; a server in (a URL or a command), one node type per tool, run by
 *   `mcp.call`.
 * - A2A (`--from-a2a`): @nodefabric/importer-a2a; an Agent Card in (its URL), one node type per skill, run by
 *   `a2a.send`.
 * A further importer follows the same shape: a package with a loader for its source and a mapper to NodeTypes with
 * `left out` reasons, the template definition that runs them, and a file here that loads it.
 */
export { loadImporter, ImporterMissingError, type ImporterPackage } from "./load-importer.js";
export { loadOpenApiImporter, OPENAPI_IMPORTER, type OpenApiImporter, type OpenApiMapping } from "./openapi.js";
export { loadMcpImporter, MCP_IMPORTER, type McpImporter, type McpImportResult } from "./mcp.js";
export { loadA2aImporter, A2A_IMPORTER, type A2aImporter, type A2aImportResult } from "./a2a.js";
