/**
 * A fabric for the console's server tests: the services the page talks to (registry, coordinator, gateway) on
 * ephemeral loopback ports, with this plugin loaded from source (the page itself must be built).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../../../core/src/config.js";
import { startFabric, type RunningFabric } from "../../../../core/src/fabric.js";
import type { LoadedPlugin } from "../../../../core/src/plugin-loader.js";
import consolePlugin from "../../src/index.js";

const repoRoot = fileURLToPath(new URL("../../../..", import.meta.url));
const pluginDir = fileURLToPath(new URL("../..", import.meta.url));
const loaded: LoadedPlugin = { definition: consolePlugin, source: "@nodefabric/plugin-console", file: path.join(pluginDir, "src/index.ts"), discovered: false };

/** Starts it; `auth` is what fabric.config.json takes under `auth`. */
export async function startConsoleFabric(auth?: Record<string, unknown>): Promise<RunningFabric> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-console-"));
  const flags: Record<string, unknown> = { port_base: 0, data_dir: dataDir, log_level: "silent", policy_checks: false };
  if (auth) flags.auth = auth;
  const config = loadConfig({ cwd: repoRoot, env: {}, flags: flags as never });
  return startFabric(config, ["node-registry", "run-coordinator", "run-gateway"], { plugins: [loaded] });
}

/** The CSP every console response carries, for a registry (and an identity provider) at these origins. */
export function expectedCsp(...connect: string[]): string {
  return `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ${connect.join(" ")}; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'`;
}
