/**
 * The `fabric` command's program: its commands (run the fabric with `dev` and `start <service>`, work with node types,
 * follow runs, make keys and tokens) and those plugins add, built without running anything (main.ts runs it;
 * scripts/docs/cli.mjs writes docs/cli.md from it).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { SERVICE_NAMES, type ServiceName } from "../http/service.js";
import { AUTH_MODES, type AuthMode } from "../http/auth-plugin.js";
import { ConfigError, LOG_LEVELS, loadConfig, type FabricConfig, type LoadConfigOptions } from "../config.js";
// What only serving commands need (every service, the store drivers, the importers) is imported when such a command
// runs, so that a client command (`fabric run`, `runs`, `token mint`, `node-types ls`) starts in a fraction of the time.
import type * as FabricModule from "../fabric.js";
import type { LogFormat } from "../observe/service-logger.js";
import { PluginLoadError, redact, type LoadedPlugin } from "../plugin-loader.js";
import { SERVICE_VERSION } from "../version.js";
import { nodeTypesLs, nodeTypesPublish } from "./node-types-command.js";
import { registerRunCommands } from "./run-command.js";
import { DEV_ISSUER, KEY_ALGORITHMS, SIGNING_KEY_FILE, JWKS_FILE, defaultKeysDir, displayPath, generateKeys, keysGenerateCommand, type KeysGenerateFlags } from "./keys-command.js";
import { tokenMintCommand, type TokenMintFlags } from "./token-command.js";
import { clientTokenOf, registryUrlOf, tokenOption, usageExit } from "./run-cli-context.js";

function parsePort(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError("must be a whole number");
  return Number(value);
}

interface RunFlags {
  config?: string;
  host?: string;
  portBase?: number;
  dataDir?: string;
  handlers?: string[];
  discover?: string[];
  policy?: string;
  policyEntities?: string;
  logLevel?: string;
  url?: string[];
  auth?: AuthMode;
  plugin?: string[];
  store?: string;
  logFormat?: LogFormat;
}

/** The formats of the log lines (observe/service-logger.ts, imported only when a service starts). */
const LOG_FORMATS = ["pretty", "json"] as const satisfies readonly LogFormat[];

function withRunOptions(cmd: Command): Command {
  return cmd
    .option("-c, --config <file>", "configuration file (default: ./fabric.config.json when present)")
    .option("--host <address>", "address to listen on (default 127.0.0.1)")
    .option("--port-base <port>", "first port; services take port-base + 0..6 (default 8080)", parsePort)
    .option("--data-dir <dir>", "where state is kept (default ./.fabric)")
    .option("--handlers <pkg-or-path...>", "handler packages or paths for the atomic executor")
    .option("--discover <dir...>", "scan <dir>/node_modules for handler and plugin packages (default: the working directory)")
    .option("--plugin <pkg-or-path>", "load this plugin package or module (repeatable; see docs/plugins.md)", (v: string, prev: string[] = []) => [...prev, v])
    .option("--store <url>", "keep the stores where a plugin serves this URL's scheme, e.g. postgres://host/db (default: SQLite in the data dir)")
    .option("--policy <file>", "Cedar policy file for the PDP (default: allow everything)")
    .option("--policy-entities <file>", "Cedar entities JSON file for the PDP")
    .addOption(new Option("--log-level <level>", "log level").choices([...LOG_LEVELS]))
    .addOption(
      new Option("--log-format <format>", "log lines: pretty (readable) or json (one object per line) (default: $FABRIC_LOG_FORMAT, else pretty on a terminal and json otherwise)").choices([
        ...LOG_FORMATS,
      ]),
    )
    .option("--url <service=url...>", "where another service is reached, e.g. node-registry=http://10.0.0.5:8084")
    .addOption(
      new Option("--auth [mode]", "authentication of callers: required (the mode of a bare --auth), optional or disabled")
        .choices([...AUTH_MODES])
        .preset("required"),
    );
}

function flagsToConfig(flags: RunFlags): LoadConfigOptions {
  const f: Record<string, unknown> = {};
  if (flags.host !== undefined) f.host = flags.host;
  if (flags.portBase !== undefined) f.port_base = flags.portBase;
  if (flags.dataDir !== undefined) f.data_dir = flags.dataDir;
  if (flags.handlers !== undefined) f.handlers = flags.handlers;
  if (flags.discover !== undefined) f.discover = flags.discover;
  if (flags.plugin !== undefined) f.plugins = flags.plugin;
  if (flags.store !== undefined) f.store = { url: flags.store };
  if (flags.policy !== undefined) f.policy = flags.policy;
  if (flags.policyEntities !== undefined) f.policy_entities = flags.policyEntities;
  if (flags.logLevel !== undefined) f.log_level = flags.logLevel;
  if (flags.url !== undefined) {
    const services: Record<string, { url: string }> = {};
    for (const pair of flags.url) {
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq);
      if (eq < 1 || !(SERVICE_NAMES as readonly string[]).includes(name)) {
        throw new ConfigError(`--url ${pair}: expected <service>=<url> with a service among ${SERVICE_NAMES.join(", ")}`);
      }
      services[name] = { url: pair.slice(eq + 1) };
    }
    f.services = services;
  }
  if (flags.auth !== undefined) f.auth = { mode: flags.auth };
  return { configFile: flags.config, flags: f as never };
}

/** The command that mints a token for `fabric run` (the gateway, and the registry for the latest version). */
function tokenHint(keyFlag: string): string {
  return `npx fabric token mint --aud run-gateway --aud node-registry --scope "runs:read runs:write node-types:read"${keyFlag}`;
}

/**
 * The configuration of `fabric dev`. With authentication on and no keys configured, the fabric uses dev keys in
 * `<data_dir>/keys` (made on first use) and DEV_ISSUER, so `fabric token mint` can sign tokens it accepts.
 */
async function devConfig(flags: RunFlags): Promise<{ config: FabricConfig; authLine?: string }> {
  const options = flagsToConfig(flags);
  // A first pass with authentication off finds the data dir and whether keys are configured: with the mode on and no
  // keys, the real configuration would not validate before the dev keys are added to it.
  const probe = loadConfig({ ...options, flags: { ...options.flags, auth: { ...options.flags?.auth, mode: "disabled" } } });
  const a = probe.auth;
  if (a.jwks_url !== undefined || a.jwks_file !== undefined || a.oidc_discovery_url !== undefined || a.signing_key_file !== undefined || a.token_url !== undefined) {
    const config = loadConfig(options);
    return { config, authLine: config.auth.mode === "disabled" ? undefined : `auth: ${config.auth.mode} (keys as configured)` };
  }
  const keysDir = defaultKeysDir(probe);
  const signingKeyFile = path.join(keysDir, SIGNING_KEY_FILE);
  const devKeys = { jwks_file: path.join(keysDir, JWKS_FILE), signing_key_file: signingKeyFile, issuer: a.issuer ?? DEV_ISSUER };
  const config = loadConfig({ ...options, flags: { ...options.flags, auth: { ...options.flags?.auth, ...devKeys } } });
  const mode = config.auth.mode;
  if (mode === "disabled") return { config: loadConfig(options) };
  const made = existsSync(signingKeyFile) ? undefined : await generateKeys({ outDir: keysDir });
  // `fabric token mint` finds <data_dir>/keys by itself only when it reads the same configuration.
  const keyPath = displayPath(signingKeyFile);
  const keyFlag = flags.dataDir !== undefined || flags.config !== undefined ? ` --key ${/\s/.test(keyPath) ? JSON.stringify(keyPath) : keyPath}` : "";
  return { config, authLine: `auth: ${mode} (${made ? "new dev keys" : "keys"} in ${displayPath(keysDir)}); a token: ${tokenHint(keyFlag)}` };
}

/** The fabric's services and plugin loading, imported on first use. */
const fabricModule = (): Promise<typeof FabricModule> => import("../fabric.js");

async function run(config: FabricConfig, names: readonly ServiceName[], logFormat: LogFormat | undefined, authLine?: string, defaults?: readonly string[]): Promise<void> {
  const { logFormatOf } = await import("../observe/service-logger.js");
  const { pluginsFor, startFabric } = await fabricModule();
  // --log-format, else FABRIC_LOG_FORMAT (one the services could not use stops the start before anything listens,
  // exit 2), else what stdout is.
  logFormat ??= logFormatOf();
  const fabric = await startFabric(config, names, { logFormat, ...(defaults ? { plugins: await pluginsFor(config, undefined, defaults) } : {}) });
  const width = Math.max(...fabric.services.map((s) => s.name.length));
  process.stdout.write(`NodeFabric ${SERVICE_VERSION}: ${names.length === SERVICE_NAMES.length ? "all services in one process" : names.join(", ")}\n`);
  for (const s of fabric.services) process.stdout.write(`  ${s.name.padEnd(width)}  ${s.url}\n`);
  if (fabric.plugins.length > 0) {
    process.stdout.write(`plugins: ${fabric.plugins.map((p) => (p.definition.version ? `${p.definition.name}@${p.definition.version}` : p.definition.name)).join(", ")}\n`);
  }
  // What plugins serve on this process's services, such as the console (plugins' `links`).
  for (const p of fabric.plugins) {
    for (const link of p.definition.links ?? []) {
      const service = fabric.services.find((s) => s.name === link.service);
      if (service) process.stdout.write(`${link.label}: ${service.url.replace(/\/+$/, "")}${link.path}\n`);
    }
  }
  if (config.store?.url) process.stdout.write(`store: ${redact(config.store.url)}\n`);
  if (authLine) process.stdout.write(`${authLine}\n`);
  process.stdout.write(`data: ${config.data_dir}   stop: Ctrl-C\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`\n${signal}: stopping\n`);
    fabric.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
}

/** The commands of `fabric` itself: a plugin may not add one of these names. */
const BUILT_IN_COMMANDS = ["dev", "start", "node-types", "run", "runs", "keys", "token", "help"];

/** Adds the subcommands plugins give; a name `fabric` already has stops the start, naming the plugin. */
function addPluginCommands(program: Command, plugins: readonly LoadedPlugin[]): void {
  for (const p of plugins) {
    for (const [i, factory] of (p.definition.commands ?? []).entries()) {
      let cmd: Command;
      try {
        cmd = factory({ Command });
      } catch (err) {
        throw new PluginLoadError(`plugin ${p.definition.name}: its commands[${i}] failed: ${(err as Error).message}`);
      }
      if (typeof cmd?.name !== "function" || typeof cmd.parseAsync !== "function") throw new PluginLoadError(`plugin ${p.definition.name}: its commands[${i}] did not return a commander Command`);
      const name = cmd.name();
      const taken = program.commands.find((c) => c.name() === name);
      if (taken) throw new PluginLoadError(`plugin ${p.definition.name} adds the command \`${name}\`, which fabric ${BUILT_IN_COMMANDS.includes(name) ? "already has" : "has from another plugin"}`);
      program.addCommand(cmd);
    }
  }
}

/**
 * The plugins whose commands this invocation may run: loaded (from ./fabric.config.json, FABRIC_PLUGINS, `--plugin`,
 * and discovery) unless the command is one of fabric's own, whose run commands load plugins from their configuration.
 * Returns the argument list without the `--plugin` options it used.
 */
export async function pluginsForCommand(argv: string[]): Promise<{ plugins: LoadedPlugin[]; argv: string[] }> {
  const command = argv.slice(2).find((a) => !a.startsWith("-"));
  if (command !== undefined && BUILT_IN_COMMANDS.includes(command)) return { plugins: [], argv };
  const named: string[] = [];
  const rest = argv.slice(0, 2);
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--plugin" && i + 1 < argv.length) named.push(argv[++i]!);
    else if (a.startsWith("--plugin=")) named.push(a.slice("--plugin=".length));
    else rest.push(a);
  }
  const load = async () => (await fabricModule()).pluginsFor(loadConfig({ flags: { auth: { mode: "disabled" }, ...(named.length > 0 ? { plugins: named } : {}) } }));
  // Without a command (help, version), a plugin that cannot load leaves its commands out instead of stopping it.
  const plugins = command === undefined ? await load().catch(() => []) : await load();
  return { plugins, argv: rest };
}

/** Builds the commander program, with the subcommands of the given plugins. */
export function buildProgram(plugins: readonly LoadedPlugin[] = []): Command {
  const program = new Command("fabric")
    .description("NodeFabric: run work as a tree of node executions")
    .version(SERVICE_VERSION, "-v, --version")
    // The program's own options (-v, --version) only before a subcommand: `node-types import --version 1.1.0` is the
    // import's option, not a request for fabric's version.
    .enablePositionalOptions()
    .showHelpAfterError();

  withRunOptions(program.command("dev").description("run all seven services in one process (on SQLite unless --store names a plugin's store)")).action(async (flags: RunFlags) => {
    const { config, authLine } = await devConfig(flags);
    await run(config, SERVICE_NAMES, flags.logFormat, authLine, (await fabricModule()).DEV_DEFAULT_PLUGINS);
  });

  withRunOptions(
    program
      .command("start")
      .description("run one service in its own process")
      .argument("<service>", `one of ${SERVICE_NAMES.join(", ")}`, (v: string) => {
        if (!(SERVICE_NAMES as readonly string[]).includes(v)) throw new InvalidArgumentError(`must be one of ${SERVICE_NAMES.join(", ")}`);
        return v as ServiceName;
      }),
  ).action(async (service: ServiceName, flags: RunFlags) => {
    // A service on its own is a deployment, not a laptop demo: it refuses unauthenticated callers unless told otherwise.
    const config = loadConfig({ ...flagsToConfig(flags), commandDefaults: { auth: { mode: "required" } } });
    await run(config, [service], flags.logFormat, config.auth.mode === "disabled" ? undefined : `auth: ${config.auth.mode}`);
  });

  const nodeTypes = program.command("node-types").description("list and publish node types in the registry");
  const registryOption = () => new Option("--registry <url>", "Node Registry base URL (default: from config, http://127.0.0.1:8084)");
  nodeTypes
    .command("ls")
    .description("list node types whose id contains <q>")
    .argument("[q]", "search text")
    .addOption(new Option("--kind <kind>", "only this kind").choices(["atomic", "composite"]))
    .option("--json", "print JSON instead of a table")
    .addOption(registryOption())
    .addOption(tokenOption())
    .action(async (q: string | undefined, opts: { kind?: "atomic" | "composite"; json?: boolean; registry?: string; token?: string }) => {
      const url = registryUrlOf(opts.registry);
      process.exitCode = await nodeTypesLs(url, { q, kind: opts.kind, json: opts.json, token: clientTokenOf(opts.token) });
    });
  nodeTypes
    .command("publish")
    .description("publish a NodeType (a JSON file holding a NodeType or a NodeTypePublishRequest)")
    .argument("<file>", "JSON file")
    .addOption(registryOption())
    .addOption(tokenOption())
    .action(async (file: string, opts: { registry?: string; token?: string }) => {
      const url = registryUrlOf(opts.registry);
      process.exitCode = await nodeTypesPublish(url, file, clientTokenOf(opts.token));
    });

  nodeTypes
    .command("import")
    .description(
      "publish node types made from an external description, no code and no deploy: every operation of an OpenAPI document (run by http.request), " +
        "every tool of an MCP server (run by mcp.call), or every skill of an A2A agent (run by a2a.send)",
    )
    .option("--from-openapi <file|url>", "the OpenAPI document (3.0, 3.1 or Swagger 2.0), JSON or YAML")
    .option("--from-mcp <url|command>", "the MCP server: a Streamable HTTP URL, or a command that starts a stdio server")
    .option("--from-a2a <card url>", "the A2A agent: the URL of its Agent Card (an agent's base URL reads /.well-known/agent-card.json)")
    .option("--prefix <prefix>", "node_type_id prefix (default: from the API's title, or the MCP server's or A2A agent's name)")
    .option("--version <version>", "version of every node type", "1.0.0")
    .option("--include <tags|ids...>", "only these operations (tags or operationIds), tools (names) or skills (ids); comma-separated or repeated")
    .option("--exclude <tags|ids...>", "leave out these operations (tags or operationIds), tools (names) or skills (ids)")
    .option("--base-url <url>", "OpenAPI: call this base URL instead of the document's server")
    .option("--header <header>", 'MCP, A2A: a header for the server or agent, "Name: value", or "Authorization: Bearer {secret:NAME}" for an executor secret (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option("--server-name <name>", "MCP stdio command: the name the executor's operator gives the server (default: the prefix)")
    .option("--protocol <mode>", "MCP: auto (default: 2026-07-28 when offered, else 2025), legacy, or a revision to pin")
    .option("--dry-run", "print the node types as JSON and publish nothing")
    .addOption(registryOption())
    .addOption(tokenOption())
    .action(
      async (opts: {
        fromOpenapi?: string;
        fromMcp?: string;
        fromA2a?: string;
        prefix?: string;
        version: string;
        include?: string[];
        exclude?: string[];
        baseUrl?: string;
        header?: string[];
        serverName?: string;
        protocol?: string;
        dryRun?: boolean;
        registry?: string;
        token?: string;
      }) => {
        const list = (values?: string[]) => values?.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v !== "");
        if ([opts.fromOpenapi, opts.fromMcp, opts.fromA2a].filter((v) => v !== undefined).length !== 1) {
          process.stderr.write("fabric: node-types import needs one of --from-openapi <file|url>, --from-mcp <url|command> and --from-a2a <card url>\n");
          process.exitCode = 2;
          return;
        }
        if (opts.fromA2a !== undefined) {
          const misplaced = [opts.baseUrl !== undefined && "--base-url", opts.serverName !== undefined && "--server-name", opts.protocol !== undefined && "--protocol"].filter(Boolean);
          if (misplaced.length > 0) {
            process.stderr.write(`fabric: ${misplaced.join(", ")} do${misplaced.length === 1 ? "es" : ""} not apply to --from-a2a (the agent's card says where and how to call it)\n`);
            process.exitCode = 2;
            return;
          }
          const { nodeTypesImportA2a } = await import("./node-types-import-a2a.js");
          process.exitCode = await nodeTypesImportA2a(registryUrlOf(opts.registry), {
            fromA2a: opts.fromA2a,
            prefix: opts.prefix,
            version: opts.version,
            include: list(opts.include),
            exclude: list(opts.exclude),
            headers: opts.header,
            dryRun: opts.dryRun,
            token: clientTokenOf(opts.token),
          });
          return;
        }
        if (opts.fromMcp !== undefined) {
          if (opts.baseUrl !== undefined) {
            process.stderr.write("fabric: --base-url applies to --from-openapi; an MCP server's URL is --from-mcp itself\n");
            process.exitCode = 2;
            return;
          }
          const { nodeTypesImportMcp } = await import("./node-types-import-mcp.js");
          process.exitCode = await nodeTypesImportMcp(registryUrlOf(opts.registry), {
            fromMcp: opts.fromMcp,
            prefix: opts.prefix,
            version: opts.version,
            include: list(opts.include),
            exclude: list(opts.exclude),
            headers: opts.header,
            serverName: opts.serverName,
            protocol: opts.protocol,
            dryRun: opts.dryRun,
            token: clientTokenOf(opts.token),
          });
          return;
        }
        if (opts.header !== undefined || opts.serverName !== undefined || opts.protocol !== undefined) {
          process.stderr.write("fabric: --header, --server-name and --protocol apply to --from-mcp\n");
          process.exitCode = 2;
          return;
        }
        const { nodeTypesImport } = await import("./node-types-import.js");
        process.exitCode = await nodeTypesImport(registryUrlOf(opts.registry), {
          fromOpenApi: opts.fromOpenapi!,
          prefix: opts.prefix,
          version: opts.version,
          include: list(opts.include),
          exclude: list(opts.exclude),
          baseUrl: opts.baseUrl,
          dryRun: opts.dryRun,
          token: clientTokenOf(opts.token),
        });
      },
    );

  registerRunCommands(program);

  const keys = program.command("keys").description("signing keys for a fabric that mints its own tokens").exitOverride(usageExit);
  keys
    .command("generate")
    .description(`write a private signing key (${SIGNING_KEY_FILE}, mode 0600) and its public JWKS (${JWKS_FILE})`)
    .option("--out <dir>", "folder to write to (default: <data_dir>/keys)")
    .addOption(new Option("--alg <alg>", "signing algorithm").choices([...KEY_ALGORITHMS]).default("ES256"))
    .option("--rotate", `replace an existing signing key; the old public keys stay in ${JWKS_FILE} until you remove them`)
    .option("-c, --config <file>", "configuration file, for the data dir (default: ./fabric.config.json when present)")
    .exitOverride(usageExit)
    .action(async (opts: KeysGenerateFlags) => {
      process.exitCode = await keysGenerateCommand(opts);
    });

  const collect = (value: string, previous: string[]) => [...previous, value];
  const token = program.command("token").description("tokens signed with this fabric's signing key").exitOverride(usageExit);
  token
    .command("mint")
    .description("print a signed bearer token (only the token, on stdout)")
    .option("--aud <service>", `the service the token is for (repeatable): ${SERVICE_NAMES.join(", ")}, or nodefabric-<service>`, collect, [])
    .option("--scope <scopes>", "space-separated scopes, e.g. \"runs:read runs:write\" (repeatable)", collect, [])
    .option("--tenant <id>", "tenant_id claim: the token sees only this tenant's runs")
    .option("--sub <subject>", "sub claim (default fabric-cli)")
    .option("--ttl <duration>", "lifetime: seconds, or 15m, 1h (default 1h, at most 24h)")
    .option("--key <file>", "private JWK to sign with (default: auth.signing_key_file, else <data_dir>/keys/signing-key.json)")
    .option("--issuer <iss>", `iss claim (default: auth.issuer, else ${DEV_ISSUER})`)
    .option("--allow-service-scopes", "also mint scopes meant for the fabric's own services (identity:delegate, executors:register)")
    .option("-c, --config <file>", "configuration file (default: ./fabric.config.json when present)")
    .exitOverride(usageExit)
    .action(async (opts: TokenMintFlags) => {
      process.exitCode = await tokenMintCommand(opts);
    });

  addPluginCommands(program, plugins);
  return program;
}
