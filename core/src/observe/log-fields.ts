/**
 * The fields a log line about a run carries, so the lines of one run can be found together and beside its trace:
 * `run_id`, `node_run_id` when a NodeRun is concerned, and `trace_id` when the run has one.
 */
import type { Run } from "@nodefabric/schemas";
import { traceIdOf } from "./tracing.js";

/** Fields of a log line about a run or one of its NodeRuns. */
export interface RunLogFields {
  run_id: string;
  node_run_id?: string;
  trace_id?: string;
}

/**
 * Whatever names a run: a Run, a stored run (with its Run as `run`), a request that carries `run_context` (such as a
 * composite's `:begin`), or only an id, when nothing more is at hand.
 */
export type RunLike = { run_id: string; run?: Pick<Run, "run_context">; run_context?: Run["run_context"] } | string;

/** `run_id`, `node_run_id` (given a NodeRun or its id) and `trace_id` (when the run has one), for a log call. */
export function runLogFields(run: RunLike, nodeRun?: { node_run_id: string } | string | null): RunLogFields {
  const fields: RunLogFields = { run_id: typeof run === "string" ? run : run.run_id };
  if (nodeRun) fields.node_run_id = typeof nodeRun === "string" ? nodeRun : nodeRun.node_run_id;
  if (typeof run !== "string") {
    const traceId = traceIdOf({ run_context: run.run?.run_context ?? run.run_context } as Run);
    if (traceId) fields.trace_id = traceId;
  }
  return fields;
}
