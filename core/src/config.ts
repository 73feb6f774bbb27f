/**
 * Fabric configuration: defaults, then `fabric.config.json`, then FABRIC_* environment variables, then flags.
 * The merged result is validated against a JSON Schema; a bad option stops the start with a clear message.
 *
 * The options themselves, their defaults, variables and schema come from one table (settings/fabric-settings.ts);
 * this file loads and merges them. The parts it uses live in settings/ and are re-exported here.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { ServiceName } from "./service-names.js";
import { parseSqliteDriver } from "./store/sqlite-driver.js";
import { parseSqliteWriter } from "./store/sqlite-writer-thread.js";
import { ConfigError } from "./config-error.js";
import { configFromEnv } from "./settings/config-env.js";
import { checkAuthConfig, checkEgressConfig, checkGatewayCoordinators, validateConfig } from "./settings/config-checks.js";
import { DEFAULT_CONFIG, type FabricConfig, type PartialConfig } from "./settings/fabric-settings.js";

export { ConfigError } from "./config-error.js";
export { configFromEnv } from "./settings/config-env.js";
export { validateConfig } from "./settings/config-checks.js";
export { isLoopbackHost, serviceLimits, servicePort, serviceUrl } from "./settings/service-addresses.js";
export {
  CONFIG_SCHEMA,
  DEFAULT_CONFIG,
  FABRIC_SETTINGS,
  LOG_LEVELS,
  type AuthConfig,
  type CoordinatorConfig,
  type EgressConfig,
  type FabricConfig,
  type LimitsConfig,
  type LlmSettings,
  type LogLevel,
  type PartialConfig,
  type ServiceEndpointConfig,
  type StoreConfig,
} from "./settings/fabric-settings.js";

function readConfigFile(file: string): PartialConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("the top level must be an object");
    return parsed as PartialConfig;
  } catch (err) {
    throw new ConfigError(`${file} is not valid JSON: ${(err as Error).message}`);
  }
}

function mergeConfig(base: PartialConfig, over: PartialConfig): PartialConfig {
  const out: PartialConfig = { ...base, ...over };
  if (base.executor || over.executor) out.executor = { ...base.executor, ...over.executor };
  // executor.egress option by option, and executor.secret_hosts secret by secret.
  if (base.executor?.egress || over.executor?.egress) out.executor = { ...out.executor, egress: { ...base.executor?.egress, ...over.executor?.egress } };
  if (base.executor?.secret_hosts || over.executor?.secret_hosts) {
    out.executor = { ...out.executor, secret_hosts: { ...base.executor?.secret_hosts, ...over.executor?.secret_hosts } };
  }
  if (base.auth || over.auth) out.auth = { ...base.auth, ...over.auth };
  if (base.limits || over.limits) out.limits = { ...base.limits, ...over.limits };
  if (base.store || over.store) out.store = { ...base.store, ...over.store };
  if (base.coordinator || over.coordinator) out.coordinator = { ...base.coordinator, ...over.coordinator };
  if (base.services || over.services) {
    const services: FabricConfig["services"] = { ...base.services };
    for (const [k, v] of Object.entries(over.services ?? {})) services[k as ServiceName] = { ...services[k as ServiceName], ...v };
    out.services = services;
  }
  return out;
}

export interface LoadConfigOptions {
  /** Path of a config file; without it, ./fabric.config.json is used when it exists. */
  configFile?: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Values from command-line flags (highest precedence). */
  flags?: PartialConfig;
  /** A command's own defaults, above the built-in ones and below everything else (`fabric start`: auth required). */
  commandDefaults?: PartialConfig;
}

/** Loads, merges and validates the configuration. */
export function loadConfig(options: LoadConfigOptions = {}): FabricConfig {
  const cwd = options.cwd ?? process.cwd();
  let fileConfig: PartialConfig = {};
  let baseDir = cwd;
  const sources: string[] = ["defaults"];
  const file = options.configFile ? path.resolve(cwd, options.configFile) : path.join(cwd, "fabric.config.json");
  if (options.configFile || existsSync(file)) {
    if (!existsSync(file)) throw new ConfigError(`config file not found: ${file}`);
    fileConfig = readConfigFile(file);
    validateConfig(fileConfig, file);
    baseDir = path.dirname(file);
    sources.push(file);
  }
  const envConfig = configFromEnv(options.env ?? process.env);
  if (Object.keys(envConfig).length > 0) sources.push("environment");
  const flags = options.flags ?? {};
  if (Object.keys(flags).length > 0) sources.push("flags");
  const defaults = mergeConfig(DEFAULT_CONFIG as PartialConfig, options.commandDefaults ?? {});
  const merged = mergeConfig(mergeConfig(mergeConfig(defaults, fileConfig), envConfig), flags);
  validateConfig(merged, sources.join(" + "));
  const config = { ...merged, base_dir: baseDir } as FabricConfig;
  if (config.executor.default_timeout_ms > config.executor.max_timeout_ms) {
    throw new ConfigError("invalid configuration: executor.default_timeout_ms must not exceed executor.max_timeout_ms");
  }
  checkAuthConfig(config.auth);
  const { headers_timeout_ms: headers, request_timeout_ms: whole } = config.limits;
  if (whole > 0 && headers > whole) {
    throw new ConfigError("invalid configuration: limits.headers_timeout_ms must not exceed limits.request_timeout_ms (the head is part of the request)");
  }
  checkEgressConfig(config.executor);
  checkGatewayCoordinators(config.gateway?.coordinators ?? []);
  if (config.store !== undefined && config.store.url === undefined) {
    throw new ConfigError("invalid configuration: store needs a url (store.url, FABRIC_STORE_URL or --store), such as postgres://host/db");
  }
  // The stores read FABRIC_SQLITE_DRIVER and FABRIC_SQLITE_WRITER when they open; a value they cannot use stops the
  // start here, with the rest.
  try {
    parseSqliteDriver((options.env ?? process.env).FABRIC_SQLITE_DRIVER);
    parseSqliteWriter((options.env ?? process.env).FABRIC_SQLITE_WRITER);
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
  }
  return config;
}
