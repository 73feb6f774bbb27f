/**
 * A whole fabric for a gateway plugin's tests (the MCP and A2A servers): the seven services in this process on
 * ephemeral loopback ports, the demo handlers (or others), and the plugin loaded from its source with the entry
 * options the test gives; resolves once the demo node types are in the registry.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../src/config.js";
import { startFabric, type RunningFabric } from "../../src/fabric.js";
import type { PluginDefinition } from "../../src/plugin.js";
import type { LoadedPlugin } from "../../src/plugin-loader.js";
import { SERVICE_NAMES } from "../../src/http/service.js";

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));

export interface PluginFabric {
  fabric: RunningFabric;
  gateway: string;
  dataDir: string;
  close(): Promise<void>;
}

export interface PluginFabricOptions {
  /** The plugin, its package name and the file it was loaded from. */
  plugin: { definition: PluginDefinition; source: string; file: string };
  /** Options of the plugin's gateway entry, over its own. */
  options?: Record<string, unknown>;
  /** `auth` as fabric.config.json takes it. */
  auth?: Record<string, unknown>;
  /** Handler packages or paths (default: the demo handlers). */
  handlers?: string[];
  /** An existing data folder (to restart a fabric on it); else a new one, deleted by close. */
  dataDir?: string;
  /** A Cedar policy file (turns the coordinator's policy checks on). */
  policy?: string;
  extraFlags?: Record<string, unknown>;
  /** With auth: a token the registry accepts, to wait for the demo node types. */
  registryToken?: string;
}

/** Resolves once `id` is in the registry. */
async function registered(registry: string, id: string, token?: string): Promise<void> {
  const headers = token ? { authorization: `Bearer ${token}` } : undefined;
  for (let tries = 0; tries < 300; tries++) {
    const found = await fetch(`${registry}/v1/node-types/${id}`, { headers }).then((r) => r.status === 200, () => false);
    if (found) return;
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new Error(`${id} never reached the registry`);
}

export async function startPluginFabric(o: PluginFabricOptions): Promise<PluginFabric> {
  const dataDir = o.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "nf-plugin-"));
  const flags: Record<string, unknown> = {
    port_base: 0,
    data_dir: dataDir,
    log_level: "silent",
    policy_checks: o.policy !== undefined,
    handlers: o.handlers ?? ["@nodefabric/handler-demo"],
    ...(o.policy ? { policy: o.policy } : {}),
    ...(o.auth ? { auth: o.auth } : {}),
    ...o.extraFlags,
  };
  const config = loadConfig({ cwd: repoRoot, env: {}, flags: flags as never });
  const { definition } = o.plugin;
  const withOptions = o.options ? { ...definition, services: definition.services!.map((s) => ({ ...s, options: { ...s.options, ...o.options } })) } : definition;
  const loaded: LoadedPlugin = { definition: withOptions as never, source: o.plugin.source, file: o.plugin.file, discovered: false };
  const fabric = await startFabric(config, SERVICE_NAMES, { plugins: [loaded] });
  const url = (n: string) => fabric.services.find((s) => s.name === n)!.url;
  await registered(url("node-registry"), "demo.echo", o.registryToken);
  return {
    fabric,
    gateway: url("run-gateway"),
    dataDir,
    close: async () => {
      await fabric.close();
      if (!o.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
