/**
 * What the coordinator's engine is given and what its parts share: its logger and options, who is calling, and the
 * small pure helpers every part builds events and errors with. The ports it calls (PDP, executors, the registry's
 * directory) are a floor below, in engine-ports.ts, so the clients implement them without importing the engine.
 */
import { createHash } from "node:crypto";
import type { CandidateSet, FabricErrorBody, NodeType, RunEvent } from "@nodefabric/schemas";
import { clock } from "../clock.js";
import { canonicalJson } from "../canonical-json.js";
import { FabricError } from "../http/errors.js";
import type { FailureCode } from "../http/failure-codes.js";
import { TERMINAL_STATES, type NewRunEvent, type NodeRunRecord, type RunRecord, type RunStore } from "../store/run-store.js";
import type { NodeTypeResolver } from "./node-type-resolver.js";
import type { AssignmentTokens } from "./assignment-tokens.js";
import type { ExecutorCaller, PolicyClient } from "../engine-ports.js";

export type { ExecutorCaller, PolicyClient } from "../engine-ports.js";

export interface Logger {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

export interface RunEngineOptions {
  store: RunStore;
  resolver: NodeTypeResolver;
  executors: ExecutorCaller;
  policy?: PolicyClient;
  log: Logger;
  /** Stable id of this coordinator; leases it held before a restart are reclaimed at start. */
  instanceId: string;
  /** Lease of a claim before the NodeRun is dispatched (ms). */
  leaseMs?: number;
  /** NodeRuns in flight at once from this coordinator. */
  maxInFlight?: number;
  /** How often recovery (deadlines, expired leases, backoff) runs (ms). */
  tickMs?: number;
  /** Stored candidate sets, to check bindings of children against them. */
  selection?: { getCandidateSet(id: string): Promise<CandidateSet> };
  /** Mints assignment tokens for composite NodeRuns. */
  assignmentTokens?: AssignmentTokens;
  /**
   * Whether the token an atomic execution reports progress and checkpoints with may be checked (default true): false
   * only for a coordinator that authenticates no caller and shares its store with no other coordinator, which then
   * sends executors of other processes no token (nothing would read it). Composites always get theirs.
   */
  assignmentTokensChecked?: boolean;
  /** A composite that makes no progress for this long gets its `:begin` sent again (ms, default the lesser of leaseMs and 10 s). */
  compositeLeaseMs?: number;
  /**
   * How long a NodeRun waits for an executor it cannot reach before it fails `executor_unavailable` (ms, default
   * DEFAULT_EXECUTOR_WAIT_MS, 5 minutes). Tries within it do not spend the node type's retry attempts.
   */
  executorWaitMs?: number;
  /**
   * With a store several coordinators share: how long this coordinator's hold on its runs lasts without renewal
   * (ms, default 10 s). A coordinator that dies has its runs taken over by another once this runs out.
   */
  runLeaseMs?: number;
  /**
   * Model prices per million tokens (the `llm.prices` of the configuration), with which a model call's reservation
   * is priced before it is sent (reservations.ts). Without them, a call reserves tokens only and its cost is counted
   * when it is answered.
   */
  modelPrices?: Record<string, { input_per_million: number; output_per_million: number }>;
}

/** Who is asking: stamped on runs and checked on reads. */
export interface Caller {
  /** A tenant sees only its runs; `null` (an anonymous caller) sees only runs without one; absent sees all. */
  tenant_id?: string | null;
  /** The authenticated subject and its issuer: stamped on the runs it starts, for the PDP. */
  sub?: string;
  iss?: string;
  /** Set for a caller who presented a valid token. */
  authenticated?: true;
  /** An assignment token: the caller may act for this one composite NodeRun only. */
  assignment?: { run_id: string; node_run_id: string };
}

/** The three policy checkpoints of the contract. */
export type Checkpoint = "run.start" | "node.run.create" | "node.run.execute";

/** A NodeRun ready to go to its executor, written as `running` already. */
export interface DispatchPlan {
  nr: NodeRunRecord;
  nodeType: NodeType;
  endpoint: string;
  deadline: number;
  run: RunRecord;
}

/** A stable hash of a JSON value (key order does not matter). */
export function hashOf(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("base64url");
}

export function isTerminal(state: string): boolean {
  return TERMINAL_STATES.has(state);
}

/** The `error` of a NodeRun or Run the engine fails: its code is one of a failure-code block (http/failure-codes.ts). */
export function errorBody(code: FailureCode, message: string, extra: Partial<FabricErrorBody> = {}): FabricErrorBody {
  return { code, message, ...extra };
}

export function event(type: RunEvent["type"], runId: string, nodeRunId: string | undefined, data?: Record<string, unknown>): NewRunEvent {
  const e: NewRunEvent = { run_id: runId, type, time: clock.isoNow() };
  if (nodeRunId !== undefined) e.node_run_id = nodeRunId;
  if (data !== undefined) e.data = data;
  return e;
}

export function assignmentRefused(caller: Caller, what: string): FabricError {
  return new FabricError("permission_denied", `this assignment token acts for node run ${caller.assignment!.node_run_id} only, not ${what}`, {
    details: { node_run_id: caller.assignment!.node_run_id },
  });
}
