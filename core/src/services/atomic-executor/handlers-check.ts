/**
 * What an executor tells its operator about its handlers: the `handlers` health check (what it serves, and each
 * discovered package it could not load, with the reason), and one warning per failed load in the log at start.
 */
import type { FastifyBaseLogger } from "fastify";
import type { HealthCheck, HealthStatus } from "../../http/service.js";
import type { LoadedDefinition, LoadedHandlers } from "./handler-loader.js";

/** How the check reads when the executor serves no definition of its kind. */
export interface NoHandlersVerdict {
  status: HealthStatus;
  message: string;
}

/** The `handlers` health check: "degraded" while any handler package failed to load, whatever else is served. */
export function handlersCheck(served: LoadedDefinition[], handlers: LoadedHandlers, none: NoHandlersVerdict): HealthCheck {
  const failed = handlers.failed;
  const messages: string[] = [];
  if (failed.length > 0) {
    messages.push(`${failed.length} handler package(s) could not be loaded and are not served: ${failed.map((f) => f.package).join(", ")}`);
  }
  if (served.length === 0) messages.push(none.message);
  const status: HealthStatus = failed.length > 0 ? "degraded" : served.length === 0 ? none.status : "ok";
  return {
    name: "handlers",
    status,
    ...(messages.length > 0 ? { message: messages.join("; ") } : {}),
    details: {
      count: served.length,
      node_types: served.map((d) => ({
        node_type_id: d.definition.nodeType.node_type_id,
        version: d.definition.nodeType.version,
        ...(d.source.package ? { package: d.source.package } : {}),
        ...(d.source.version ? { package_version: d.source.version } : {}),
      })),
      failed,
      ...(handlers.warnings.length > 0 ? { warnings: handlers.warnings } : {}),
    },
  };
}

/** Logs each handler package that could not be loaded, once, as a warning naming the reason. */
export function logFailedLoads(log: FastifyBaseLogger, handlers: LoadedHandlers): void {
  for (const f of handlers.failed) {
    log.warn({ failed_handler_load: f }, `handler package ${f.package} could not be loaded and is not served: ${f.reason}`);
  }
}
