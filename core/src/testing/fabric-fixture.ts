/**
 * `fabricFixture`: a whole fabric in the test's process (all seven services on loopback, ephemeral ports, SQLite in
 * a temporary folder) serving the definitions a test hands it, for tests of whole trees of node runs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Dispatcher } from "undici";
import type { NodeRun, NodeTypeRef, Run, RunEvent } from "@nodefabric/schemas";
import { DEFAULT_CONFIG, validateConfig, type FabricConfig } from "../config.js";
import { startFabric, type RunningFabric } from "../fabric.js";
import type { HealthCheck, ServiceName } from "../http/service.js";
import { GatewayClient } from "../clients/gateway-client.js";
import { RegistryClient } from "../clients/registry-client.js";
import type { FabricDefinition } from "@nodefabric/sdk";
import { installGlobalDispatcher } from "@nodefabric/sdk/runtime";

export interface FabricFixtureOptions {
  /** Atomic and composite definitions (`defineAtomic`, `defineComposite`) the executors serve. */
  definitions?: readonly FabricDefinition[];
  /** Handler packages or paths to load as well, as `handlers` in fabric.config.json. */
  handlers?: string[];
  /** Folders whose node_modules are scanned for handler packages, as `discover` in fabric.config.json. */
  discover?: string[];
  /** Where package names and relative paths are resolved from (default: the working directory). */
  cwd?: string;
  /** A Cedar policy file for the PDP (default: allow everything). */
  policy?: string;
  /**
   * An undici `MockAgent` serving the handlers' upstreams: the atomic executor's `ctx.request` goes through it, and
   * it is undici's global dispatcher until `close()`. The services call each other through their own pools, not it.
   */
  mockAgent?: Dispatcher;
  /** How long to wait for the executors to register their node types with the registry (default 15 s). */
  readyTimeoutMs?: number;
  /**
   * Model prices per million tokens, as `llm.prices` in fabric.config.json: the coordinator prices the reservation
   * of each model call with them (docs/llm.md, "Budgets the run keeps").
   */
  modelPrices?: Record<string, { input_per_million: number; output_per_million: number }>;
}

export interface FixtureRunOptions {
  /** Seconds to hold `POST /v1/runs` for the run's end (`Prefer: wait`, default 30, at most 60); 0 returns it at once. */
  waitSeconds?: number;
  /** A client-chosen run id. */
  runId?: string;
}

/** A running in-process fabric. */
export interface FabricFixture {
  /** Base URL of each service, such as `urls["run-gateway"]`. */
  urls: Record<ServiceName, string>;
  /** The temporary folder holding this fabric's SQLite files; `close()` deletes it. */
  dataDir: string;
  /**
   * Starts a run of a node type (a ref, `"id@version"`, or `"id"` for its latest version) through the gateway and
   * resolves with the Run once it ended; throws when it has not ended within `waitSeconds`.
   */
  run(nodeType: NodeTypeRef | string, input?: Record<string, unknown>, options?: FixtureRunOptions): Promise<Run>;
  /** Every event of a run so far, in `seq` order. */
  events(runId: string): Promise<RunEvent[]>;
  /** Every NodeRun of a run. */
  nodeRuns(runId: string): Promise<NodeRun[]>;
  /** Stops every service, restores the global dispatcher and deletes the data folder. */
  close(): Promise<void>;
}

const TERMINAL_RUN_STATES = new Set(["completed", "failed", "canceled"]);
const READY_POLL_MS = 20;

async function registrationOf(fabric: RunningFabric, name: ServiceName): Promise<HealthCheck | undefined> {
  const app = fabric.services.find((s) => s.name === name)!.app;
  const res = await app.inject({ method: "GET", url: "/v1/health" });
  const body = res.json() as { checks?: HealthCheck[]; error?: { details?: { health?: { checks?: HealthCheck[] } } } };
  const checks = body.checks ?? body.error?.details?.health?.checks ?? [];
  return checks.find((c) => c.name === "registry_registration");
}

/** Resolves once both executors published their node types and registered; throws what went wrong otherwise. */
async function waitForRegistration(fabric: RunningFabric, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const name of ["atomic-executor", "composite-executor"] as const) {
    for (;;) {
      const check = await registrationOf(fabric, name);
      if (check?.status === "ok") break;
      const problems = (check?.details as { problems?: string[] } | undefined)?.problems;
      if (problems?.length || check?.message?.startsWith("registration failed")) {
        throw new Error(`fabricFixture: the ${name} could not register its node types: ${problems?.join("; ") ?? check?.message}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`fabricFixture: the ${name} did not register with the node registry within ${timeoutMs} ms (${check?.message ?? "no registration check"})`);
      }
      await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
    }
  }
}

/** The ref a `run` argument names: a ref as is, `"id@version"` split, `"id"` the registry's latest version. */
async function refOf(nodeType: NodeTypeRef | string, registry: RegistryClient): Promise<NodeTypeRef> {
  if (typeof nodeType !== "string") return nodeType;
  const at = nodeType.lastIndexOf("@");
  if (at > 0) return { node_type_id: nodeType.slice(0, at), version: nodeType.slice(at + 1) };
  const latest = await registry.get(nodeType);
  return { node_type_id: latest.node_type_id, version: latest.version };
}

/**
 * Starts all seven services in this process on loopback (ephemeral ports, auth disabled, logs silent, SQLite in a
 * temporary folder) serving `definitions` and `handlers`, and resolves once the executors registered their node types.
 */
export async function fabricFixture(options: FabricFixtureOptions = {}): Promise<FabricFixture> {
  const definitions = options.definitions ?? [];
  const handlers = options.handlers ?? [];
  const discover = options.discover ?? [];
  if (definitions.length === 0 && handlers.length === 0 && discover.length === 0) {
    throw new TypeError("fabricFixture: pass the node types to serve: definitions, handlers or discover");
  }
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nodefabric-fixture-"));
  const config: FabricConfig = {
    ...DEFAULT_CONFIG,
    host: "127.0.0.1",
    port_base: 0,
    data_dir: dataDir,
    log_level: "silent",
    handlers,
    discover,
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.modelPrices ? { llm: { prices: options.modelPrices } } : {}),
    auth: { ...DEFAULT_CONFIG.auth, mode: "disabled" },
    base_dir: path.resolve(options.cwd ?? process.cwd()),
  };
  let fabric: RunningFabric | undefined;
  let restoreDispatcher: (() => void) | undefined;
  let gateway: GatewayClient | undefined;
  let registry: RegistryClient | undefined;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    try {
      await gateway?.close();
      await registry?.close();
      await fabric?.close();
    } finally {
      restoreDispatcher?.();
      rmSync(dataDir, { recursive: true, force: true });
    }
  };
  try {
    validateConfig(config, "fabricFixture options");
    restoreDispatcher = options.mockAgent ? installGlobalDispatcher(options.mockAgent) : undefined;
    fabric = await startFabric(config, undefined, { definitions, upstreamDispatcher: options.mockAgent });
    await waitForRegistration(fabric, options.readyTimeoutMs ?? 15_000);
  } catch (err) {
    await close();
    throw err;
  }
  const urls = fabric.urls as Record<ServiceName, string>;
  gateway = new GatewayClient(urls["run-gateway"]);
  registry = new RegistryClient(urls["node-registry"], { connections: 2 });
  const gw = gateway;
  const reg = registry;

  return {
    urls,
    dataDir,
    async run(nodeType, input = {}, runOptions = {}) {
      const waitSeconds = runOptions.waitSeconds ?? 30;
      // The gateway holds a request 60 s at most; a longer wait would end early and look like a stuck run.
      if (!Number.isInteger(waitSeconds) || waitSeconds < 0 || waitSeconds > 60) {
        throw new TypeError(`fabricFixture: waitSeconds must be an integer from 0 to 60, not ${String(waitSeconds)}`);
      }
      const { run } = await gw.startRun(
        { root_node_type_ref: await refOf(nodeType, reg), input, ...(runOptions.runId ? { run_id: runOptions.runId } : {}) },
        waitSeconds > 0 ? { waitSeconds } : {},
      );
      if (waitSeconds > 0 && !TERMINAL_RUN_STATES.has(run.state)) {
        throw new Error(`fabricFixture: run ${run.run_id} did not end within ${waitSeconds} s (it is ${run.state}); pass a larger waitSeconds, or 0 to get it at once`);
      }
      return run;
    },
    async events(runId) {
      const out: RunEvent[] = [];
      for await (const event of gw.events(runId, { follow: false })) out.push(event);
      return out;
    },
    nodeRuns: (runId) => gw.listNodeRuns(runId),
    close,
  };
}
