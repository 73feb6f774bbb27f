/**
 * @nodefabric/plugin-mcp: the MCP server on the Run Gateway. Every node type the caller may run is an MCP tool, and
 * every tool call is a durable run, started through the gateway's own run logic with the caller's identity.
 */
import { readFileSync } from "node:fs";
import { definePlugin } from "@nodefabric/core";
import { mcpRoutes } from "./mcp-routes.js";
import { mcpSettings } from "./settings.js";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { name: string; version: string };

export { mcpRoutes, type McpRoutesOptions } from "./mcp-routes.js";
export { MCP_SETTINGS, mcpSettings, type McpSettings } from "./settings.js";
export { toolOf, annotationsOf, resultOfRun } from "./tools.js";

// The banner's line follows FABRIC_MCP_PATH; a path that is not valid stops the start with the reason.
const path = mcpSettings().path;

export default definePlugin({
  name: pkg.name,
  version: pkg.version,
  services: [{ service: "run-gateway", plugin: mcpRoutes, options: { serverVersion: pkg.version } }],
  links: [{ label: "mcp", service: "run-gateway", path }],
});
