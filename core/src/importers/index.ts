/**
 * The importers: each takes an external description of tools and gives NodeTypes as data, plus what was left out and
 * why. `fabric node-types import` publishes what they give; `npm create fabric-handler` writes it into a package.
 * - OpenAPI (`--from-openapi`): a document in, one node type per operation, run by `http.request` (../openapi).
 * - MCP (`--from-mcp`): a server in (a URL or a command), one node type per tool, run by `mcp.call`; the importer
 *   lives in `@nodefabric/handler-mcp` and is loaded only when asked for (./mcp.ts).
 * A third importer follows the same shape: a loader for its source, a mapper to NodeTypes with `left out` reasons,
 * and the template definition that runs them.
 */
export { loadOpenApi, mapOpenApi, OpenApiImportError, type OpenApiMapping } from "../openapi/index.js";
export { loadMcpImporter, McpImporterMissingError, MCP_HANDLER_PACKAGE, type McpImporter, type McpImportResult } from "./mcp.js";
