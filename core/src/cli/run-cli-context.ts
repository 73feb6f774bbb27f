/**
 * What the client commands (`fabric run`, `fabric runs`, `fabric node-types`, keys and tokens) share: where the
 * gateway and registry are, the bearer token they send, how usage mistakes and service errors are reported, and the
 * exit codes.
 */
import { Option, type CommanderError } from "commander";
import { ConfigError, loadConfig, serviceUrl, type FabricConfig } from "../config.js";
import { FabricError } from "../http/errors.js";
import type { HttpClientOptions } from "../clients/http-client.js";

export const EXIT_OK = 0;
/** A run that failed or was canceled, or a service that refused. */
export const EXIT_FAILED = 1;
/** The command line itself is wrong (bad JSON in --input, bad --limit, …). */
export const EXIT_USAGE = 2;

/** A mistake on the command line: printed as `fabric: <message>`, exit 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * The configuration as commands that only read from it see it (clients, keys, tokens): whether the services' own
 * authentication is complete is theirs to check at start, and making keys is how it gets completed.
 */
export function loadClientConfig(configFile?: string): FabricConfig {
  return loadConfig({ configFile, flags: { auth: { mode: "disabled" } } });
}

/** The gateway base URL: the flag, else the configuration's. */
export function gatewayUrlOf(flag: string | undefined): string {
  return flag ?? serviceUrl(loadClientConfig(), "run-gateway");
}

/** The registry base URL: the flag, else the configuration's. */
export function registryUrlOf(flag: string | undefined): string {
  return flag ?? serviceUrl(loadClientConfig(), "node-registry");
}

/** The environment variable a client command takes its token from when `--token` is not given. */
export const TOKEN_ENV = "FABRIC_TOKEN";

/** The bearer token of a client command: `--token`, else $FABRIC_TOKEN, else none. */
export function clientTokenOf(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const token = (flag ?? env[TOKEN_ENV])?.trim();
  return token ? token : undefined;
}

/** The `--token` option of client commands. */
export function tokenOption(): Option {
  return new Option("--token <jwt>", `bearer token for the services (default: $${TOKEN_ENV}; see fabric token mint)`);
}

/** HttpClient options that send `token` as a bearer token on every request (none without a token). */
export function clientAuthOptions(token: string | undefined): HttpClientOptions {
  if (token === undefined) return {};
  const headers = { authorization: `Bearer ${token}` };
  return { headers: () => headers };
}

/** Commander's usage errors exit 2 (as bad --input JSON does); help and version still exit 0. */
export function usageExit(err: CommanderError): never {
  process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE);
}

/** Prints an error on stderr (`fabric: <code>: <message>` for service errors) and returns its exit code. */
export function reportError(err: unknown): number {
  if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(`fabric: ${err.message}\n`);
    return EXIT_USAGE;
  }
  if (FabricError.is(err)) {
    const errors = (err.details?.errors as Array<{ path: string; message: string }> | undefined) ?? [];
    process.stderr.write([`fabric: ${err.code}: ${err.message}`, ...errors.map((e) => `  ${e.path}: ${e.message}`)].join("\n") + "\n");
    return EXIT_FAILED;
  }
  process.stderr.write(`fabric: ${(err as Error).message}\n`);
  return EXIT_FAILED;
}

/** Prints a run's or NodeRun's `error` object the way service errors are printed. */
export function printRunError(error: { code?: unknown; message?: unknown } | undefined, fallback: string): void {
  const code = typeof error?.code === "string" ? error.code : fallback;
  const message = typeof error?.message === "string" ? error.message : `the run ${fallback}`;
  process.stderr.write(`fabric: ${code}: ${message}\n`);
}
