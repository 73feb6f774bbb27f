/**
 * The MCP server's settings: the entry's options (for a fabric built in code) over FABRIC_MCP_* environment
 * variables, over the defaults, all from one table (MCP_SETTINGS; docs/configuration.md is generated from it).
 */
import { defineSettings, setting, type SettingsValues } from "@nodefabric/core";

function versionsOf(text: string, variable: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const at = item.lastIndexOf("@");
    if (at <= 0 || at === item.length - 1) throw new Error(`${variable} holds ${JSON.stringify(item)}: write node_type_id@version`);
    out[item.slice(0, at)] = item.slice(at + 1);
  }
  return out;
}

/** The MCP server's settings, each also an option of the entry (`mcpRoutes`) named as here. */
export const MCP_SETTINGS = defineSettings(
  "@nodefabric/plugin-mcp",
  {
    path: setting.string({ doc: "Where MCP is served on the gateway.", env: "FABRIC_MCP_PATH", default: "/mcp" }),
    include: setting.list({ doc: "node_type_id patterns (`*` any characters) to expose; none: every one.", env: "FABRIC_MCP_INCLUDE", default: [] }),
    exclude: setting.list({ doc: "node_type_id patterns never exposed; they win over include.", env: "FABRIC_MCP_EXCLUDE", default: [] }),
    versions: setting.custom<Record<string, string>>()({
      doc: 'A version to expose instead of the latest, by node_type_id ("id@1.2.0,other@2.0.0").',
      env: "FABRIC_MCP_VERSIONS",
      default: {},
      parse: versionsOf,
      schema: { type: "object", additionalProperties: { type: "string" } },
    }),
    mode: setting.oneOf(["tools", "search"], { doc: "`tools` (each node type a tool) or `search` (a search tool and a run tool).", env: "FABRIC_MCP_MODE", default: "tools" }),
    pageSize: setting.integer({ doc: "Tools per tools/list page.", env: "FABRIC_MCP_PAGE_SIZE", default: 100, min: 1, max: 1000 }),
    refreshMs: setting.integer({ doc: "How long one read of the registry is reused (ms).", env: "FABRIC_MCP_REFRESH_MS", default: 2000, min: 0, max: 3_600_000 }),
    allowedHosts: setting.list({ doc: "Hostnames the Host header may name besides loopback and the gateway's own.", env: "FABRIC_MCP_ALLOWED_HOSTS", default: [] }),
    allowedOrigins: setting.list({ doc: "Hostnames an Origin header may name besides loopback and the gateway's own.", env: "FABRIC_MCP_ALLOWED_ORIGINS", default: [] }),
    authorizationServers: setting.list({ doc: "Authorization servers named in the protected-resource metadata.", env: "FABRIC_MCP_AUTHORIZATION_SERVERS", default: [] }),
    taskAfterSeconds: setting.integer({ doc: "On 2026-07-28 with the tasks extension, how long a call may run before it becomes a task (s).", env: "FABRIC_MCP_TASK_AFTER_S", default: 1, min: 0, max: 60 }),
    policyFilter: setting.boolean({
      doc: "Ask the PDP which node types each caller may start, and list only those (`off`, `false`, `0` or `no` turns it off).",
      env: "FABRIC_MCP_POLICY_FILTER",
      default: true,
      parse: (text) => !/^(off|false|0|no)$/i.test(text),
    }),
    progressIntervalMs: setting.integer({ doc: "Least time between two progress notifications of one call (ms).", env: "FABRIC_MCP_PROGRESS_INTERVAL_MS", default: 100, min: 0, max: 60_000 }),
  },
  { intro: "The MCP server on the gateway ([mcp.md](mcp.md)). A fabric built in code gives the same settings as options of `mcpRoutes`, over these variables." },
);

export type McpSettings = SettingsValues<(typeof MCP_SETTINGS)["fields"]> & {
  /** Longest one `Prefer: wait` of a blocking call (s, at most 60); an option only. */
  waitSeconds: number;
};

/** The entry's options (for a fabric built in code) over the FABRIC_MCP_* variables, over the defaults. */
export function mcpSettings(options: Partial<McpSettings> = {}, env: NodeJS.ProcessEnv = process.env): McpSettings {
  // Only the settings' own options (an entry's options hold others too), and only those given.
  const given = Object.fromEntries(Object.entries(options).filter(([k, v]) => k in MCP_SETTINGS.fields && v !== undefined)) as Partial<McpSettings>;
  const settings: McpSettings = { ...MCP_SETTINGS.read(env), ...given, waitSeconds: Math.min(60, options.waitSeconds ?? 60) };
  const { path, mode } = settings;
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(path) || path.endsWith("/") && path !== "/") throw new Error(`the MCP path must start with "/" and not end with one, not ${JSON.stringify(path)}`);
  if (mode !== "tools" && mode !== "search") throw new Error(`FABRIC_MCP_MODE must be "tools" or "search", not ${JSON.stringify(mode)}`);
  return settings;
}
