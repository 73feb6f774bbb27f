/**
 * A whole fabric for the MCP server's tests: the seven services in this process on ephemeral loopback ports, the demo
 * handlers, and this plugin loaded from source; and the official MCP client connected to its /mcp, in either era.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { RunningFabric } from "../../../../core/src/fabric.js";
import { startPluginFabric } from "../../../../core/test/support/plugin-fabric.js";
import mcpPlugin from "../../src/index.js";

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

export async function startMcpFabric(o: McpFabricOptions = {}): Promise<McpFabric> {
  const dataDir = o.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "nf-mcp-"));
  const started = await startPluginFabric({
    plugin: { definition: mcpPlugin, source: "@nodefabric/plugin-mcp", file: path.join(pluginDir, "src/index.ts") },
    ...(o.mcp ? { options: o.mcp } : {}),
    ...(o.auth ? { auth: o.auth } : {}),
    ...(o.handlers ? { handlers: o.handlers } : {}),
    ...(o.policy ? { policy: o.policy } : {}),
    ...(o.extraFlags ? { extraFlags: o.extraFlags } : {}),
    ...(o.registryToken ? { registryToken: o.registryToken } : {}),
    dataDir,
  });
  const mcpPath = (o.mcp?.path as string | undefined) ?? "/mcp";
  return {
    fabric: started.fabric,
    gateway: started.gateway,
    mcpUrl: `${started.gateway}${mcpPath}`,
    dataDir,
    close: async () => {
      await started.close();
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
