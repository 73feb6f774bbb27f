/**
 * The gateway's view of its coordinators' health: the `run-coordinator` check of the gateway's GET /v1/health, and
 * the probe that brings a coordinator marked down back into the rotation.
 */
import type { HealthCheck, HealthStatus } from "../../http/service.js";
import type { HttpClient } from "../../clients/http-client.js";
import { FabricError } from "../../http/errors.js";

const STATUSES: readonly string[] = ["ok", "degraded", "down"];

function statusOf(value: unknown): HealthStatus | undefined {
  const s = (value as { status?: unknown } | null)?.status;
  return typeof s === "string" && STATUSES.includes(s) ? (s as HealthStatus) : undefined;
}

export interface CoordinatorProbe {
  status: HealthStatus;
  message?: string;
  /** Whether it answered over HTTP at all: a coordinator that answers takes requests, whatever its status. */
  reachable: boolean;
}

/** Asks one coordinator's /v1/health; unreachable, slow or unintelligible counts as down. */
export async function probeCoordinator(client: HttpClient, timeoutMs: number): Promise<CoordinatorProbe> {
  let res;
  try {
    res = await client.request("GET", "/v1/health", undefined, { timeoutMs });
  } catch (err) {
    const message = FabricError.is(err) ? err.message : (err as Error).message;
    // A FabricError without a cause is an answer it could not read: reachable, but not healthy.
    return { status: "down", message, reachable: FabricError.is(err) && err.cause === undefined };
  }
  if (res.status === 200) {
    const status = statusOf(res.body);
    if (status) return { status, reachable: true };
  }
  // A down service answers 503 with its Health in the envelope's details.
  const inner = (res.body as { error?: { details?: { health?: unknown }; message?: string } } | null)?.error;
  const status = statusOf(inner?.details?.health) ?? "down";
  return { status, message: inner?.message ?? `the run coordinator answered ${res.status}`, reachable: true };
}

/**
 * The `run-coordinator` check over every coordinator: ok when all are, down when all are, degraded otherwise. One
 * coordinator's check is its own status, with its `url`; several are listed in `details.coordinators`.
 */
export function coordinatorCheck(each: ReadonlyArray<{ url: string; status: HealthStatus; message?: string }>): HealthCheck {
  const name = "run-coordinator";
  if (each.length === 1) {
    const only = each[0]!;
    return { name, status: only.status, ...(only.message ? { message: only.message } : {}), details: { url: only.url, coordinators: [...each] } };
  }
  const down = each.filter((c) => c.status === "down").length;
  const status: HealthStatus = down === each.length ? "down" : each.every((c) => c.status === "ok") ? "ok" : "degraded";
  const message = down > 0 ? `${down} of ${each.length} run coordinators down` : undefined;
  return { name, status, ...(message ? { message } : {}), details: { coordinators: [...each] } };
}
