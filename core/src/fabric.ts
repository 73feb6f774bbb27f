/**
 * Starts NodeFabric services from a configuration: all seven in one process (`fabric dev`),
 * or one per process (`fabric start <service>`), wired to each other over HTTP.
 */
import { chmodSync, existsSync, mkdirSync, statSync } from "node:fs";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { SERVICE_NAMES, type ServiceName } from "./http/service.js";
import { type FabricConfig, serviceLimits, servicePort, serviceUrl } from "./config.js";
import { buildNodeRegistry } from "./services/node-registry/index.js";
import { buildSelection } from "./services/selection/index.js";
import { buildPdp } from "./services/pdp/index.js";
import { buildAtomicExecutor } from "./services/atomic-executor/index.js";
import { buildCompositeExecutor } from "./services/composite-executor/index.js";
import { loadHandlers, withDefinitions, type LoadedHandlers } from "./services/atomic-executor/handler-loader.js";
import type { Dispatcher } from "undici";
import type { FabricDefinition } from "@nodefabric/sdk";
import { buildRunCoordinator } from "./services/run-coordinator/index.js";
import { COORDINATOR_API } from "./services/run-coordinator/coordinator-api.js";
import { buildRunGateway } from "./services/run-gateway/index.js";
import { RUN_GATEWAY_API } from "./services/run-gateway/gateway-api.js";
import { ATOMIC_EXECUTOR_API, PDP_API, inProcessApi, type AtomicExecutorApi } from "./in-process.js";
import { HttpExecutorCaller, LocalFirstExecutorCaller } from "./clients/executor-client.js";
import { secretsFromEnv } from "@nodefabric/sdk/runtime";
import type { EgressOptions } from "./services/atomic-executor/egress-policy.js";
import { assertListenAllowed, fabricSecurity, type FabricSecurity } from "./fabric-security.js";
import { loadPlugins, storesFor, type LoadedPlugin } from "./plugin-loader.js";
import type { PluginServiceContext, StoreFactory } from "./plugin.js";
import type { ServiceTokens } from "./clients/service-tokens.js";
import { observeService } from "./observe/observables.js";
import { publish } from "./observe/channels.js";
import { serviceLoggerOptions, type LogFormat } from "./observe/service-logger.js";

export interface RunningService {
  name: ServiceName;
  url: string;
  app: FastifyInstance;
}

export interface RunningFabric {
  services: RunningService[];
  /** Base URL of each running service. */
  urls: Partial<Record<ServiceName, string>>;
  /** The plugins loaded for it. */
  plugins: readonly LoadedPlugin[];
  close(): Promise<void>;
}

/** A service's logger: JSON lines, or pretty ones on a terminal (FABRIC_LOG_FORMAT), with the active span's ids. */
function loggerFor(config: FabricConfig, name: ServiceName, format?: LogFormat): boolean | Record<string, unknown> {
  if (config.log_level === "silent") return false;
  return serviceLoggerOptions({ level: config.log_level, service: name, format });
}

/** Files that make a folder a NodeFabric data folder. */
const DATA_FILES = ["run-coordinator.db", "node-registry.db", "selection.db", "assignment-secret"];

/**
 * Creates the data folder readable by its owner only (0700): it holds the databases and the assignment secret. An
 * existing one is tightened the same way when it is ours: owned by this user and already holding fabric data (one
 * made by an older version); any other existing folder is left as the operator made it.
 */
function makeDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    const st = statSync(dir);
    const ours = typeof process.getuid !== "function" || st.uid === process.getuid();
    if (ours && (st.mode & 0o077) !== 0 && DATA_FILES.some((f) => existsSync(path.join(dir, f)))) chmodSync(dir, 0o700);
  } catch {
    // a file system without modes
  }
}

/** Services of this process already listening, by name and base URL: in-process calls go to them directly. */
export type LocalServices = Array<{ name: ServiceName; url: string; app: FastifyInstance }>;

/** What a fabric started from code (tests: `fabricFixture`) can be given besides its configuration. */
export interface StartFabricOptions {
  /** Definitions already in memory, served beside `config.handlers`; with them, nothing is discovered by default. */
  definitions?: readonly FabricDefinition[];
  /** Where the atomic executor's `ctx.request` goes (an undici MockAgent in tests). */
  upstreamDispatcher?: Dispatcher;
  /** Replaces the system resolver of the atomic executor's egress-checked connections (`http.request`; tests, custom DNS). */
  egressLookup?: EgressOptions["lookup"];
  /**
   * The plugins of this fabric, already loaded (the CLI loads them before it parses its commands). Without it, the
   * plugins of the configuration are loaded: `plugins`, else discovery in `discover` (or the base folder).
   */
  plugins?: readonly LoadedPlugin[];
  /** The services this process runs, as plugins are told (`startFabric` sets it). */
  processServices?: readonly ServiceName[];
  /** The services' log lines (`fabric dev --log-format`); default: FABRIC_LOG_FORMAT, else pretty on a terminal. */
  logFormat?: LogFormat;
}

/**
 * Loads the plugins a configuration asks for: those in `plugins`, and discovery in the `discover` folders (in the base
 * folder when neither plugins nor discover folders are named), as handler packages are found.
 */
export async function pluginsFor(config: FabricConfig, warn?: (message: string) => void, defaults?: readonly string[]): Promise<LoadedPlugin[]> {
  const plugins = config.plugins ?? [];
  const discover = config.discover.length > 0 ? config.discover : plugins.length === 0 ? ["."] : [];
  return loadPlugins({ plugins, discover: discover.map((d) => path.resolve(config.base_dir, d)), cwd: config.base_dir, warn, defaults });
}

/** What `fabric dev` serves whenever it is installed: the console (/console/), the MCP server (/mcp) and the A2A server (/a2a and its Agent Card), on the gateway. */
export const DEV_DEFAULT_PLUGINS: readonly string[] = ["@nodefabric/plugin-console", "@nodefabric/plugin-mcp", "@nodefabric/plugin-a2a"];

/**
 * Opens a plugin's store of one kind when the configuration names a store URL and the plugin serving its scheme gives
 * that kind; undefined means the embedded SQLite store. The store is closed with the service.
 */
async function pluginStore<S extends { close(): Promise<void> }>(
  config: FabricConfig,
  plugins: readonly LoadedPlugin[],
  name: ServiceName,
  pick: (stores: NonNullable<LoadedPlugin["definition"]["stores"]>) => StoreFactory<S> | undefined,
): Promise<S | undefined> {
  if (!config.store?.url) return undefined;
  const { stores, url } = storesFor(config.store.url, plugins);
  const factory = pick(stores);
  if (!factory) return undefined;
  return factory(url, {
    poolSize: config.store.pool_size,
    statementTimeoutMs: config.store.statement_timeout_ms,
    connectTimeoutMs: config.store.connect_timeout_ms,
    queryTimeoutMs: config.store.query_timeout_ms,
    dataDir: path.resolve(config.base_dir, config.data_dir),
    service: name,
  });
}

/** Closes a plugin's store when its service stops. */
function closesWith(app: FastifyInstance, store: { close(): Promise<void> } | undefined): FastifyInstance {
  if (store) app.addHook("onClose", async () => store.close());
  return app;
}

/**
 * What a service plugin is told about its fabric (`options.fabric`). Service URLs are looked up when asked: `local`
 * is the list of this process's services, which grows as each one listens.
 */
export function pluginServiceContext(name: ServiceName, config: FabricConfig, local: LocalServices = [], app?: FastifyInstance, processServices: readonly ServiceName[] = [name], tokens?: ServiceTokens): PluginServiceContext {
  const { mode, issuer, oidc } = config.auth;
  return {
    service: name,
    serviceToken: async (target) => (tokens ? tokens.token(target) : undefined),
    processServices: [...processServices],
    observe: async () => (app ? observeService(app) : {}),
    serviceUrl: (n) => (local.find((s) => s.name === n)?.url ?? serviceUrl(config, n)).replace(/\/+$/, ""),
    ...(name === "run-gateway" && app ? { runs: inProcessApi(app, RUN_GATEWAY_API) } : {}),
    auth: { mode, ...(issuer ? { issuer } : {}), ...(oidc ? { oidc: { ...oidc } } : {}) },
    egress: { allowPrivate: config.executor.egress?.allow_private, allowCidrs: config.executor.egress?.allow_cidrs, allowHosts: config.executor.egress?.allow_hosts },
    dataDir: path.resolve(config.base_dir, config.data_dir),
  };
}

/** Adds the fastify plugins that plugins give this service, after core's routes, in load order. */
function withServicePlugins(app: FastifyInstance, name: ServiceName, plugins: readonly LoadedPlugin[], context: PluginServiceContext): FastifyInstance {
  for (const p of plugins) {
    for (const entry of p.definition.services ?? []) {
      if (entry.service === name) void app.register(entry.plugin as never, { ...entry.options, fabric: context } as never);
    }
  }
  return app;
}

/** The handlers an executor serves: the configured packages (or discovery), plus definitions handed over in memory. */
async function handlersFor(config: FabricConfig, definitions: readonly FabricDefinition[] = []): Promise<LoadedHandlers> {
  const nothingNamed = config.handlers.length === 0 && config.discover.length === 0 && definitions.length === 0;
  const discover = nothingNamed ? ["."] : config.discover;
  const loaded = await loadHandlers({
    handlers: config.handlers,
    discover: discover.map((d) => path.resolve(config.base_dir, d)),
    cwd: config.base_dir,
  });
  // Checked together, so a definition clashing with a package's is refused as a duplicate would be.
  return withDefinitions(loaded, definitions);
}

/** Builds one service's fastify instance (not yet listening), with what plugins add to it. */
export async function buildService(name: ServiceName, config: FabricConfig, local: LocalServices = [], security: FabricSecurity = fabricSecurity(config), options: StartFabricOptions = {}): Promise<FastifyInstance> {
  const plugins = options.plugins ?? (await pluginsFor(config));
  const app = await buildCoreService(name, config, local, security, options, plugins);
  return withServicePlugins(app, name, plugins, pluginServiceContext(name, config, local, app, options.processServices, security.forService(name).tokens));
}

async function buildCoreService(name: ServiceName, config: FabricConfig, local: LocalServices, security: FabricSecurity, options: StartFabricOptions, plugins: readonly LoadedPlugin[]): Promise<FastifyInstance> {
  const dataDir = path.resolve(config.base_dir, config.data_dir);
  const logger = loggerFor(config, name, options.logFormat);
  // Every service gets the configured limits of its HTTP edge (timeouts, body and header sizes, JSON depth, load).
  const secured = { ...security.forService(name), limits: serviceLimits(config.limits) };
  switch (name) {
    case "node-registry": {
      makeDataDir(dataDir);
      const store = await pluginStore(config, plugins, name, (s) => s.nodeTypes);
      return closesWith(await buildNodeRegistry({ ...secured, logger, dbPath: path.join(dataDir, "node-registry.db"), store, executorTtlMs: config.registry?.executor_ttl_ms }), store);
    }
    case "selection": {
      makeDataDir(dataDir);
      const store = await pluginStore(config, plugins, name, (s) => s.candidateSets);
      return closesWith(await buildSelection({ ...secured, logger, dbPath: path.join(dataDir, "selection.db"), registryUrl: serviceUrl(config, "node-registry"), store }), store);
    }
    case "pdp":
      return buildPdpService(config, logger, secured);
    case "atomic-executor": {
      const handlers = await handlersFor(config, options.definitions);
      return buildAtomicExecutor({
        ...secured,
        logger,
        handlers,
        registryUrl: serviceUrl(config, "node-registry"),
        // Unknown before listening when the port is ephemeral; the executor then derives it from its address.
        publicUrl: servicePort(config, "atomic-executor") === 0 && !config.services["atomic-executor"]?.url ? undefined : serviceUrl(config, "atomic-executor"),
        secrets: secretsFromEnv(),
        concurrency: config.executor.concurrency,
        defaultTimeoutMs: config.executor.default_timeout_ms,
        maxTimeoutMs: config.executor.max_timeout_ms,
        resultCacheSize: config.executor.result_cache?.max_entries,
        resultCacheBytes: config.executor.result_cache?.max_bytes,
        resultCacheTtlMs: config.executor.result_cache?.ttl_ms,
        upstreamDispatcher: options.upstreamDispatcher,
        egress: {
          allowPrivate: config.executor.egress?.allow_private,
          allowCidrs: config.executor.egress?.allow_cidrs,
          allowHosts: config.executor.egress?.allow_hosts,
          lookup: options.egressLookup,
        },
        secretHosts: config.executor.secret_hosts,
      });
    }
    case "composite-executor": {
      // The same handler packages as the atomic executor: each executor serves the definitions of its own kind.
      const handlers = await handlersFor(config, options.definitions);
      return buildCompositeExecutor({
        ...secured,
        logger,
        handlers,
        registryUrl: serviceUrl(config, "node-registry"),
        selectionUrl: serviceUrl(config, "selection"),
        // The candidates ctx.select offers are those the PDP lets the run create (in process when the PDP is).
        policy: config.policy_checks ? inProcessPdp(local) : undefined,
        pdpUrl: config.policy_checks ? serviceUrl(config, "pdp") : undefined,
        publicUrl: servicePort(config, "composite-executor") === 0 && !config.services["composite-executor"]?.url ? undefined : serviceUrl(config, "composite-executor"),
      });
    }
    case "run-coordinator":
      makeDataDir(dataDir);
    {
      const executors = new Map<string, AtomicExecutorApi>();
      for (const s of local) {
        const api = inProcessApi(s.app, ATOMIC_EXECUTOR_API);
        if (api) executors.set(new URL(s.url).origin, api);
      }
      // The PDP of this process, else one of the coordinator's own when the configuration embeds it.
      const embedded = !inProcessPdp(local) && config.policy_checks && config.coordinator?.embedded_pdp ? await buildPdpService(config, false) : undefined;
      const pdp = inProcessPdp(local) ?? (embedded ? inProcessApi(embedded, PDP_API) : undefined);
      const store = await pluginStore(config, plugins, name, (s) => s.runs);
      // The coordinator closes the store itself, after its engine stopped and let go of its runs.
      const coordinator = await buildRunCoordinator({
        ...secured,
        // Coordinators sharing a database share the secret kept there (see buildRunCoordinator).
        assignmentTokens: store?.shared && !config.auth.assignment_secret_file ? undefined : security.assignmentTokens(),
        assignmentTtlSeconds: config.auth.assignment_ttl_s,
        logger,
        dbPath: path.join(dataDir, "run-coordinator.db"),
        registryUrl: serviceUrl(config, "node-registry"),
        pdpUrl: config.policy_checks ? serviceUrl(config, "pdp") : undefined,
        policy: config.policy_checks && pdp ? pdp : undefined,
        atomicExecutorUrl: serviceUrl(config, "atomic-executor"),
        compositeExecutorUrl: serviceUrl(config, "composite-executor"),
        selectionUrl: serviceUrl(config, "selection"),
        executors: executors.size > 0 ? new LocalFirstExecutorCaller(executors, new HttpExecutorCaller(secured.tokens)) : undefined,
        store,
        runLeaseMs: config.coordinator?.run_lease_ms,
        publicUrl: config.coordinator?.public_url ?? config.services["run-coordinator"]?.url,
        compositeLeaseMs: config.coordinator?.composite_lease_ms,
        executorWaitMs: config.coordinator?.executor_wait_ms,
        modelPrices: config.llm?.prices,
        closeStore: true,
      });
      if (embedded) coordinator.addHook("onClose", async () => embedded.close());
      return coordinator;
    }
    case "run-gateway":
    {
      const coordinatorApp = local.find((s) => s.name === "run-coordinator")?.app;
      return buildRunGateway({
        ...secured,
        logger,
        coordinatorUrls: config.gateway?.coordinators ?? [serviceUrl(config, "run-coordinator")],
        coordinator: coordinatorApp ? inProcessApi(coordinatorApp, COORDINATOR_API) : undefined,
        registryUrl: serviceUrl(config, "node-registry").replace(/\/+$/, ""),
      });
    }
    default: {
      const unknown: never = name;
      throw new Error(`unknown service ${String(unknown)}`);
    }
  }
}

/**
 * The PDP with the configuration's policy and entities files: the service, or (without `secured`, never listening) the
 * one a coordinator embeds and calls in process (coordinator.embedded_pdp).
 */
function buildPdpService(config: FabricConfig, logger: boolean | Record<string, unknown>, secured?: Parameters<typeof buildPdp>[0]): Promise<FastifyInstance> {
  return buildPdp({
    ...secured,
    logger,
    policyFile: config.policy ? path.resolve(config.base_dir, config.policy) : undefined,
    entitiesFile: config.policy_entities ? path.resolve(config.base_dir, config.policy_entities) : undefined,
  });
}

/** The PDP of this process, called in process, when it runs here. */
function inProcessPdp(local: LocalServices) {
  const pdpApp = local.find((s) => s.name === "pdp")?.app;
  return pdpApp ? inProcessApi(pdpApp, PDP_API) : undefined;
}

const START_ORDER: readonly ServiceName[] = ["node-registry", "pdp", "selection", "atomic-executor", "composite-executor", "run-coordinator", "run-gateway"];

/** Starts the named services (all seven by default) and resolves once every one listens. */
export async function startFabric(config: FabricConfig, names: readonly ServiceName[] = SERVICE_NAMES, options: StartFabricOptions = {}): Promise<RunningFabric> {
  const t0 = performance.now();
  const started: RunningService[] = [];
  const startOrder: RunningService[] = [];
  const close = async () => {
    // Reverse start order: callers stop before the services they call.
    for (const s of [...startOrder].reverse()) await s.app.close().catch(() => undefined);
  };
  assertListenAllowed(config);
  const security = fabricSecurity(config);
  const plugins = options.plugins ?? (await pluginsFor(config));
  // A store URL no plugin serves stops the start before any service listens.
  if (config.store?.url) storesFor(config.store.url, plugins);
  options = { ...options, plugins, processServices: START_ORDER.filter((n) => names.includes(n)) };
  try {
    // Dependencies first: each service is built knowing the addresses of those it calls (with port 0, an address
    // is known only once its service listens).
    let cfg = config;
    const ordered = START_ORDER.filter((n) => names.includes(n));
    for (const name of ordered) {
      const app = await buildService(name, cfg, startOrder, security, options);
      await app.listen({ host: cfg.host, port: servicePort(cfg, name) });
      const addr = app.server.address();
      const port = typeof addr === "object" && addr ? addr.port : servicePort(cfg, name);
      const host = cfg.host === "0.0.0.0" || cfg.host === "::" ? "127.0.0.1" : cfg.host;
      const url = cfg.services[name]?.url ?? `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
      cfg = { ...cfg, services: { ...cfg.services, [name]: { ...cfg.services[name], url, port } } };
      started.push({ name, app, url });
      startOrder.push({ name, app, url });
    }
  } catch (err) {
    await close();
    throw err;
  }
  started.sort((a, b) => SERVICE_NAMES.indexOf(a.name) - SERVICE_NAMES.indexOf(b.name));
  const urls: RunningFabric["urls"] = {};
  for (const s of started) urls[s.name] = s.url;
  publish("fabricStarted", () => ({ services: started.length, duration_ms: performance.now() - t0 }));
  return { services: started, urls, plugins, close };
}
