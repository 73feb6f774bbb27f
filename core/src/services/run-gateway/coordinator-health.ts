/**
 * The gateway's view of the coordinator's health: the `run-coordinator` check of the gateway's GET /v1/health.
 */
import type { HealthCheck, HealthStatus } from "../../http/service.js";
import type { HttpClient } from "../../clients/http-client.js";
import { FabricError } from "../../http/errors.js";

const STATUSES: readonly string[] = ["ok", "degraded", "down"];

function statusOf(value: unknown): HealthStatus | undefined {
  const s = (value as { status?: unknown } | null)?.status;
  return typeof s === "string" && STATUSES.includes(s) ? (s as HealthStatus) : undefined;
}

/** Asks the coordinator's /v1/health; unreachable, slow or unintelligible counts as down. */
export async function coordinatorHealth(client: HttpClient, timeoutMs: number): Promise<HealthCheck> {
  const name = "run-coordinator";
  const details = { url: client.baseUrl };
  try {
    const res = await client.request("GET", "/v1/health", undefined, { timeoutMs });
    if (res.status === 200) {
      const status = statusOf(res.body);
      if (status) return { name, status, details };
    }
    // A down service answers 503 with its Health in the envelope's details.
    const inner = (res.body as { error?: { details?: { health?: unknown }; message?: string } } | null)?.error;
    const status = statusOf(inner?.details?.health) ?? "down";
    return { name, status, message: inner?.message ?? `the run coordinator answered ${res.status}`, details };
  } catch (err) {
    const message = FabricError.is(err) ? err.message : (err as Error).message;
    return { name, status: "down", message, details };
  }
}
