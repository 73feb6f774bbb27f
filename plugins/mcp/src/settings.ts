/**
 * The MCP server's settings: the entry's options (for a fabric built in code) over FABRIC_MCP_* environment
 * variables, over the defaults.
 */
export interface McpSettings {
  /** Where MCP is served on the gateway (default /mcp). FABRIC_MCP_PATH. */
  path: string;
  /** node_type_id patterns (`*` any characters) to expose; none: every one. FABRIC_MCP_INCLUDE (comma-separated). */
  include: string[];
  /** node_type_id patterns never exposed; they win over include. FABRIC_MCP_EXCLUDE. */
  exclude: string[];
  /** A version to expose instead of the latest, by node_type_id. FABRIC_MCP_VERSIONS ("id@1.2.0,other@2.0.0"). */
  versions: Record<string, string>;
  /** "tools" (each node type a tool) or "search" (a search tool and a run tool). FABRIC_MCP_MODE. */
  mode: "tools" | "search";
  /** Tools per tools/list page (default 100). FABRIC_MCP_PAGE_SIZE. */
  pageSize: number;
  /** How long one read of the registry is reused, in ms (default 2000). FABRIC_MCP_REFRESH_MS. */
  refreshMs: number;
  /** Hostnames the Host header may name besides loopback and the gateway's own. FABRIC_MCP_ALLOWED_HOSTS. */
  allowedHosts: string[];
  /** Hostnames an Origin header may name besides loopback and the gateway's own. FABRIC_MCP_ALLOWED_ORIGINS. */
  allowedOrigins: string[];
  /** Authorization servers named in the protected-resource metadata. FABRIC_MCP_AUTHORIZATION_SERVERS. */
  authorizationServers: string[];
  /** Longest one `Prefer: wait` of a blocking call (s, at most 60). */
  waitSeconds: number;
  /** On 2026-07-28 with the tasks extension, how long a call may run before it becomes a task (s, default 1). FABRIC_MCP_TASK_AFTER_S. */
  taskAfterSeconds: number;
  /** Ask the PDP which node types each caller may start, and list only those (default true). FABRIC_MCP_POLICY_FILTER=off. */
  policyFilter: boolean;
  /** Least time between two progress notifications of one call (ms, default 100). FABRIC_MCP_PROGRESS_INTERVAL_MS. */
  progressIntervalMs: number;
}

const list = (v: string | undefined): string[] | undefined =>
  v === undefined || v.trim() === "" ? undefined : v.split(",").map((s) => s.trim()).filter(Boolean);

const int = (v: string | undefined, name: string, min: number, max: number): number | undefined => {
  if (v === undefined || v.trim() === "") return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(v)}`);
  return n;
};

function versionsOf(v: string[] | undefined): Record<string, string> | undefined {
  if (!v) return undefined;
  const out: Record<string, string> = {};
  for (const item of v) {
    const at = item.lastIndexOf("@");
    if (at <= 0 || at === item.length - 1) throw new Error(`FABRIC_MCP_VERSIONS holds ${JSON.stringify(item)}: write node_type_id@version`);
    out[item.slice(0, at)] = item.slice(at + 1);
  }
  return out;
}

export function mcpSettings(options: Partial<McpSettings> = {}, env: NodeJS.ProcessEnv = process.env): McpSettings {
  const path = options.path ?? env.FABRIC_MCP_PATH ?? "/mcp";
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(path) || path.endsWith("/") && path !== "/") throw new Error(`the MCP path must start with "/" and not end with one, not ${JSON.stringify(path)}`);
  const mode = options.mode ?? (env.FABRIC_MCP_MODE as McpSettings["mode"] | undefined) ?? "tools";
  if (mode !== "tools" && mode !== "search") throw new Error(`FABRIC_MCP_MODE must be "tools" or "search", not ${JSON.stringify(mode)}`);
  return {
    path,
    include: options.include ?? list(env.FABRIC_MCP_INCLUDE) ?? [],
    exclude: options.exclude ?? list(env.FABRIC_MCP_EXCLUDE) ?? [],
    versions: options.versions ?? versionsOf(list(env.FABRIC_MCP_VERSIONS)) ?? {},
    mode,
    pageSize: options.pageSize ?? int(env.FABRIC_MCP_PAGE_SIZE, "FABRIC_MCP_PAGE_SIZE", 1, 1000) ?? 100,
    refreshMs: options.refreshMs ?? int(env.FABRIC_MCP_REFRESH_MS, "FABRIC_MCP_REFRESH_MS", 0, 3_600_000) ?? 2000,
    allowedHosts: options.allowedHosts ?? list(env.FABRIC_MCP_ALLOWED_HOSTS) ?? [],
    allowedOrigins: options.allowedOrigins ?? list(env.FABRIC_MCP_ALLOWED_ORIGINS) ?? [],
    authorizationServers: options.authorizationServers ?? list(env.FABRIC_MCP_AUTHORIZATION_SERVERS) ?? [],
    waitSeconds: Math.min(60, options.waitSeconds ?? 60),
    taskAfterSeconds: options.taskAfterSeconds ?? int(env.FABRIC_MCP_TASK_AFTER_S, "FABRIC_MCP_TASK_AFTER_S", 0, 60) ?? 1,
    policyFilter: options.policyFilter ?? !/^(off|false|0|no)$/i.test(env.FABRIC_MCP_POLICY_FILTER ?? ""),
    progressIntervalMs: options.progressIntervalMs ?? int(env.FABRIC_MCP_PROGRESS_INTERVAL_MS, "FABRIC_MCP_PROGRESS_INTERVAL_MS", 0, 60_000) ?? 100,
  };
}
