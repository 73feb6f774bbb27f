/**
 * The plugin contract: what a plugin package's default export, made with `definePlugin`, may give the fabric. Stores
 * behind core's interfaces (chosen by the scheme of the store URL), fastify plugins added to chosen services after
 * core's routes, and `fabric` subcommands. Core never imports a plugin; it loads the ones it is told about or finds
 * (plugin-loader.ts).
 */
import type { FastifyPluginAsync, FastifyPluginCallback } from "fastify";
import type { Command } from "commander";
import { SERVICE_NAMES, type ServiceName } from "./http/service.js";
import type { AuthMode } from "./http/auth-plugin.js";
import type { RunStore } from "./store/run-store.js";
import type { NodeTypeStore } from "./store/node-type-store.js";
import type { CandidateSetStore } from "./store/candidate-set-store.js";
import type { ObservedValues } from "./observe/observables.js";
import type { RunGatewayApi } from "./services/run-gateway/gateway-api.js";

/** Marks a value made by definePlugin (a global symbol, so two copies of core recognise each other's plugins). */
export const PLUGIN_BRAND: unique symbol = Symbol.for("nodefabric.plugin") as never;

/** What a store factory is given besides the URL: the `store` options of the configuration. */
export interface StoreOpenOptions {
  /** Connections a pooled store may hold (store.pool_size). */
  poolSize?: number;
  /** Longest a single statement may run, in ms (store.statement_timeout_ms). */
  statementTimeoutMs?: number;
  /** Longest opening a connection (or waiting for a pooled one) may take, in ms (store.connect_timeout_ms). */
  connectTimeoutMs?: number;
  /** Longest the driver waits for the answer to one query before giving the connection up, in ms; 0 = no limit (store.query_timeout_ms). */
  queryTimeoutMs?: number;
  /** The fabric's data folder (absolute), for a store that keeps local files. */
  dataDir: string;
  /** The service opening the store. */
  service: ServiceName;
}

export type StoreFactory<S> = (url: URL, options: StoreOpenOptions) => S | Promise<S>;

/**
 * Stores a plugin serves for store URLs of its schemes (`postgres://…` for `schemes: ["postgres"]`). A kind the
 * plugin leaves out stays on the embedded SQLite store. The fabric closes what it opened when the service stops.
 */
export interface PluginStores {
  /** URL schemes, lowercase and without the colon, e.g. ["postgres", "postgresql"]. */
  schemes: readonly string[];
  /** The run coordinator's store. */
  runs?: StoreFactory<RunStore>;
  /** The node registry's store. */
  nodeTypes?: StoreFactory<NodeTypeStore>;
  /** The selection service's store. */
  candidateSets?: StoreFactory<CandidateSetStore>;
}

/**
 * What the fabric tells a service plugin about where it runs: given to the fastify plugin as `options.fabric`, beside
 * the entry's own `options`. It holds what a plugin cannot know by itself (other services' addresses, how callers
 * authenticate) and no secret.
 */
export interface PluginServiceContext {
  /** The service the plugin is added to. */
  service: ServiceName;
  /**
   * The base URL (no trailing slash) at which clients reach a service of this fabric: `services.<name>.url` when
   * configured, else its listening address. Ask at request time: a service on an ephemeral port started in the same
   * process is known only once it listens, which may be after this plugin is registered.
   */
  serviceUrl(name: ServiceName): string;
  /** The services this process runs (all seven under `fabric dev`, one under `fabric start <service>`). */
  processServices: readonly ServiceName[];
  /**
   * What the service can tell about its work now (queue depth, work in flight, event followers), for metrics. Ask
   * when a scrape comes; each field is there only on the services it applies to.
   */
  observe(): Promise<ObservedValues>;
  /**
   * A bearer token of this service's own for calling another service of the fabric (its usual scopes there), or
   * undefined when authentication is disabled. A plugin acting for a caller (the MCP server reading the catalogue)
   * uses it instead of forwarding the caller's token, which is meant for this service alone.
   */
  serviceToken?(target: ServiceName): Promise<string | undefined>;
  /**
   * On the run gateway: its POST /v1/runs as a function, for a route of the plugin that has authenticated its caller
   * (`request.principal`) and starts runs for them. The same checks and answers as the route, without a second pass
   * through HTTP (services/run-gateway/gateway-api.ts). Undefined on the other services.
   */
  runs?: RunGatewayApi;
  /**
   * What the operator lets outbound calls made for a caller reach beyond public addresses: the executor's
   * `executor.egress` (a plugin delivering to a caller's URL, such as A2A push notifications, checks it as handlers
   * are checked, with EgressPolicy).
   */
  egress?: { allowPrivate?: boolean; allowCidrs?: readonly string[]; allowHosts?: readonly string[] };
  /** The fabric's data folder (`data_dir`), for what a plugin keeps beside the stores. */
  dataDir?: string;
  /** How callers authenticate (the `auth` configuration, without keys or secrets). */
  auth: {
    mode: AuthMode;
    /** The `iss` tokens must carry, when configured. */
    issuer?: string;
    /** The OpenID provider and public client a browser may log in with (`auth.oidc`), when configured. */
    oidc?: { issuer: string; client_id: string; scope?: string };
  };
}

/** A URL a plugin adds to the `fabric dev` / `fabric start` banner: `<label>: <service's URL><path>`. */
export interface PluginLink {
  /** What the line is called, e.g. "console". */
  label: string;
  /** The service serving it; the line is printed only by a process that runs this service. */
  service: ServiceName;
  /** The path on that service, starting with "/", e.g. "/console/". */
  path: string;
}

/** A fastify plugin added to one service, after core's routes (encapsulated unless wrapped with fastify-plugin). */
export interface PluginService {
  service: ServiceName;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  plugin: FastifyPluginAsync<any> | FastifyPluginCallback<any>;
  options?: Record<string, unknown>;
}

/** What a command factory is given: core's commander, so a plugin need not depend on its own copy. */
export interface CommandTools {
  Command: typeof Command;
}

/** Makes one `fabric` subcommand. */
export type CommandFactory = (tools: CommandTools) => Command;

export interface PluginInput {
  /** The plugin's name, as errors and `fabric` output show it (usually its package name). */
  name: string;
  version?: string;
  stores?: PluginStores;
  services?: readonly PluginService[];
  commands?: readonly CommandFactory[];
  /** URLs printed in the start banner, such as a page the plugin serves. */
  links?: readonly PluginLink[];
}

export interface PluginDefinition extends Readonly<PluginInput> {
  readonly [PLUGIN_BRAND]: true;
}

const SCHEME = /^[a-z][a-z0-9+.-]*$/;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** What is wrong with a plugin's shape, in one sentence, or undefined when nothing is. */
export function pluginProblem(value: unknown): string | undefined {
  if (!isObject(value)) return "it is not an object";
  const p = value as Partial<PluginInput> & Record<string, unknown>;
  if (typeof p.name !== "string" || p.name.trim() === "") return "`name` must be a non-empty string";
  if (p.version !== undefined && typeof p.version !== "string") return "`version` must be a string";
  const known = new Set(["name", "version", "stores", "services", "commands", "links"]);
  const unknown = Object.keys(p).filter((k) => !known.has(k));
  if (unknown.length > 0) return `unknown field${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => `\`${k}\``).join(", ")} (a plugin may give name, version, stores, services, commands, links)`;
  if (p.stores !== undefined) {
    const s = p.stores as unknown;
    if (!isObject(s)) return "`stores` must be an object with `schemes` and factories for runs, nodeTypes or candidateSets";
    const schemes = s.schemes;
    if (!Array.isArray(schemes) || schemes.length === 0) return "`stores.schemes` must be a non-empty array of URL schemes, such as [\"postgres\"]";
    const bad = schemes.find((x) => typeof x !== "string" || !SCHEME.test(x));
    if (bad !== undefined) return `\`stores.schemes\` holds ${JSON.stringify(bad)}: a scheme is lowercase letters, digits, "+", "-" or ".", without the colon`;
    const kinds = ["runs", "nodeTypes", "candidateSets"] as const;
    for (const k of kinds) if (s[k] !== undefined && typeof s[k] !== "function") return `\`stores.${k}\` must be a function (url, options) => store`;
    if (!kinds.some((k) => s[k] !== undefined)) return "`stores` gives no factory: add runs, nodeTypes or candidateSets";
    const extra = Object.keys(s).filter((k) => k !== "schemes" && !(kinds as readonly string[]).includes(k));
    if (extra.length > 0) return `\`stores\` has unknown field ${extra.map((k) => `\`${k}\``).join(", ")}`;
  }
  if (p.services !== undefined) {
    if (!Array.isArray(p.services)) return "`services` must be an array of { service, plugin, options? }";
    for (const [i, entry] of (p.services as unknown[]).entries()) {
      if (!isObject(entry)) return `\`services[${i}]\` must be an object { service, plugin, options? }`;
      if (!(SERVICE_NAMES as readonly unknown[]).includes(entry.service)) return `\`services[${i}].service\` is ${JSON.stringify(entry.service)}: it must be one of ${SERVICE_NAMES.join(", ")}`;
      if (typeof entry.plugin !== "function") return `\`services[${i}].plugin\` must be a fastify plugin (a function)`;
      if (entry.options !== undefined && !isObject(entry.options)) return `\`services[${i}].options\` must be an object`;
    }
  }
  if (p.commands !== undefined) {
    if (!Array.isArray(p.commands)) return "`commands` must be an array of functions that each return a commander Command";
    const i = (p.commands as unknown[]).findIndex((c) => typeof c !== "function");
    if (i >= 0) return `\`commands[${i}]\` must be a function that returns a commander Command`;
  }
  if (p.links !== undefined) {
    if (!Array.isArray(p.links)) return "`links` must be an array of { label, service, path }";
    for (const [i, link] of (p.links as unknown[]).entries()) {
      if (!isObject(link) || typeof link.label !== "string" || link.label.trim() === "") return `\`links[${i}].label\` must be a non-empty string`;
      if (!(SERVICE_NAMES as readonly unknown[]).includes(link.service)) return `\`links[${i}].service\` is ${JSON.stringify(link.service)}: it must be one of ${SERVICE_NAMES.join(", ")}`;
      if (typeof link.path !== "string" || !link.path.startsWith("/")) return `\`links[${i}].path\` must be a path starting with "/"`;
    }
  }
  return undefined;
}

/** Whether a value was made by definePlugin (any copy of core). */
export function isPlugin(value: unknown): value is PluginDefinition {
  return isObject(value) && (value as Record<symbol, unknown>)[PLUGIN_BRAND] === true;
}

/**
 * Defines a NodeFabric plugin: the default export of a module its package names in
 * `"nodefabric": { "plugins": ["./dist/index.js"] }`. A bad shape throws at once, naming the field.
 */
export function definePlugin(input: PluginInput): PluginDefinition {
  const problem = pluginProblem(input);
  if (problem) throw new TypeError(`definePlugin(${typeof input?.name === "string" ? JSON.stringify(input.name) : "…"}): ${problem}`);
  const def = { ...input, [PLUGIN_BRAND]: true as const };
  Object.defineProperty(def, PLUGIN_BRAND, { enumerable: false });
  return Object.freeze(def);
}
