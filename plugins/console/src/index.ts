/**
 * @nodefabric/plugin-console: the run console in the browser. It adds the page and its configuration to the Run
 * Gateway (/console/), CORS for that page to the Node Registry, and the console's URL to the start banner.
 */
import { readFileSync } from "node:fs";
import { definePlugin } from "@nodefabric/core";
import { consoleRoutes } from "./console-routes.js";
import { registryCors } from "./registry-cors.js";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { name: string; version: string };

export { consoleRoutes, consoleConfig, type ConsoleConfigBody, type ConsoleRoutesOptions } from "./console-routes.js";
export { TRACE_URL_VARIABLE } from "./trace-url.js";
export { CONSOLE_SETTINGS, traceUrlTemplate } from "./settings.js";
export { registryCors, allowedOrigins, type RegistryCorsOptions } from "./registry-cors.js";
export { contentSecurityPolicy } from "./security-headers.js";

export default definePlugin({
  name: pkg.name,
  version: pkg.version,
  services: [
    { service: "run-gateway", plugin: consoleRoutes },
    { service: "node-registry", plugin: registryCors },
  ],
  links: [{ label: "console", service: "run-gateway", path: "/console/" }],
});
