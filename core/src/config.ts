/**
 * Fabric configuration: defaults, then `fabric.config.json`, then FABRIC_* environment variables, then flags.
 * The merged result is validated against a JSON Schema; a bad option stops the start with a clear message.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { SERVICE_NAMES, type ServiceName } from "./http/service.js";
import { DEFAULT_SERVICE_LIMITS, type ServiceLimits } from "./http/edge.js";
import { AUTH_MODES, type AuthMode } from "./http/auth-plugin.js";
import { checkAllowHost, parseCidr } from "./services/atomic-executor/egress-policy.js";
import { checkSecretHost, secretHostsFromEnv } from "@nodefabric/sdk/runtime";
import { parseSqliteDriver } from "./store/sqlite-driver.js";
import { parseSqliteWriter } from "./store/sqlite-writer-thread.js";

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
  /** Plugin packages or paths to load (docs/plugins.md); without any, the discover folders are scanned for plugins. */
  plugins: string[];
  /** Where the stores live: a URL whose scheme a plugin serves (e.g. postgres://…); none means SQLite in data_dir. */
  store?: StoreConfig;
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
    /** Where `http.request` may connect besides public addresses (nothing, by default). */
    egress: EgressConfig;
    /** The hosts each secret may be sent to by `http.request`; a secret with no entry is sent nowhere. */
    secret_hosts: Record<string, string[]>;
    /** The bounds of the executor's result cache (docs/memory.md). */
    result_cache?: { max_entries?: number; max_bytes?: number; ttl_ms?: number };
  };
  auth: AuthConfig;
  /** The limits of every service's HTTP edge. */
  limits: LimitsConfig;
  /** The Run Gateway: `coordinators` lists several coordinators to spread requests over (default: services.run-coordinator). */
  gateway?: { coordinators?: string[] };
  /** The Node Registry: `executor_ttl_ms`, how long an executor stays listed after its last heartbeat (default 10 s). */
  registry?: { executor_ttl_ms?: number };
  /** The Run Coordinator's timings (ms). */
  coordinator?: CoordinatorConfig;
  /**
   * Named LLM profiles and prices for @nodefabric/handler-llm (docs/llm.md), which reads them from the file itself; the
   * fabric only lets the key through.
   */
  llm?: Record<string, unknown>;
  /** The folder relative paths are resolved against (the config file's folder, or the working directory). */
  base_dir: string;
}

/** The `coordinator` option. */
export interface CoordinatorConfig {
  /** With a shared store: how long a coordinator's hold on its runs lasts without renewal (default 10000). */
  run_lease_ms?: number;
  /** A composite making no progress for this long gets its `:begin` again (default 10000). */
  composite_lease_ms?: number;
  /**
   * How long a NodeRun waits for an executor it cannot reach (a restart, none registered) before it fails
   * `executor_unavailable` (default 300000; docs/upstream-failures.md, "An executor that cannot be reached").
   */
  executor_wait_ms?: number;
  /**
   * The base URL other coordinators and composite executors reach this coordinator at (default:
   * services.run-coordinator.url, else its listening address). Needed when it listens on 0.0.0.0 behind a host name.
   */
  public_url?: string;
}

/** The `store` option: the stores of a plugin, chosen by the scheme of `url`. */
export interface StoreConfig {
  url: string;
  /** Connections a pooled store may hold. */
  pool_size?: number;
  /** Longest a single statement may run (ms). */
  statement_timeout_ms?: number;
  /** Longest opening a connection, or waiting for a pooled one, may take (ms; the store's default when unset). */
  connect_timeout_ms?: number;
  /** Longest the driver waits for one query's answer before giving the connection up (ms; 0 = no limit). */
  query_timeout_ms?: number;
}

/**
 * The atomic executor's egress policy for `http.request` (`ctx.egress`): loopback, private, link-local, metadata and
 * other non-public addresses are refused at connect time unless allowed here. A node type can never widen it.
 */
export interface EgressConfig {
  /** Allows loopback, private, link-local and CGNAT addresses (not cloud metadata ones). */
  allow_private: boolean;
  /** Addresses or CIDR ranges allowed whatever they are, such as "10.1.0.0/16" or "127.0.0.1/32". */
  allow_cidrs: string[];
  /** Host names (or "*.domain") whose addresses are not checked. */
  allow_hosts: string[];
}

/**
 * The limits every service's HTTP edge runs with (defaults: DEFAULT_SERVICE_LIMITS in http/edge.ts). Each is also a
 * FABRIC_LIMITS_<NAME> environment variable, e.g. FABRIC_LIMITS_MAX_JSON_DEPTH.
 */
export interface LimitsConfig {
  /** Deepest nesting of objects and arrays in a JSON request body (the top level counts as 1); deeper gets 400. */
  max_json_depth: number;
  /** Largest request body in bytes; larger gets 413. */
  max_body_bytes: number;
  /** Requests in flight per service past which it answers 503 with Retry-After (0: no bound); streams aside. */
  max_in_flight: number;
  /** Event streams and `Prefer: wait` long polls open per service past which new ones get 503 (0: no bound). */
  max_streams: number;
  /** Largest request head (request line and headers) in bytes; larger gets 431. */
  max_header_bytes: number;
  /** Time a client has to send its request head (ms); then 408 and the connection closes. */
  headers_timeout_ms: number;
  /** Time a client has to send its whole request (ms; 0: no bound); then 408 and the connection closes. */
  request_timeout_ms: number;
  /** How long an idle keep-alive connection stays open (ms). */
  keep_alive_timeout_ms: number;
}

/** The option names of `limits`, each with its ServiceLimits field. */
const LIMIT_FIELDS = {
  max_json_depth: "maxJsonDepth",
  max_body_bytes: "maxBodyBytes",
  max_in_flight: "maxInFlight",
  max_streams: "maxStreams",
  max_header_bytes: "maxHeaderBytes",
  headers_timeout_ms: "headersTimeoutMs",
  request_timeout_ms: "requestTimeoutMs",
  keep_alive_timeout_ms: "keepAliveTimeoutMs",
} as const satisfies Record<keyof LimitsConfig, keyof ServiceLimits>;

/** The `limits` configuration as the services take it. */
export function serviceLimits(limits: LimitsConfig): ServiceLimits {
  const out: ServiceLimits = {};
  for (const [option, field] of Object.entries(LIMIT_FIELDS) as Array<[keyof LimitsConfig, keyof ServiceLimits]>) {
    if (limits?.[option] !== undefined) out[field] = limits[option];
  }
  return out;
}

/** Authentication: how services verify callers (inbound) and obtain tokens of their own (outbound). */
export interface AuthConfig {
  /** `fabric start` defaults to `required`, `fabric dev` to `disabled` (loopback only). */
  mode: AuthMode;
  /** The `iss` tokens must carry (with OIDC discovery, the discovered one by default). */
  issuer?: string;
  /** Where verification keys come from: exactly one of these three when the mode is not `disabled`. */
  jwks_url?: string;
  jwks_file?: string;
  oidc_discovery_url?: string;
  /** Accepted `alg` values (default RS256, PS256, ES256, EdDSA). */
  algorithms?: string[];
  /** Leeway for `exp` and `nbf`, in seconds. */
  clock_tolerance_s: number;
  /** The `typ` header tokens must carry (unchecked when unset). */
  typ?: string;
  /** How long fetched keys are used before they are fetched again, and the pause after a fetch before an unknown `kid` causes another (seconds). */
  jwks_cache_max_age_s: number;
  jwks_cooldown_s: number;
  /** Outbound, option 1: a private JWK that mints this fabric's service tokens. */
  signing_key_file?: string;
  /** Lifetime of minted service tokens (seconds). */
  token_ttl_s: number;
  /** Outbound, option 2: OAuth2 client credentials. */
  token_url?: string;
  client_id?: string;
  client_secret?: string;
  client_secret_file?: string;
  /** A fixed `scope` for client-credentials requests (default: what each target needs). */
  token_scope?: string;
  /** How the target audience is named in a client-credentials request. */
  audience_parameter: "audience" | "resource" | "none";
  /** Lifetime of assignment tokens (seconds). */
  assignment_ttl_s: number;
  /** The coordinator's assignment secret (default: <data_dir>/assignment-secret, created on first start). */
  assignment_secret_file?: string;
  /**
   * An OpenID provider people log in with in a browser (the console): its issuer URL, and the public client (no
   * secret; authorization code with PKCE) registered there for the console. Only told to pages; tokens are still
   * verified with the keys above.
   */
  oidc?: { issuer: string; client_id: string; scope?: string };
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
    plugins: { type: "array", items: { type: "string", minLength: 1 } },
    store: {
      type: "object",
      additionalProperties: false,
      properties: {
        url: { type: "string", pattern: "^[A-Za-z][A-Za-z0-9+.-]*:" },
        pool_size: { type: "integer", minimum: 1, maximum: 10000 },
        statement_timeout_ms: { type: "integer", minimum: 0 },
        connect_timeout_ms: { type: "integer", minimum: 1 },
        query_timeout_ms: { type: "integer", minimum: 0 },
      },
    },
    policy: { type: "string", minLength: 1 },
    policy_entities: { type: "string", minLength: 1 },
    llm: { type: "object" },
    policy_checks: { type: "boolean" },
    executor: {
      type: "object",
      additionalProperties: false,
      properties: {
        concurrency: { type: "integer", minimum: 1, maximum: 100000 },
        default_timeout_ms: { type: "integer", minimum: 1 },
        max_timeout_ms: { type: "integer", minimum: 1 },
        egress: {
          type: "object",
          additionalProperties: false,
          properties: {
            allow_private: { type: "boolean" },
            allow_cidrs: { type: "array", items: { type: "string", minLength: 1 } },
            allow_hosts: { type: "array", items: { type: "string", minLength: 1 } },
          },
        },
        secret_hosts: { type: "object", additionalProperties: { type: "array", items: { type: "string", minLength: 1 } } },
        result_cache: {
          type: "object",
          additionalProperties: false,
          properties: {
            max_entries: { type: "integer", minimum: 0 },
            max_bytes: { type: "integer", minimum: 0 },
            ttl_ms: { type: "integer", minimum: 1 },
          },
        },
      },
    },
    auth: {
      type: "object",
      additionalProperties: false,
      properties: {
        mode: { enum: [...AUTH_MODES] },
        issuer: { type: "string", minLength: 1 },
        jwks_url: { type: "string", pattern: "^https?://" },
        jwks_file: { type: "string", minLength: 1 },
        oidc_discovery_url: { type: "string", pattern: "^https?://" },
        algorithms: { type: "array", minItems: 1, items: { enum: ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"] } },
        clock_tolerance_s: { type: "integer", minimum: 0, maximum: 3600 },
        typ: { type: "string", minLength: 1 },
        jwks_cache_max_age_s: { type: "number", minimum: 0 },
        jwks_cooldown_s: { type: "number", minimum: 0 },
        signing_key_file: { type: "string", minLength: 1 },
        token_ttl_s: { type: "integer", minimum: 30, maximum: 86400 },
        token_url: { type: "string", pattern: "^https?://" },
        client_id: { type: "string", minLength: 1 },
        client_secret: { type: "string", minLength: 1 },
        client_secret_file: { type: "string", minLength: 1 },
        token_scope: { type: "string", minLength: 1 },
        audience_parameter: { enum: ["audience", "resource", "none"] },
        assignment_ttl_s: { type: "integer", minimum: 60, maximum: 86400 },
        assignment_secret_file: { type: "string", minLength: 1 },
        oidc: {
          type: "object",
          additionalProperties: false,
          required: ["issuer", "client_id"],
          properties: {
            issuer: { type: "string", pattern: "^https?://" },
            client_id: { type: "string", minLength: 1 },
            scope: { type: "string", minLength: 1 },
          },
        },
      },
    },
    limits: {
      type: "object",
      additionalProperties: false,
      properties: {
        max_json_depth: { type: "integer", minimum: 1, maximum: 100000 },
        max_body_bytes: { type: "integer", minimum: 1 },
        max_in_flight: { type: "integer", minimum: 0 },
        max_streams: { type: "integer", minimum: 0 },
        max_header_bytes: { type: "integer", minimum: 1024 },
        headers_timeout_ms: { type: "integer", minimum: 1 },
        request_timeout_ms: { type: "integer", minimum: 0 },
        keep_alive_timeout_ms: { type: "integer", minimum: 1 },
      },
    },
    coordinator: {
      type: "object",
      additionalProperties: false,
      properties: {
        run_lease_ms: { type: "integer", minimum: 100, maximum: 3600000 },
        composite_lease_ms: { type: "integer", minimum: 100, maximum: 3600000 },
        executor_wait_ms: { type: "integer", minimum: 0, maximum: 86400000 },
        public_url: { type: "string", pattern: "^https?://[^/?#]+/*$" },
      },
    },
    registry: {
      type: "object",
      additionalProperties: false,
      properties: { executor_ttl_ms: { type: "integer", minimum: 100, maximum: 86_400_000 } },
    },
    gateway: {
      type: "object",
      additionalProperties: false,
      properties: { coordinators: { type: "array", minItems: 1, uniqueItems: true, items: { type: "string", minLength: 1 } } },
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
  plugins: [],
  policy_checks: true,
  executor: {
    concurrency: 1024,
    default_timeout_ms: 30_000,
    max_timeout_ms: 300_000,
    egress: { allow_private: false, allow_cidrs: [], allow_hosts: [] },
    secret_hosts: {},
  },
  auth: {
    mode: "disabled",
    clock_tolerance_s: 60,
    jwks_cache_max_age_s: 600,
    jwks_cooldown_s: 30,
    token_ttl_s: 300,
    audience_parameter: "audience",
    assignment_ttl_s: 900,
  },
  limits: {
    max_json_depth: DEFAULT_SERVICE_LIMITS.maxJsonDepth,
    max_body_bytes: DEFAULT_SERVICE_LIMITS.maxBodyBytes,
    max_in_flight: DEFAULT_SERVICE_LIMITS.maxInFlight,
    max_streams: DEFAULT_SERVICE_LIMITS.maxStreams,
    max_header_bytes: DEFAULT_SERVICE_LIMITS.maxHeaderBytes,
    headers_timeout_ms: DEFAULT_SERVICE_LIMITS.headersTimeoutMs,
    request_timeout_ms: DEFAULT_SERVICE_LIMITS.requestTimeoutMs,
    keep_alive_timeout_ms: DEFAULT_SERVICE_LIMITS.keepAliveTimeoutMs,
  },
};

export type PartialConfig = Partial<Omit<FabricConfig, "executor" | "auth" | "limits" | "store">> & {
  store?: Partial<StoreConfig>;
  limits?: Partial<LimitsConfig>;
  executor?: Partial<Omit<FabricConfig["executor"], "egress">> & { egress?: Partial<EgressConfig> };
  auth?: Partial<AuthConfig>;
};

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
  const plugins = envList(env.FABRIC_PLUGINS);
  if (plugins) out.plugins = plugins;
  if (env.FABRIC_STORE_URL) out.store = { url: env.FABRIC_STORE_URL };
  const coordinators = envList(env.FABRIC_GATEWAY_COORDINATORS);
  if (coordinators) out.gateway = { coordinators };
  const ttl = envInt(env, "FABRIC_REGISTRY_EXECUTOR_TTL_MS");
  if (ttl !== undefined) out.registry = { executor_ttl_ms: ttl as number };
  const runLease = envInt(env, "FABRIC_COORDINATOR_RUN_LEASE_MS");
  const compositeLease = envInt(env, "FABRIC_COORDINATOR_COMPOSITE_LEASE_MS");
  const publicUrl = env.FABRIC_COORDINATOR_PUBLIC_URL || undefined;
  const executorWait = envInt(env, "FABRIC_COORDINATOR_EXECUTOR_WAIT_MS");
  if (runLease !== undefined || compositeLease !== undefined || publicUrl !== undefined || executorWait !== undefined) {
    out.coordinator = {};
    if (runLease !== undefined) out.coordinator.run_lease_ms = runLease as number;
    if (compositeLease !== undefined) out.coordinator.composite_lease_ms = compositeLease as number;
    if (executorWait !== undefined) out.coordinator.executor_wait_ms = executorWait as number;
    if (publicUrl !== undefined) out.coordinator.public_url = publicUrl;
  }
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
  egressFromEnv(env, out);
  const auth: Record<string, unknown> = {};
  for (const key of ["mode", "issuer", "jwks_url", "jwks_file", "oidc_discovery_url", "typ", "signing_key_file", "token_url", "client_id", "client_secret", "client_secret_file", "token_scope"] as const) {
    const v = env[`FABRIC_AUTH_${key.toUpperCase()}`];
    if (v) auth[key] = v;
  }
  const algorithms = envList(env.FABRIC_AUTH_ALGORITHMS);
  if (algorithms) auth.algorithms = algorithms;
  if (Object.keys(auth).length > 0) out.auth = auth as Partial<AuthConfig>;
  const limits: Record<string, unknown> = {};
  for (const option of Object.keys(LIMIT_FIELDS)) {
    const v = envInt(env, `FABRIC_LIMITS_${option.toUpperCase()}`);
    if (v !== undefined) limits[option] = v;
  }
  if (Object.keys(limits).length > 0) out.limits = limits as Partial<LimitsConfig>;
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
  mergeEgress(base, over, out);
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

// executor.egress and executor.secret_hosts: environment variables, merging and the checks a schema cannot make.

/** FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE, _ALLOW_CIDRS and _ALLOW_HOSTS, and FABRIC_EXECUTOR_SECRET_HOSTS_<NAME>. */
function egressFromEnv(env: NodeJS.ProcessEnv, out: PartialConfig): void {
  const egress: Partial<EgressConfig> = {};
  const priv = env.FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE;
  if (priv) egress.allow_private = (priv === "true" ? true : priv === "false" ? false : priv) as boolean; // a non-boolean is kept so validation names it
  const cidrs = envList(env.FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS);
  if (cidrs) egress.allow_cidrs = cidrs;
  const hosts = envList(env.FABRIC_EXECUTOR_EGRESS_ALLOW_HOSTS);
  if (hosts) egress.allow_hosts = hosts;
  const secretHosts = secretHostsFromEnv(env);
  if (Object.keys(egress).length > 0) out.executor = { ...out.executor, egress };
  if (Object.keys(secretHosts).length > 0) out.executor = { ...out.executor, secret_hosts: secretHosts };
}

/** Merges executor.egress option by option, and executor.secret_hosts secret by secret. */
function mergeEgress(base: PartialConfig, over: PartialConfig, out: PartialConfig): void {
  if (base.executor?.egress || over.executor?.egress) out.executor = { ...out.executor, egress: { ...base.executor?.egress, ...over.executor?.egress } };
  if (base.executor?.secret_hosts || over.executor?.secret_hosts) {
    out.executor = { ...out.executor, secret_hosts: { ...base.executor?.secret_hosts, ...over.executor?.secret_hosts } };
  }
}

/** The CIDR ranges and host entries of executor.egress and executor.secret_hosts, each bad one named. */
function checkEgressConfig(executor: FabricConfig["executor"]): void {
  const problems: string[] = [];
  const egress = executor.egress ?? {};
  (egress.allow_cidrs ?? []).forEach((c, i) => {
    try {
      parseCidr(c);
    } catch (err) {
      problems.push(`executor.egress.allow_cidrs[${i}]: ${(err as Error).message}`);
    }
  });
  (egress.allow_hosts ?? []).forEach((h, i) => {
    const problem = checkAllowHost(h);
    if (problem) problems.push(`executor.egress.allow_hosts[${i}]: ${problem}`);
  });
  for (const [name, hosts] of Object.entries(executor.secret_hosts ?? {})) {
    hosts.forEach((h, i) => {
      const problem = checkSecretHost(h);
      if (problem) problems.push(`executor.secret_hosts.${name}[${i}]: ${problem}`);
    });
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
}

/** gateway.coordinators: each an http(s) base URL with no path (the gateway adds the API's paths). */
function checkGatewayCoordinators(urls: readonly string[]): void {
  const problems = urls.flatMap((u, i) => {
    const url = URL.canParse(u) ? new URL(u) : undefined;
    const base = url && (url.protocol === "http:" || url.protocol === "https:") && url.pathname === "/" && !url.search && !url.hash && !url.username;
    return base ? [] : [`gateway.coordinators[${i}]: ${JSON.stringify(u)} is not a coordinator base URL such as http://10.0.0.7:8081`];
  });
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
}

/** The combinations of auth options that cannot work, each named. */
function checkAuthConfig(a: AuthConfig): void {
  const problems: string[] = [];
  const sources = (["jwks_url", "jwks_file", "oidc_discovery_url"] as const).filter((k) => a[k] !== undefined);
  if (sources.length > 1) problems.push(`auth: set only one of ${sources.join(", ")}`);
  if (a.mode !== "disabled") {
    if (sources.length === 0) {
      problems.push(
        `auth.mode is "${a.mode}" but no keys to verify tokens with: set auth.jwks_url, auth.jwks_file or auth.oidc_discovery_url ` +
          `(\`fabric keys generate\` writes a jwks.json and a signing key; or use --auth disabled for local development on loopback)`,
      );
    }
    if (!a.issuer && a.oidc_discovery_url === undefined) problems.push(`auth.issuer is needed to verify tokens (only OIDC discovery can find it)`);
  }
  if (a.signing_key_file !== undefined && a.token_url !== undefined) problems.push("auth: set either signing_key_file (local tokens) or token_url (client credentials), not both");
  if (a.signing_key_file !== undefined && !a.issuer) problems.push("auth.signing_key_file needs auth.issuer: minted tokens carry it");
  if (a.token_url !== undefined) {
    if (!a.client_id) problems.push("auth.token_url needs auth.client_id");
    if ((a.client_secret === undefined) === (a.client_secret_file === undefined)) problems.push("auth.token_url needs exactly one of auth.client_secret and auth.client_secret_file");
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
}

/** Whether `host` is a loopback address (or `localhost`). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./.test(h);
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
