/**
 * The fabric's settings table: every option of `fabric.config.json`, with its type, default, environment variable,
 * doc and constraints. CONFIG_SCHEMA, DEFAULT_CONFIG, the FABRIC_* variables read by `configFromEnv`, the
 * FabricConfig type and docs/configuration.md are all derived from it (docs/configure.md explains where settings
 * come from).
 */
import { defineSettings, setting, type SettingsValues } from "@nodefabric/sdk";
import { SERVICE_NAMES, type ServiceName } from "../service-names.js";
import { DEFAULT_SERVICE_LIMITS } from "../http/edge.js";
import { AUTH_MODES } from "../http/auth-plugin.js";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const JWT_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"] as const;
const HTTP_URL = "^https?://";

const serviceEndpoint = (name: ServiceName) =>
  setting.group(
    `The ${name} service.`,
    {
      url: setting.string({ doc: "Base URL other services use to reach this one.", env: `FABRIC_${name.toUpperCase().replace(/-/g, "_")}_URL`, pattern: HTTP_URL }),
      port: setting.integer({ doc: "Port this service listens on (default: port_base + its index).", min: 0, max: 65535 }),
    },
    { optional: true },
  );
type ServiceEndpointSpec = ReturnType<typeof serviceEndpoint>;

/** The LLM profiles and prices @nodefabric/handler-llm reads from this file (docs/llm.md). */
const llmSection = setting.group(
  "Named LLM profiles and prices for @nodefabric/handler-llm (docs/llm.md), which reads this section from the file itself.",
  {
    default_profile: setting.string({ doc: "The profile a call that names none uses.", minLength: 1 }),
    profiles: setting.map(
      "Profiles by name; `scripted` (or any profile with `fixtures`) answers from fixtures with no model.",
      setting.group("A profile.", {
        base_url: setting.string({ doc: "The API's base URL, such as https://api.openai.com/v1; calls go to `<base_url>/chat/completions`.", minLength: 1 }),
        model: setting.string({ doc: "The model to call.", minLength: 1 }),
        api_key_env: setting.string({ doc: "The environment variable holding the key.", minLength: 1 }),
        api_key_secret: setting.string({ doc: "The executor secret holding the key (sent only to the hosts it is bound to).", minLength: 1 }),
        structured_output: setting.oneOf(["json_schema", "json_object", "tool"], { doc: "The first structured-output mode to try (default json_schema)." }),
        timeout_ms: setting.integer({ doc: "Per-request timeout in ms (default 120000).", min: 1 }),
        fixtures: setting.string({ doc: "A JSON file of fixtures to answer from with no model.", minLength: 1 }),
      }),
      { optional: true },
    ),
    prices: setting.map(
      "Prices per model (or model prefix), in the unit of a run's max_cost, per million tokens.",
      setting.group("A model's price.", {
        input_per_million: setting.number({ doc: "Price of a million prompt tokens.", min: 0, required: true }),
        output_per_million: setting.number({ doc: "Price of a million completion tokens.", min: 0, required: true }),
      }),
      { optional: true },
    ),
  },
  { optional: true },
);

/** Every option of fabric.config.json (and of the merged configuration). */
export const FABRIC_SETTINGS = defineSettings(
  "@nodefabric/core",
  {
    host: setting.string({ doc: "Address every service listens on.", env: "FABRIC_HOST", default: "127.0.0.1", minLength: 1 }),
    port_base: setting.integer({ doc: "First port; services take port_base + 0..6 in port order (0: ephemeral ports).", env: "FABRIC_PORT_BASE", default: 8080, min: 0, max: 65528 }),
    data_dir: setting.string({ doc: "Where SQLite files and other state go.", env: "FABRIC_DATA_DIR", default: ".fabric", minLength: 1 }),
    log_level: setting.oneOf(LOG_LEVELS, { doc: "The services' log level.", env: "FABRIC_LOG_LEVEL", default: "info" }),
    services: setting.group(
      "Where each service is reached and listens, by name.",
      Object.fromEntries(SERVICE_NAMES.map((n) => [n, serviceEndpoint(n)])) as { [K in ServiceName]: ServiceEndpointSpec },
    ),
    handlers: setting.list({ doc: "Handler packages or paths for the atomic executor.", env: "FABRIC_HANDLERS", default: [] }),
    discover: setting.list({ doc: "Folders whose node_modules are scanned for handler packages.", env: "FABRIC_DISCOVER", default: [] }),
    plugins: setting.list({ doc: "Plugin packages or paths to load (docs/plugins.md); without any, the discover folders are scanned for plugins.", env: "FABRIC_PLUGINS", default: [] }),
    store: setting.group(
      "Where the stores live: a URL whose scheme a plugin serves (e.g. postgres://…); none means SQLite in data_dir.",
      {
        url: setting.string({ doc: "The stores' URL (also --store).", env: "FABRIC_STORE_URL", pattern: "^[A-Za-z][A-Za-z0-9+.-]*:", present: true }),
        pool_size: setting.integer({ doc: "Connections a pooled store may hold.", min: 1, max: 10000 }),
        statement_timeout_ms: setting.integer({ doc: "Longest a single statement may run (ms).", min: 0 }),
        connect_timeout_ms: setting.integer({ doc: "Longest opening a connection, or waiting for a pooled one, may take (ms; the store's default when unset).", min: 1 }),
        query_timeout_ms: setting.integer({ doc: "Longest the driver waits for one query's answer before giving the connection up (ms; 0 = no limit).", min: 0 }),
      },
      { optional: true },
    ),
    policy: setting.string({ doc: "Cedar policy file for the PDP; none means allow everything.", env: "FABRIC_POLICY", minLength: 1 }),
    policy_entities: setting.string({ doc: "Cedar entities JSON file for the PDP (groups, attributes).", env: "FABRIC_POLICY_ENTITIES", minLength: 1 }),
    llm: llmSection,
    policy_checks: setting.boolean({ doc: "Whether the coordinator asks the PDP at its checkpoints.", env: "FABRIC_POLICY_CHECKS", default: true }),
    executor: setting.group("The atomic executor.", {
      concurrency: setting.integer({ doc: "Executions run at once.", env: "FABRIC_EXECUTOR_CONCURRENCY", default: 1024, min: 1, max: 100000 }),
      default_timeout_ms: setting.integer({ doc: "An execution's timeout when its node type sets none (ms); at most max_timeout_ms.", default: 30_000, min: 1 }),
      max_timeout_ms: setting.integer({ doc: "The longest timeout any execution gets (ms).", default: 300_000, min: 1 }),
      egress: setting.group("Where `http.request` may connect besides public addresses (nothing, by default); a node type can never widen it.", {
        allow_private: setting.boolean({ doc: "Allows loopback, private, link-local and CGNAT addresses (not cloud metadata ones).", env: "FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE", default: false }),
        allow_cidrs: setting.list({ doc: 'Addresses or CIDR ranges allowed whatever they are, such as "10.1.0.0/16" or "127.0.0.1/32".', env: "FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS", default: [] }),
        allow_hosts: setting.list({ doc: 'Host names (or "*.domain") whose addresses are not checked, for internal APIs reached by name.', env: "FABRIC_EXECUTOR_EGRESS_ALLOW_HOSTS", default: [] }),
      }),
      secret_hosts: setting.map(
        "The hosts each secret may be sent to by `http.request`; a secret with no entry is sent nowhere.",
        setting.list({ doc: "The hosts (`host`, `host:port`, `*.domain`) the secret NAME may be sent to." }),
        { envPrefix: "FABRIC_EXECUTOR_SECRET_HOSTS_" },
      ),
      result_cache: setting.group(
        "The bounds of the executor's result cache (docs/memory.md).",
        {
          max_entries: setting.integer({ doc: "Most results kept.", min: 0 }),
          max_bytes: setting.integer({ doc: "Most bytes of results kept.", min: 0 }),
          ttl_ms: setting.integer({ doc: "How long a result is kept (ms).", min: 1 }),
        },
        { optional: true },
      ),
    }),
    auth: setting.group("Authentication: how services verify callers (inbound) and obtain tokens of their own (outbound); docs/auth.md.", {
      mode: setting.oneOf(AUTH_MODES, { doc: "`fabric start` defaults to required, `fabric dev` to disabled (loopback only).", env: "FABRIC_AUTH_MODE", default: "disabled" }),
      issuer: setting.string({ doc: "The `iss` tokens must carry (with OIDC discovery, the discovered one by default).", env: "FABRIC_AUTH_ISSUER", minLength: 1 }),
      jwks_url: setting.string({ doc: "Verification keys from a JWKS URL (one of jwks_url, jwks_file, oidc_discovery_url).", env: "FABRIC_AUTH_JWKS_URL", pattern: HTTP_URL }),
      jwks_file: setting.string({ doc: "Verification keys from a JWKS file.", env: "FABRIC_AUTH_JWKS_FILE", minLength: 1 }),
      oidc_discovery_url: setting.string({ doc: "Verification keys (and issuer) from OpenID discovery.", env: "FABRIC_AUTH_OIDC_DISCOVERY_URL", pattern: HTTP_URL }),
      algorithms: setting.list({ doc: "Accepted `alg` values (default RS256, PS256, ES256, EdDSA).", env: "FABRIC_AUTH_ALGORITHMS", minItems: 1, items: { enum: [...JWT_ALGORITHMS] } }),
      clock_tolerance_s: setting.integer({ doc: "Leeway for `exp` and `nbf` (seconds).", default: 60, min: 0, max: 3600 }),
      typ: setting.string({ doc: "The `typ` header tokens must carry (unchecked when unset).", env: "FABRIC_AUTH_TYP", minLength: 1 }),
      jwks_cache_max_age_s: setting.number({ doc: "How long fetched keys are used before they are fetched again (seconds).", default: 600, min: 0 }),
      jwks_cooldown_s: setting.number({ doc: "The pause after a key fetch before an unknown `kid` causes another (seconds).", default: 30, min: 0 }),
      signing_key_file: setting.string({ doc: "Outbound, option 1: a private JWK that mints this fabric's service tokens.", env: "FABRIC_AUTH_SIGNING_KEY_FILE", minLength: 1 }),
      token_ttl_s: setting.integer({ doc: "Lifetime of minted service tokens (seconds).", default: 300, min: 30, max: 86400 }),
      token_url: setting.string({ doc: "Outbound, option 2: the token endpoint of OAuth2 client credentials.", env: "FABRIC_AUTH_TOKEN_URL", pattern: HTTP_URL }),
      client_id: setting.string({ doc: "The client-credentials client id.", env: "FABRIC_AUTH_CLIENT_ID", minLength: 1 }),
      client_secret: setting.string({ doc: "The client-credentials secret (or client_secret_file).", env: "FABRIC_AUTH_CLIENT_SECRET", minLength: 1 }),
      client_secret_file: setting.string({ doc: "A file holding the client-credentials secret.", env: "FABRIC_AUTH_CLIENT_SECRET_FILE", minLength: 1 }),
      token_scope: setting.string({ doc: "A fixed `scope` for client-credentials requests (default: what each target needs).", env: "FABRIC_AUTH_TOKEN_SCOPE", minLength: 1 }),
      audience_parameter: setting.oneOf(["audience", "resource", "none"], { doc: "How the target audience is named in a client-credentials request.", default: "audience" }),
      assignment_ttl_s: setting.integer({ doc: "Lifetime of assignment tokens (seconds).", default: 900, min: 60, max: 86400 }),
      assignment_secret_file: setting.string({ doc: "The coordinator's assignment secret (default: `<data_dir>/assignment-secret`, created on first start).", minLength: 1 }),
      oidc: setting.group(
        "An OpenID provider people log in with in a browser (the console); only told to pages, tokens are still verified with the keys above.",
        {
          issuer: setting.string({ doc: "The provider's issuer URL.", pattern: HTTP_URL, required: true }),
          client_id: setting.string({ doc: "The public client (no secret; authorization code with PKCE) registered there for the console.", minLength: 1, required: true }),
          scope: setting.string({ doc: "The scope the console asks for.", minLength: 1 }),
        },
        { optional: true },
      ),
    }),
    limits: setting.group("The limits of every service's HTTP edge (docs/configure.md, \"Limits at the HTTP edge\").", {
      max_json_depth: setting.integer({ doc: "Deepest nesting of objects and arrays in a JSON request body (the top level counts as 1); deeper gets 400.", env: "FABRIC_LIMITS_MAX_JSON_DEPTH", default: DEFAULT_SERVICE_LIMITS.maxJsonDepth, min: 1, max: 100000 }),
      max_body_bytes: setting.integer({ doc: "Largest request body in bytes; larger gets 413.", env: "FABRIC_LIMITS_MAX_BODY_BYTES", default: DEFAULT_SERVICE_LIMITS.maxBodyBytes, min: 1 }),
      max_in_flight: setting.integer({ doc: "Requests in flight per service past which it answers 503 with Retry-After (0: no bound); streams aside.", env: "FABRIC_LIMITS_MAX_IN_FLIGHT", default: DEFAULT_SERVICE_LIMITS.maxInFlight, min: 0 }),
      max_streams: setting.integer({ doc: "Event streams and `Prefer: wait` long polls open per service past which new ones get 503 (0: no bound).", env: "FABRIC_LIMITS_MAX_STREAMS", default: DEFAULT_SERVICE_LIMITS.maxStreams, min: 0 }),
      max_header_bytes: setting.integer({ doc: "Largest request head (request line and headers) in bytes; larger gets 431.", env: "FABRIC_LIMITS_MAX_HEADER_BYTES", default: DEFAULT_SERVICE_LIMITS.maxHeaderBytes, min: 1024 }),
      headers_timeout_ms: setting.integer({ doc: "Time a client has to send its request head (ms); then 408 and the connection closes.", env: "FABRIC_LIMITS_HEADERS_TIMEOUT_MS", default: DEFAULT_SERVICE_LIMITS.headersTimeoutMs, min: 1 }),
      request_timeout_ms: setting.integer({ doc: "Time a client has to send its whole request (ms; 0: no bound); then 408 and the connection closes.", env: "FABRIC_LIMITS_REQUEST_TIMEOUT_MS", default: DEFAULT_SERVICE_LIMITS.requestTimeoutMs, min: 0 }),
      keep_alive_timeout_ms: setting.integer({ doc: "How long an idle keep-alive connection stays open (ms).", env: "FABRIC_LIMITS_KEEP_ALIVE_TIMEOUT_MS", default: DEFAULT_SERVICE_LIMITS.keepAliveTimeoutMs, min: 1 }),
    }),
    coordinator: setting.group(
      "The Run Coordinator's timings, and where it asks its policy questions.",
      {
        run_lease_ms: setting.integer({ doc: "With a shared store: how long a coordinator's hold on its runs lasts without renewal (default 10000).", env: "FABRIC_COORDINATOR_RUN_LEASE_MS", min: 100, max: 3600000 }),
        composite_lease_ms: setting.integer({ doc: "A composite making no progress for this long gets its `:begin` again (default 10000).", env: "FABRIC_COORDINATOR_COMPOSITE_LEASE_MS", min: 100, max: 3600000 }),
        executor_wait_ms: setting.integer({ doc: "How long a NodeRun waits for an executor it cannot reach before it fails `executor_unavailable` (default 300000).", env: "FABRIC_COORDINATOR_EXECUTOR_WAIT_MS", min: 0, max: 86400000 }),
        public_url: setting.string({ doc: "The base URL other coordinators and composite executors reach this one at (default: services.run-coordinator.url, else its listening address).", env: "FABRIC_COORDINATOR_PUBLIC_URL", pattern: "^https?://[^/?#]+/*$" }),
        embedded_pdp: setting.boolean({
          doc: "Decides the coordinator's policy questions in its own process, with `policy` and `policy_entities`, instead of asking the PDP service over HTTP (default false; with `fabric start run-coordinator`, one exchange less per run; the composite executor still asks the PDP service).",
          env: "FABRIC_COORDINATOR_EMBEDDED_PDP",
        }),
      },
      { optional: true },
    ),
    registry: setting.group(
      "The Node Registry.",
      { executor_ttl_ms: setting.integer({ doc: "How long an executor stays listed after its last heartbeat (default 10000).", env: "FABRIC_REGISTRY_EXECUTOR_TTL_MS", min: 100, max: 86_400_000 }) },
      { optional: true },
    ),
    gateway: setting.group(
      "The Run Gateway.",
      { coordinators: setting.list({ doc: "Coordinators to spread requests over, each a base URL with no path (default: services.run-coordinator).", env: "FABRIC_GATEWAY_COORDINATORS", minItems: 1, uniqueItems: true }) },
      { optional: true },
    ),
  },
  { intro: "The fabric itself: `fabric.config.json` (or `--config FILE`), then these environment variables, then flags, over the defaults ([Configure a fabric](configure.md))." },
);

type Settings = SettingsValues<(typeof FABRIC_SETTINGS)["fields"]>;

/** The fabric's configuration, as `loadConfig` gives it. */
export type FabricConfig = Settings & {
  /** The folder relative paths are resolved against (the config file's folder, or the working directory). */
  base_dir: string;
};
export type ServiceEndpointConfig = NonNullable<FabricConfig["services"][ServiceName]>;
export type StoreConfig = NonNullable<FabricConfig["store"]>;
export type CoordinatorConfig = NonNullable<FabricConfig["coordinator"]>;
export type EgressConfig = FabricConfig["executor"]["egress"];
export type AuthConfig = FabricConfig["auth"];
export type LimitsConfig = FabricConfig["limits"];
export type LlmSettings = NonNullable<FabricConfig["llm"]>;

type DeepPartial<T> = T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;

/** Some of the options: a file, the environment, flags or a command's defaults. */
export type PartialConfig = DeepPartial<Omit<FabricConfig, "executor" | "services">> & {
  executor?: DeepPartial<Omit<FabricConfig["executor"], "secret_hosts">> & { secret_hosts?: Record<string, string[]> };
  services?: FabricConfig["services"];
};

/** JSON Schema of fabric.config.json (and of the merged configuration). */
export const CONFIG_SCHEMA = (() => {
  const schema = FABRIC_SETTINGS.schema();
  return { ...schema, properties: { $schema: { type: "string" }, ...schema.properties, base_dir: { type: "string" } } };
})();

export const DEFAULT_CONFIG: Omit<FabricConfig, "base_dir"> = FABRIC_SETTINGS.defaults();
