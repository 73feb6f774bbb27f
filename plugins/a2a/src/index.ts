/**
 * @nodefabric/plugin-a2a: the A2A server on the Run Gateway. Every node type the caller may run is an agent skill,
 * and every A2A task is a durable run, started and followed through the gateway's own run logic with the caller's
 * identity (docs/a2a.md).
 */
import { readFileSync } from "node:fs";
import { definePlugin } from "@nodefabric/core";
import { a2aRoutes } from "./a2a-routes.js";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { name: string; version: string };

export { a2aRoutes, type A2aRoutesOptions } from "./a2a-routes.js";
export { A2A_SETTINGS, a2aSettings, type A2aSettings } from "./settings.js";

export default definePlugin({
  name: pkg.name,
  version: pkg.version,
  services: [{ service: "run-gateway", plugin: a2aRoutes, options: { serverVersion: pkg.version } }],
  links: [{ label: "a2a", service: "run-gateway", path: "/.well-known/agent-card.json" }],
});
