/**
 * stdio MCP servers, started only from what the executor's operator wrote or an installed handler package holds,
 * never from a node type. Each server is one child process owned by this executor and shared by every call to it:
 * - its environment is only the variables the configuration lists (`env`) and the ones it lets through from the
 *   executor's own environment (`env_allow`, default `PATH`), so the executor's secrets do not leak into it;
 * - it runs in its own working folder (`cwd`, default a fresh temporary folder);
 * - when it dies, the next call starts it again (after a short pause if it keeps dying);
 * - it is stopped when the executor process exits.
 *
 * The operator names servers in a JSON file given by `FABRIC_MCP_SERVERS` (a path), shaped
 * `{ "servers": { "<name>": { "command": "…", "args": […], "env": {…}, "env_allow": […], "cwd": "…" } } }`.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/client";
import type { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { fail } from "./failure-codes.js";
import { MCP_CALL_SETTINGS, STDIO_SERVERS_ENV } from "./settings.js";

/** How a stdio server is started. */
export interface StdioServerConfig {
  command: string;
  args?: string[];
  /** Variables set for the child, as given. */
  env?: Record<string, string>;
  /** Names of the executor's own variables passed through (default `["PATH"]`). */
  env_allow?: string[];
  /** The child's working folder (default: a fresh temporary folder per server). */
  cwd?: string;
}

/** The environment variable naming the operator's JSON file of stdio servers (MCP_CALL_SETTINGS). */
export { STDIO_SERVERS_ENV } from "./settings.js";

/** Shortest pause before starting a server that died again within a second of its last start. */
const RESTART_PAUSE_MS = 250;

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Checks one server's configuration; throws an Error naming the field. */
export function checkStdioServerConfig(name: string, raw: unknown): StdioServerConfig {
  const where = `stdio server ${JSON.stringify(name)}`;
  if (!isPlainObject(raw)) throw new Error(`${where} must be an object with a command`);
  const known = new Set(["command", "args", "env", "env_allow", "cwd"]);
  const extra = Object.keys(raw).find((k) => !known.has(k));
  if (extra) throw new Error(`${where}: ${extra} is not an option (known: ${[...known].join(", ")})`);
  if (typeof raw.command !== "string" || raw.command === "") throw new Error(`${where}: command must be a non-empty string`);
  if (raw.args !== undefined && (!Array.isArray(raw.args) || raw.args.some((a) => typeof a !== "string"))) throw new Error(`${where}: args must be an array of strings`);
  if (raw.env !== undefined && (!isPlainObject(raw.env) || Object.values(raw.env).some((v) => typeof v !== "string"))) throw new Error(`${where}: env must be an object of name → string`);
  if (raw.env_allow !== undefined && (!Array.isArray(raw.env_allow) || raw.env_allow.some((a) => typeof a !== "string"))) throw new Error(`${where}: env_allow must be an array of variable names`);
  if (raw.cwd !== undefined && (typeof raw.cwd !== "string" || !path.isAbsolute(raw.cwd))) throw new Error(`${where}: cwd must be an absolute path`);
  return raw as unknown as StdioServerConfig;
}

/** The child's environment: `env` plus the allowed variables of the executor's own. */
export function childEnvironment(config: StdioServerConfig, parent: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of config.env_allow ?? ["PATH"]) {
    const value = parent[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...(config.env ?? {}) };
}

interface Running {
  client: Client;
  transport: StdioClientTransport;
}

interface Entry {
  config: StdioServerConfig;
  cwd: string;
  running?: Promise<Running>;
  startedAt: number;
  starts: number;
}

/** A pool of stdio servers by name; each is one child process shared by its calls. */
export class StdioServerPool {
  private readonly entries = new Map<string, Entry>();

  constructor(servers: Record<string, StdioServerConfig> = {}) {
    for (const [name, config] of Object.entries(servers)) this.define(name, config);
  }

  /** Adds (or replaces the configuration of) a server. */
  define(name: string, config: StdioServerConfig): void {
    const checked = checkStdioServerConfig(name, config);
    this.entries.set(name, { config: checked, cwd: checked.cwd ?? "", startedAt: 0, starts: 0 });
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** The pid of a running server (tests), or undefined. */
  async pid(name: string): Promise<number | undefined> {
    const running = await this.entries.get(name)?.running?.catch(() => undefined);
    return running?.transport.pid ?? undefined;
  }

  /** How many times a server was started. */
  starts(name: string): number {
    return this.entries.get(name)?.starts ?? 0;
  }

  /** The connected client of server `name`, starting its process when it is not running. */
  async client(name: string, connect: (transport: StdioClientTransport) => Promise<Client>): Promise<Client> {
    const entry = this.entries.get(name);
    if (!entry) {
      throw fail("invalid_configuration", `no stdio MCP server named ${JSON.stringify(name)} is configured on this executor (${STDIO_SERVERS_ENV})`, {
        retryable: false,
        details: { server: name },
      });
    }
    entry.running ??= this.start(name, entry, connect);
    try {
      return (await entry.running).client;
    } catch (err) {
      entry.running = undefined;
      throw err;
    }
  }

  private async start(name: string, entry: Entry, connect: (transport: StdioClientTransport) => Promise<Client>): Promise<Running> {
    const sinceLast = Date.now() - entry.startedAt;
    if (entry.starts > 0 && sinceLast < 1_000) await new Promise((r) => setTimeout(r, RESTART_PAUSE_MS));
    if (!entry.cwd) entry.cwd = mkdtempSync(path.join(os.tmpdir(), `fabric-mcp-${name.replace(/[^A-Za-z0-9._-]/g, "_")}-`));
    const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
    // A subclass: the SDK probes a subclassed stdio transport in place rather than in a second, sibling process, so
    // each server stays one process.
    class OwnedStdioTransport extends StdioClientTransport {}
    const transport = new OwnedStdioTransport({
      command: entry.config.command,
      args: entry.config.args ?? [],
      env: childEnvironment(entry.config),
      cwd: entry.cwd,
      stderr: "ignore",
    });
    entry.starts += 1;
    entry.startedAt = Date.now();
    const client = await connect(transport);
    const running: Running = { client, transport };
    const previous = transport.onclose;
    transport.onclose = () => {
      previous?.call(transport);
      // The process is gone: the next call starts it again.
      if (entry.running && this.entries.get(name) === entry) entry.running = undefined;
    };
    live.add(transport);
    return running;
  }

  /** Stops every server. */
  async close(): Promise<void> {
    const all = [...this.entries.values()].map((e) => e.running);
    for (const e of this.entries.values()) e.running = undefined;
    await Promise.all(all.map(async (r) => {
      const running = await r?.catch(() => undefined);
      if (running) {
        live.delete(running.transport);
        await running.client.close().catch(() => undefined);
      }
    }));
  }
}

const live = new Set<StdioClientTransport>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Children die with the executor: stdin closes when it exits, and a server that ignores that is killed.
  process.once("exit", () => {
    for (const t of live) {
      const pid = t.pid;
      if (pid) {
        try {
          process.kill(pid, "SIGTERM");
        } catch {
          // already gone
        }
      }
    }
  });
}

/** Reads the operator's servers from `FABRIC_MCP_SERVERS` (a JSON file); an unreadable or bad file throws, naming it. */
export function stdioServersFromEnvironment(env: NodeJS.ProcessEnv = process.env): Record<string, StdioServerConfig> {
  const file = MCP_CALL_SETTINGS.fromEnv(env).servers;
  if (!file) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`${STDIO_SERVERS_ENV}=${file}: ${(err as Error).message}`);
  }
  if (!isPlainObject(parsed) || !isPlainObject(parsed.servers)) throw new Error(`${STDIO_SERVERS_ENV}=${file}: must hold { "servers": { "<name>": { "command": … } } }`);
  const out: Record<string, StdioServerConfig> = {};
  for (const [name, raw] of Object.entries(parsed.servers)) out[name] = checkStdioServerConfig(name, raw);
  return out;
}

let operatorPool: StdioServerPool | undefined;

/** The pool of the operator's servers (`FABRIC_MCP_SERVERS`), read once. */
export function operatorStdioServers(): StdioServerPool {
  installExitHook();
  if (!operatorPool) {
    try {
      operatorPool = new StdioServerPool(stdioServersFromEnvironment());
    } catch (err) {
      throw fail("invalid_configuration", (err as Error).message, { retryable: false });
    }
  }
  return operatorPool;
}

/** Forgets the operator's pool after stopping its servers (tests). */
export async function resetOperatorStdioServers(): Promise<void> {
  const pool = operatorPool;
  operatorPool = undefined;
  await pool?.close();
}

export { installExitHook };
