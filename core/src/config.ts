/**
 * Fabric configuration: defaults, then `fabric.config.json`, then FABRIC_* environment variables, then flags.
 * The merged result is validated against a JSON Schema; a bad option stops the start with a clear message.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { SERVICE_NAMES, type ServiceName } from "./http/service.js";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface ServiceEndpointConfig {
  /** Base URL other services use to reach this one. */
  url?: string;
  /** Port this service listens on (default: port_base + its index). */
  port?: number;
}

export interface FabricConfig {
  /** Address every service listens on. */
  host: string;
  /** First port; services take port_base + 0..6 in the order of SERVICE_NAMES (0: ephemeral ports). */
  port_base: number;
  /** Where SQLite files and other state go. */
  data_dir: string;
  log_level: LogLevel;
  services: Partial<Record<ServiceName, ServiceEndpointConfig>>;
  /** Handler packages or paths for the atomic executor. */
  handlers: string[];
  /** Folders whose node_modules are scanned for handler packages. */
  discover: string[];
  /** Cedar policy file for the PDP; none means allow everything. */
  policy?: string;
  /** Cedar entities JSON file for the PDP (groups, attributes). */
  policy_entities?: string;
  /** Whether the coordinator asks the PDP at its checkpoints (default true). */
  policy_checks: boolean;
  executor: {
    concurrency: number;
    default_timeout_ms: number;
    max_timeout_ms: number;
  };
  /** The folder relative paths are resolved against (the config file's folder, or the working directory). */
  base_dir: string;
}

const serviceEndpointSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    url: { type: "string", pattern: "^https?://" },
    port: { type: "integer", minimum: 0, maximum: 65535 },
  },
};

/** JSON Schema of fabric.config.json (and of the merged configuration). */
export const CONFIG_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    $schema: { type: "string" },
    host: { type: "string", minLength: 1 },
    port_base: { type: "integer", minimum: 0, maximum: 65528 },
    data_dir: { type: "string", minLength: 1 },
    log_level: { enum: [...LOG_LEVELS] },
    services: {
      type: "object",
      additionalProperties: false,
      properties: Object.fromEntries(SERVICE_NAMES.map((n) => [n, serviceEndpointSchema])),
    },
    handlers: { type: "array", items: { type: "string", minLength: 1 } },
    discover: { type: "array", items: { type: "string", minLength: 1 } },
    policy: { type: "string", minLength: 1 },
    policy_entities: { type: "string", minLength: 1 },
    policy_checks: { type: "boolean" },
    executor: {
      type: "object",
      additionalProperties: false,
      properties: {
        concurrency: { type: "integer", minimum: 1, maximum: 100000 },
        default_timeout_ms: { type: "integer", minimum: 1 },
        max_timeout_ms: { type: "integer", minimum: 1 },
      },
    },
    base_dir: { type: "string" },
  },
} as const;

/** A configuration problem; the CLI prints its message and exits 2. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export const DEFAULT_CONFIG: Omit<FabricConfig, "base_dir"> = {
  host: "127.0.0.1",
  port_base: 8080,
  data_dir: ".fabric",
  log_level: "info",
  services: {},
  handlers: [],
  discover: [],
  policy_checks: true,
  executor: { concurrency: 1024, default_timeout_ms: 30_000, max_timeout_ms: 300_000 },
};

type PartialConfig = Partial<Omit<FabricConfig, "executor">> & { executor?: Partial<FabricConfig["executor"]> };

function envList(v: string | undefined): string[] | undefined {
  if (v === undefined || v.trim() === "") return undefined;
  return v.split(",").map((s) => s.trim()).filter(Boolean);
}

function envInt(env: NodeJS.ProcessEnv, name: string): number | string | undefined {
  const v = env[name];
  if (v === undefined || v === "") return undefined;
  return /^-?\d+$/.test(v) ? Number(v) : v; // a non-number is kept so validation names it
}

/** Reads FABRIC_* variables into a partial configuration. */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): PartialConfig {
  const out: PartialConfig = {};
  if (env.FABRIC_HOST) out.host = env.FABRIC_HOST;
  const pb = envInt(env, "FABRIC_PORT_BASE");
  if (pb !== undefined) (out as Record<string, unknown>).port_base = pb;
  if (env.FABRIC_DATA_DIR) out.data_dir = env.FABRIC_DATA_DIR;
  if (env.FABRIC_LOG_LEVEL) out.log_level = env.FABRIC_LOG_LEVEL as LogLevel;
  const handlers = envList(env.FABRIC_HANDLERS);
  if (handlers) out.handlers = handlers;
  const discover = envList(env.FABRIC_DISCOVER);
  if (discover) out.discover = discover;
  if (env.FABRIC_POLICY) out.policy = env.FABRIC_POLICY;
  if (env.FABRIC_POLICY_ENTITIES) out.policy_entities = env.FABRIC_POLICY_ENTITIES;
  if (env.FABRIC_POLICY_CHECKS) out.policy_checks = (env.FABRIC_POLICY_CHECKS === "true" ? true : env.FABRIC_POLICY_CHECKS === "false" ? false : env.FABRIC_POLICY_CHECKS) as boolean;
  const services: FabricConfig["services"] = {};
  for (const name of SERVICE_NAMES) {
    const key = `FABRIC_${name.toUpperCase().replace(/-/g, "_")}_URL`;
    if (env[key]) services[name] = { url: env[key] };
  }
  if (Object.keys(services).length > 0) out.services = services;
  const conc = envInt(env, "FABRIC_EXECUTOR_CONCURRENCY");
  if (conc !== undefined) out.executor = { concurrency: conc as number };
  return out;
}

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
  if (base.services || over.services) {
    const services: FabricConfig["services"] = { ...base.services };
    for (const [k, v] of Object.entries(over.services ?? {})) services[k as ServiceName] = { ...services[k as ServiceName], ...v };
    out.services = services;
  }
  return out;
}

let configValidator: ReturnType<Ajv2020["compile"]> | undefined;

/** Validates a merged configuration, throwing a ConfigError that names every bad option. */
export function validateConfig(candidate: unknown, source: string): void {
  configValidator ??= new Ajv2020({ allErrors: true, strict: false }).compile(CONFIG_SCHEMA);
  if (configValidator(candidate)) return;
  const lines = (configValidator.errors ?? []).map((e) => {
    const where = e.instancePath ? e.instancePath.slice(1).replace(/\//g, ".") : "(top level)";
    if (e.keyword === "additionalProperties") return `  - ${where === "(top level)" ? "" : where + "."}${String(e.params.additionalProperty)}: unknown option`;
    if (e.keyword === "enum") return `  - ${where}: must be one of ${(e.params.allowedValues as unknown[]).join(", ")}`;
    return `  - ${where}: ${e.message}`;
  });
  throw new ConfigError(`invalid configuration (${source}):\n${lines.join("\n")}`);
}

export interface LoadConfigOptions {
  /** Path of a config file; without it, ./fabric.config.json is used when it exists. */
  configFile?: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Values from command-line flags (highest precedence). */
  flags?: PartialConfig;
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
  const merged = mergeConfig(mergeConfig(mergeConfig(DEFAULT_CONFIG as PartialConfig, fileConfig), envConfig), flags);
  validateConfig(merged, sources.join(" + "));
  const config = { ...merged, base_dir: baseDir } as FabricConfig;
  if (config.executor.default_timeout_ms > config.executor.max_timeout_ms) {
    throw new ConfigError("invalid configuration: executor.default_timeout_ms must not exceed executor.max_timeout_ms");
  }
  return config;
}

/** The port a service listens on under this configuration. */
export function servicePort(config: FabricConfig, name: ServiceName): number {
  // port_base 0 puts every service on an ephemeral port (tests, benchmarks).
  return config.services[name]?.port ?? (config.port_base === 0 ? 0 : config.port_base + SERVICE_NAMES.indexOf(name));
}

/** The base URL other services use to reach a service. */
export function serviceUrl(config: FabricConfig, name: ServiceName): string {
  const configured = config.services[name]?.url;
  if (configured) return configured.replace(/\/+$/, "");
  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  const h = host.includes(":") ? `[${host}]` : host;
  return `http://${h}:${servicePort(config, name)}`;
}
