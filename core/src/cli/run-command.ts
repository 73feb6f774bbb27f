/**
 * `fabric run <node_type_id>[@version]`: starts a run through the gateway and follows it live — a redrawn tree of
 * NodeRuns in a terminal, NDJSON events when piped or with --json — then prints the outputs or the error.
 * Without a version, the latest is asked of the Node Registry that the gateway names (GatewayClient.registryUrl).
 * Also registers `fabric runs …` (see runs-command.ts and runs-follow.ts).
 */
import { readFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import type { Run, RunEvent, RunStartRequest, RunState } from "@nodefabric/schemas";
import { GatewayClient } from "../clients/gateway-client.js";
import { RegistryClient } from "../clients/registry-client.js";
import { FabricError } from "../http/errors.js";
import {
  EXIT_FAILED,
  EXIT_OK,
  UsageError,
  clientAuthOptions,
  clientTokenOf,
  gatewayUrlOf,
  printRunError,
  registryUrlOf,
  reportError,
  tokenOption,
  usageExit,
} from "./run-cli-context.js";
import { RunTreeView, TerminalTreeRenderer, formatOutputs } from "./run-tree-view.js";
import { runsCancel, runsEvents, runsGet, runsLs } from "./runs-command.js";
import { runsFollow } from "./runs-follow.js";
import { followRun } from "./follow-run.js";

export interface RunCommandOptions {
  input?: string;
  inputFile?: string;
  gateway?: string;
  registry?: string;
  runId?: string;
  /** A bearer token for the gateway and the registry (default: $FABRIC_TOKEN). */
  token?: string;
  /** false with --no-follow: start the run, print it, and return. */
  follow: boolean;
  /** NDJSON events and the final run even on a terminal, as when stdout is not one. */
  json?: boolean;
}

const ENDED: ReadonlySet<string> = new Set(["completed", "failed", "canceled"]);

/** Splits `<node_type_id>[@version]`. */
export function parseTarget(target: string): { nodeTypeId: string; version?: string } {
  const at = target.indexOf("@");
  const nodeTypeId = at < 0 ? target : target.slice(0, at);
  const version = at < 0 ? undefined : target.slice(at + 1);
  if (!nodeTypeId) throw new UsageError(`"${target}" names no node type; expected <node_type_id>[@version]`);
  if (version !== undefined && !version) throw new UsageError(`"${target}" has an empty version; expected <node_type_id>[@version]`);
  return { nodeTypeId, version };
}

/** The run's input from --input or --input-file ("-" reads stdin): a JSON object, or a UsageError. */
export function readInput(opts: Pick<RunCommandOptions, "input" | "inputFile">): Record<string, unknown> {
  if (opts.input !== undefined && opts.inputFile !== undefined) throw new UsageError("give either --input or --input-file, not both");
  if (opts.input === undefined && opts.inputFile === undefined) throw new UsageError("the run needs an input: --input <json> or --input-file <file>");
  let text: string;
  const source = opts.input !== undefined ? "--input" : opts.inputFile === "-" ? "stdin" : opts.inputFile!;
  if (opts.input !== undefined) text = opts.input;
  else {
    try {
      text = readFileSync(opts.inputFile === "-" ? 0 : opts.inputFile!, "utf8");
    } catch (err) {
      throw new UsageError(`cannot read ${source}: ${(err as Error).message}`);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UsageError(`${source} must be a JSON object`);
  return value as Record<string, unknown>;
}

/** The outputs of a completed run, for a person: pretty, cut where long, with where to read all of them. */
function printOutputs(run: Run): void {
  const { lines, truncated } = formatOutputs(run.extensions?.["nodefabric.outputs"] ?? {});
  const color = !process.env.NO_COLOR && process.stdout.hasColors?.() !== false;
  const head = color ? "\x1b[1moutputs\x1b[0m" : "outputs";
  const all = truncated ? `  (cut; all of them: fabric runs get ${run.run_id})` : "";
  process.stdout.write(`${head}${color && all ? `\x1b[2m${all}\x1b[0m` : all}\n${lines.join("\n")}\n`);
}

function runError(run: Run): { code?: unknown; message?: unknown } | undefined {
  return run.extensions?.["nodefabric.error"] as { code?: unknown; message?: unknown } | undefined;
}

/** Starts a run and follows it; returns the exit code (0 only when the run completed). */
export async function runCommand(target: string, opts: RunCommandOptions): Promise<number> {
  let gatewayUrl: string;
  let ref: { nodeTypeId: string; version?: string };
  let input: Record<string, unknown>;
  try {
    ref = parseTarget(target);
    input = readInput(opts);
    gatewayUrl = gatewayUrlOf(opts.gateway);
  } catch (err) {
    return reportError(err);
  }

  const auth = clientAuthOptions(clientTokenOf(opts.token));
  const gateway = new GatewayClient(gatewayUrl, auth);
  // For a person at a terminal, unless asked for JSON; for a program (a pipe, a file, --json), today's NDJSON exactly.
  const tty = process.stdout.isTTY === true && opts.json !== true;
  const stopFollowing = new AbortController();
  let renderer: TerminalTreeRenderer | undefined;
  let runId: string | undefined;
  const onSigint = () => {
    stopFollowing.abort();
    renderer?.stop();
    if (runId) process.stderr.write(`fabric: stopped following ${runId}; it goes on (stop it with: fabric runs cancel ${runId})\n`);
    process.exit(130);
  };
  try {
    let version = ref.version;
    if (version === undefined) {
      // --registry, else the registry of the gateway's fabric (a gateway given alone is enough), else the configuration's.
      const registryUrl = opts.registry ?? (opts.gateway !== undefined ? await gateway.registryUrl() : undefined) ?? registryUrlOf(undefined);
      const registry = new RegistryClient(registryUrl, auth);
      try {
        version = (await registry.get(ref.nodeTypeId)).version;
      } catch (err) {
        // A token made for the gateway alone is the usual cause; say how to do without the registry.
        if (FabricError.is(err) && (err.statusCode === 401 || err.statusCode === 403)) {
          throw new FabricError(
            err.code,
            `${err.message} (the node registry, asked for the latest version of ${ref.nodeTypeId}: name a version, ` +
              `${ref.nodeTypeId}@<version>, or use a token that is also for node-registry with node-types:read)`,
            { details: err.details },
          );
        }
        throw err;
      } finally {
        await registry.close();
      }
    }
    const request: RunStartRequest = { root_node_type_ref: { node_type_id: ref.nodeTypeId, version }, input };
    if (opts.runId !== undefined) request.run_id = opts.runId;
    const { run: started } = await gateway.startRun(request);
    runId = started.run_id;
    if (!opts.follow) {
      process.stdout.write(tty ? `${JSON.stringify(started, null, 2)}\n` : `${JSON.stringify({ run: started })}\n`);
      return EXIT_OK;
    }

    process.once("SIGINT", onSigint);
    if (tty) {
      const view = new RunTreeView(started.run_id);
      renderer = new TerminalTreeRenderer(process.stdout, view);
      renderer.start();
      await followRun(gateway, started.run_id, (e) => {
        view.apply(e);
        renderer!.update();
      }, stopFollowing.signal);
      renderer.stop();
      renderer = undefined;
    } else {
      await followRun(gateway, started.run_id, (e) => process.stdout.write(`${JSON.stringify(e)}\n`), stopFollowing.signal);
    }

    const run = await gateway.getRun(started.run_id);
    const state: RunState = run.state;
    if (!tty) process.stdout.write(`${JSON.stringify({ run })}\n`);
    if (state === "completed") {
      if (tty) printOutputs(run);
      return EXIT_OK;
    }
    printRunError(runError(run), ENDED.has(state) ? state : "not_ended");
    return EXIT_FAILED;
  } catch (err) {
    renderer?.stop();
    return reportError(err);
  } finally {
    process.off("SIGINT", onSigint);
    await gateway.close();
  }
}

function parseNonNegative(name: string, min: number, max: number) {
  return (value: string): number => {
    if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}`);
    return n;
  };
}

/** Registers `fabric run` and `fabric runs get|cancel|events|ls` on the program. */
export function registerRunCommands(program: Command): void {
  const gatewayOption = () => new Option("--gateway <url>", "Run Gateway base URL (default: from config, http://127.0.0.1:8080)");

  program
    .command("run")
    .description("start a run of a node type and follow it live (exit 0 only when it completes)")
    .argument("<node_type>", "<node_type_id>[@version]; without a version, the latest in the registry")
    .option("--input <json>", "the run's input, a JSON object")
    .option("--input-file <file>", "read the input from a JSON file (- for stdin)")
    .addOption(gatewayOption())
    .addOption(tokenOption())
    .option(
      "--registry <url>",
      "Node Registry base URL, to find the latest version (default: the one the gateway names when --gateway is given, else from config, http://127.0.0.1:8084)",
    )
    .option("--run-id <id>", "choose the run id (repeating a start with the same id and request is idempotent)")
    .option("--no-follow", "start the run, print it, and return without following it")
    .option("--json", "print the events as NDJSON and then the run, as when stdout is not a terminal (default on a terminal: a live tree of the NodeRuns, then the outputs)")
    .exitOverride(usageExit)
    .action(async (target: string, opts: RunCommandOptions) => {
      process.exitCode = await runCommand(target, opts);
    });

  const runs = program.command("runs").description("look at, follow and cancel runs").exitOverride(usageExit);
  runs
    .command("get")
    .description("print a run")
    .argument("<run_id>")
    .addOption(gatewayOption())
    .addOption(tokenOption())
    .exitOverride(usageExit)
    .action(async (runId: string, opts: { gateway?: string; token?: string }) => {
      process.exitCode = await runsGet(opts, runId);
    });
  runs
    .command("cancel")
    .description("cancel a run (a run that already ended is printed unchanged)")
    .argument("<run_id>")
    .addOption(gatewayOption())
    .addOption(tokenOption())
    .exitOverride(usageExit)
    .action(async (runId: string, opts: { gateway?: string; token?: string }) => {
      process.exitCode = await runsCancel(opts, runId);
    });
  runs
    .command("events")
    .description("print a run's events as NDJSON, live until the run ends")
    .argument("<run_id>")
    .option("--after-seq <n>", "only events after this seq", parseNonNegative("--after-seq", -1, Number.MAX_SAFE_INTEGER))
    .option("--no-follow", "print the events that exist now, then return")
    .addOption(gatewayOption())
    .addOption(tokenOption())
    .exitOverride(usageExit)
    .action(async (runId: string, opts: { gateway?: string; token?: string; afterSeq?: number; follow: boolean }) => {
      process.exitCode = await runsEvents(opts, runId, { afterSeq: opts.afterSeq, follow: opts.follow });
    });
  runs
    .command("follow")
    .description("follow a run for people: the text its NodeRuns write as it arrives (an LLM's answer), then the outputs")
    .argument("<run_id>")
    .addOption(gatewayOption())
    .addOption(tokenOption())
    .exitOverride(usageExit)
    .action(async (runId: string, opts: { gateway?: string; token?: string }) => {
      process.exitCode = await runsFollow(opts, runId);
    });
  runs
    .command("ls")
    .description("list recent runs, newest first")
    .addOption(new Option("--state <state>", "only runs in this state").choices(["queued", "running", "completed", "failed", "canceled"]))
    .option("--limit <n>", "at most this many (1..1000, default 20)", parseNonNegative("--limit", 1, 1000))
    .option("--page-token <token>", "continue a listing where the previous page ended")
    .option("--json", "print JSON instead of a table")
    .addOption(gatewayOption())
    .addOption(tokenOption())
    .exitOverride(usageExit)
    .action(async (opts: { gateway?: string; token?: string; state?: RunState; limit?: number; pageToken?: string; json?: boolean }) => {
      process.exitCode = await runsLs(opts, { state: opts.state, limit: opts.limit ?? 20, pageToken: opts.pageToken, json: opts.json });
    });
}
