/**
 * A service whose v1 routes exist but are not implemented in this release yet: every route answers
 * 503 `unavailable`, so clients get a clear answer (and 405/404 still work) instead of a refused connection.
 */
import type { FastifyInstance } from "fastify";
import { FabricError } from "../http/errors.js";
import { createService, type ServiceName } from "../http/service.js";

const ROUTES: Partial<Record<ServiceName, Array<[method: "GET" | "POST", url: string]>>> = {
  "run-gateway": [
    ["POST", "/v1/runs"],
    ["GET", "/v1/runs"],
    ["GET", "/v1/runs/:run_id"],
    ["POST", "/v1/runs/:run_id(.+)::cancel"],
    ["GET", "/v1/runs/:run_id/events"],
    ["GET", "/v1/runs/:run_id/node-runs"],
    ["GET", "/v1/node-runs/:node_run_id"],
  ],
  "run-coordinator": [
    ["POST", "/v1/runs"],
    ["GET", "/v1/runs"],
    ["GET", "/v1/runs/:run_id"],
    ["POST", "/v1/runs/:run_id(.+)::cancel"],
    ["GET", "/v1/runs/:run_id/events"],
    ["GET", "/v1/runs/:run_id/node-runs"],
    ["POST", "/v1/node-runs"],
    ["GET", "/v1/node-runs/:node_run_id"],
    ["POST", "/v1/node-runs/:node_run_id(.+)::evaluation"],
    ["POST", "/v1/node-runs/:node_run_id(.+)::complete"],
    ["GET", "/v1/node-runs/:node_run_id/events"],
  ],
  "composite-executor": [
    ["POST", "/v1/composite-node-runs::begin"],
    ["POST", "/v1/composite-node-runs/:node_run_id(.+)::cancel"],
  ],
};

/** Builds a placeholder for a service that a later release implements. */
export async function buildUnavailableService(name: ServiceName, options: { logger?: boolean | Record<string, unknown> } = {}): Promise<FastifyInstance> {
  const message = `the ${name} is not implemented in this release of NodeFabric`;
  const app = createService({
    name,
    logger: options.logger,
    health: () => [{ name: "implementation", status: "degraded", message }],
  });
  for (const [method, url] of ROUTES[name] ?? []) {
    app.route({
      method,
      url,
      handler: async () => {
        throw new FabricError("unavailable", message, { details: { service: name } });
      },
    });
  }
  return app;
}
