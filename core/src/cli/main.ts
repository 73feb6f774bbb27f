#!/usr/bin/env node
/**
 * The `fabric` command: run the fabric (`dev`, `start <service>`) and work with node types.
 */
import { Command, InvalidArgumentError, Option } from "commander";
import { SERVICE_NAMES, type ServiceName } from "../http/service.js";
import { ConfigError, LOG_LEVELS, loadConfig, serviceUrl, type FabricConfig } from "../config.js";
import { startFabric } from "../fabric.js";
import { SERVICE_VERSION } from "../version.js";
import { nodeTypesLs, nodeTypesPublish } from "./node-types-command.js";
import { registerRunCommands } from "./run-command.js";

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
}

function withRunOptions(cmd: Command): Command {
  return cmd
    .option("-c, --config <file>", "configuration file (default: ./fabric.config.json when present)")
    .option("--host <address>", "address to listen on (default 127.0.0.1)")
    .option("--port-base <port>", "first port; services take port-base + 0..6 (default 8080)", parsePort)
    .option("--data-dir <dir>", "where state is kept (default ./.fabric)")
    .option("--handlers <pkg-or-path...>", "handler packages or paths for the atomic executor")
    .option("--discover <dir...>", "scan <dir>/node_modules for handler packages (default: the working directory)")
    .option("--policy <file>", "Cedar policy file for the PDP (default: allow everything)")
    .option("--policy-entities <file>", "Cedar entities JSON file for the PDP")
    .addOption(new Option("--log-level <level>", "log level").choices([...LOG_LEVELS]))
    .option("--url <service=url...>", "where another service is reached, e.g. node-registry=http://10.0.0.5:8084");
}

function flagsToConfig(flags: RunFlags): Parameters<typeof loadConfig>[0] {
  const f: Record<string, unknown> = {};
  if (flags.host !== undefined) f.host = flags.host;
  if (flags.portBase !== undefined) f.port_base = flags.portBase;
  if (flags.dataDir !== undefined) f.data_dir = flags.dataDir;
  if (flags.handlers !== undefined) f.handlers = flags.handlers;
  if (flags.discover !== undefined) f.discover = flags.discover;
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
  return { configFile: flags.config, flags: f as never };
}

async function run(config: FabricConfig, names: readonly ServiceName[]): Promise<void> {
  const fabric = await startFabric(config, names);
  const width = Math.max(...fabric.services.map((s) => s.name.length));
  process.stdout.write(`NodeFabric ${SERVICE_VERSION}: ${names.length === SERVICE_NAMES.length ? "all services in one process" : names.join(", ")}\n`);
  for (const s of fabric.services) process.stdout.write(`  ${s.name.padEnd(width)}  ${s.url}\n`);
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

/** Builds the commander program (exported for tests). */
export function buildProgram(): Command {
  const program = new Command("fabric")
    .description("NodeFabric: run work as a tree of node executions")
    .version(SERVICE_VERSION, "-v, --version")
    .showHelpAfterError();

  withRunOptions(program.command("dev").description("run all seven services in one process, on SQLite")).action(async (flags: RunFlags) => {
    const config = loadConfig(flagsToConfig(flags));
    await run(config, SERVICE_NAMES);
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
    const config = loadConfig(flagsToConfig(flags));
    await run(config, [service]);
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
    .action(async (q: string | undefined, opts: { kind?: "atomic" | "composite"; json?: boolean; registry?: string }) => {
      const url = opts.registry ?? serviceUrl(loadConfig(), "node-registry");
      process.exitCode = await nodeTypesLs(url, { q, kind: opts.kind, json: opts.json });
    });
  nodeTypes
    .command("publish")
    .description("publish a NodeType (a JSON file holding a NodeType or a NodeTypePublishRequest)")
    .argument("<file>", "JSON file")
    .addOption(registryOption())
    .action(async (file: string, opts: { registry?: string }) => {
      const url = opts.registry ?? serviceUrl(loadConfig(), "node-registry");
      process.exitCode = await nodeTypesPublish(url, file);
    });

  registerRunCommands(program);

  return program;
}

async function main(): Promise<void> {
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`fabric: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`fabric: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

void main();
