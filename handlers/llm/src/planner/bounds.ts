/**
 * Bounds only shrink: a plan over a bound fails, never cut short, and a child planner gets at most what its parent
 * has left, whatever the model wrote.
 */
import type { HandlerError, JsonObject } from "@nodefabric/sdk";
import { fail } from "../failure-codes.js";
import type { Planner } from "./model-calls.js";
import type { PlannerInputs } from "./plan-schemas.js";

/** The failure of a plan over a bound (`planner_bound_exceeded`): nothing of it was run. */
export function boundError(message: string, details: Record<string, unknown>): HandlerError {
  return fail("planner_bound_exceeded", message, { retryable: false, details });
}

/** A child planner's inputs: never more depth, steps or repairs than its parent has left, whatever the model wrote. */
export function clampChildPlanner(generated: JsonObject, p: Planner, parent: PlannerInputs): JsonObject {
  const out: JsonObject = { ...generated };
  const remaining = p.depth - 1;
  const asked = (k: string, limit: number) => (typeof generated[k] === "number" ? Math.min(generated[k] as number, limit) : limit);
  out.max_depth = Math.max(0, asked("max_depth", remaining));
  out.max_steps = Math.max(1, asked("max_steps", p.maxSteps));
  out.repair_max = Math.max(0, asked("repair_max", p.repairMax));
  out.max_replans = Math.max(0, asked("max_replans", parent.max_replans ?? 1));
  if (parent.require_approval) out.require_approval = true;
  if (parent.profile) out.profile = parent.profile;
  else delete out.profile;
  if (parent.model) out.model = parent.model;
  else delete out.model;
  if (parent.allowed_node_type_ids) {
    const asked = Array.isArray(generated.allowed_node_type_ids) ? (generated.allowed_node_type_ids as string[]) : parent.allowed_node_type_ids;
    out.allowed_node_type_ids = asked.filter((id) => parent.allowed_node_type_ids!.includes(id));
  }
  return out;
}
