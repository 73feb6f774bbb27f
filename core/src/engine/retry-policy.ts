/**
 * A node type's retry policy (`extensions["nodefabric.retry"]`) and timeout (`extensions["nodefabric.timeout_ms"]`).
 */
import type { FabricErrorBody, NodeType } from "@nodefabric/schemas";

export interface RetryPolicy {
  max_attempts: number;
  initial_interval_ms: number;
  backoff_coefficient: number;
  max_interval_ms: number;
}

export const DEFAULT_RETRY: RetryPolicy = { max_attempts: 3, initial_interval_ms: 200, backoff_coefficient: 2, max_interval_ms: 10_000 };
export const DEFAULT_TIMEOUT_MS = 30_000;

function positive(v: unknown, fallback: number, min = 0): number {
  return typeof v === "number" && Number.isFinite(v) && v >= min ? v : fallback;
}

/** The retry policy a node type declares, filled with defaults. */
export function retryPolicyOf(nodeType: NodeType | undefined): RetryPolicy {
  const raw = (nodeType?.extensions?.["nodefabric.retry"] ?? {}) as Record<string, unknown>;
  return {
    max_attempts: Math.floor(positive(raw.max_attempts, DEFAULT_RETRY.max_attempts, 1)),
    initial_interval_ms: positive(raw.initial_interval_ms, DEFAULT_RETRY.initial_interval_ms),
    backoff_coefficient: positive(raw.backoff_coefficient, DEFAULT_RETRY.backoff_coefficient, 1),
    max_interval_ms: positive(raw.max_interval_ms, DEFAULT_RETRY.max_interval_ms),
  };
}

/** Delay before attempt `nextAttempt` (2, 3, …): exponential, capped. */
export function backoffMs(policy: RetryPolicy, nextAttempt: number): number {
  const d = policy.initial_interval_ms * policy.backoff_coefficient ** Math.max(0, nextAttempt - 2);
  return Math.min(policy.max_interval_ms, Math.round(d));
}

/** How long a failure asked to wait before the next attempt (`details.retry_after_ms`, from an upstream's Retry-After). */
function retryAfterOf(error: FabricErrorBody | undefined): number | undefined {
  const asked = error?.details?.retry_after_ms;
  return typeof asked === "number" && Number.isFinite(asked) && asked >= 0 ? asked : undefined;
}

/**
 * Delay before attempt `nextAttempt` after `error`: the backoff, or longer when the failure asked for a wait
 * (`details.retry_after_ms`), and never more than `max_interval_ms`.
 */
export function retryDelayMs(policy: RetryPolicy, nextAttempt: number, error?: FabricErrorBody): number {
  const backoff = backoffMs(policy, nextAttempt);
  const asked = retryAfterOf(error);
  if (asked === undefined) return backoff;
  return Math.min(Math.max(backoff, Math.ceil(asked)), policy.max_interval_ms);
}

/** The execution timeout a node type declares. */
export function timeoutOf(nodeType: NodeType | undefined): number {
  return Math.floor(positive(nodeType?.extensions?.["nodefabric.timeout_ms"], DEFAULT_TIMEOUT_MS, 1));
}

/**
 * How long a NodeRun waits, by default, for an executor it cannot reach (unreachable, gone from the directory, shut
 * down mid-call) before it fails `executor_unavailable`: long enough for an executor process to be restarted on a
 * loaded machine. The coordinator's `coordinator.executor_wait_ms` (docs/upstream-failures.md, "An executor that
 * cannot be reached").
 */
export const DEFAULT_EXECUTOR_WAIT_MS = 300_000;
/** The first pause before an unreachable executor is tried again, doubled each try up to EXECUTOR_WAIT_MAX_PAUSE_MS. */
export const EXECUTOR_WAIT_FIRST_PAUSE_MS = 250;
/** The longest pause between two tries: an executor that is back is used within this long. */
export const EXECUTOR_WAIT_MAX_PAUSE_MS = 5_000;

/** The pause before try `tries + 1` of an executor that could not be reached `tries` times in a row (1, 2, …). */
export function executorWaitPauseMs(tries: number): number {
  return Math.min(EXECUTOR_WAIT_MAX_PAUSE_MS, EXECUTOR_WAIT_FIRST_PAUSE_MS * 2 ** Math.max(0, Math.min(tries - 1, 20)));
}
