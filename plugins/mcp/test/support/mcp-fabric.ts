/**
 * A whole fabric for the MCP server's tests: the seven services in this process on ephemeral loopback ports, the demo
 * handlers, and this plugin loaded from source; and the official MCP client connected to its /mcp, in either era.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { loadConfig } from "../../../../core/src/config.js";
import { startFabric, type RunningFabric } from "../../../../core/src/fabric.js";
import type { LoadedPlugin } from "../../../../core/src/plugin-loader.js";
import { SERVICE_NAMES } from "../../../../core/src/http/service.js";
import mcpPlugin from "../../src/index.js";

const repoRoot = fileURLToPath(new URL("../../../..", import.meta.url));
const pluginDir = fileURLToPath(new URL("../..", import.meta.url));

export interface McpFabric {
  fabric: RunningFabric;
  gateway: string;
  mcpUrl: string;
  dataDir: string;
  close(): Promise<void>;
}

export interface McpFabricOptions {
  /** `auth` as fabric.config.json takes it. */
  auth?: Record<string, unknown>;
  /** Options of the plugin's gateway entry (path, include, exclude, mode…). */
  mcp?: Record<string, unknown>;
  /** Handler packages or paths. */
  handlers?: string[];
  /** An existing data folder (to restart a fabric on it). */
  dataDir?: string;
  policy?: string;
  extraFlags?: Record<string, unknown>;
  /** With auth: a token the registry accepts, to wait for the demo node types. */
  registryToken?: string;
}

/** Resolves once the atomic executor's node types are in the registry. */
async function ready(gatewayRegistry: string, id: string, token?: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const res = await fetch(`${gatewayRegistry}/v1/node-types/${id}`, token ? { headers: { authorization: `Bearer ${token}` } } : {}).catch(() => undefined);
    if (res?.status === 200) return;
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new Error(`${id} never reached the registry`);
}

export async function startMcpFabric(o: McpFabricOptions = {}): Promise<McpFabric> {
  const dataDir = o.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "nf-mcp-"));
  const flags: Record<string, unknown> = {
    port_base: 0,
    data_dir: dataDir,
    log_level: "silent",
    policy_checks: o.policy !== undefined,
    handlers: o.handlers ?? ["@nodefabric/handler-demo"],
    ...(o.policy ? { policy: o.policy } : {}),
    ...o.extraFlags,
  };
  if (o.auth) flags.auth = o.auth;
  const config = loadConfig({ cwd: repoRoot, env: {}, flags: flags as never });
  const definition = o.mcp ? { ...mcpPlugin, services: mcpPlugin.services!.map((s) => ({ ...s, options: { ...s.options, ...o.mcp } })) } : mcpPlugin;
  const loaded: LoadedPlugin = { definition: definition as never, source: "@nodefabric/plugin-mcp", file: path.join(pluginDir, "src/index.ts"), discovered: false };
  const fabric = await startFabric(config, SERVICE_NAMES, { plugins: [loaded] });
  const url = (n: string) => fabric.services.find((s) => s.name === n)!.url;
  await ready(url("node-registry"), "demo.echo", o.registryToken);
  const gateway = url("run-gateway");
  const mcpPath = (o.mcp?.path as string | undefined) ?? "/mcp";
  return {
    fabric,
    gateway,
    mcpUrl: `${gateway}${mcpPath}`,
    dataDir,
    close: async () => {
      await fabric.close();
      if (!o.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export type Era = "2025-06-18" | "2025-11-25" | "2026-07-28";

/** The official client, connected to `url` in an era: the 2025 ones by `initialize`, 2026-07-28 pinned. */
export async function connect(url: string, era: Era | "auto" = "2026-07-28", token?: string, capabilities: Record<string, unknown> = {}): Promise<Client> {
  const client = new Client(
    { name: "nodefabric-test", version: "1.0.0" },
    {
      capabilities,
      ...(era === "2026-07-28" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : era === "auto" ? { versionNegotiation: { mode: "auto" } } : {}),
      ...(era.startsWith("2025") ? { supportedProtocolVersions: [era] } : {}),
    } as never,
  );
  const transport = new StreamableHTTPClientTransport(new URL(url), token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : {});
  await client.connect(transport as never);
  return client;
}
