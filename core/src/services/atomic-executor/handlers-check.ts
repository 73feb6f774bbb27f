/**
 * What an executor tells its operator about its handlers: the `handlers` health check (what it serves, each
 * discovered package it could not load and each node type it skipped, with the reason), and one warning per failed
 * load in the log at start.
 */
import type { FastifyBaseLogger } from "fastify";
import type { HealthCheck, HealthStatus } from "../../http/service.js";
import type { FailedHandlerLoad, LoadedDefinition, LoadedHandlers, ServedNodeType } from "./handler-loader.js";

/** How the check reads when the executor serves no definition of its kind. */
export interface NoHandlersVerdict {
  status: HealthStatus;
  message: string;
}

/** Node types named one by one in the check's message; the rest are counted. */
const NAMED_IN_MESSAGE = 10;

function servedRef(d: LoadedDefinition | ServedNodeType): ServedNodeType {
  if ("definition" in d) return { node_type_id: d.definition.nodeType.node_type_id, version: d.definition.nodeType.version, kind: d.definition.kind, source: d.source };
  return d;
}

/** "x@1.0.0 (@acme/pkg)" for a skipped node type. */
function nodeTypeName(f: FailedHandlerLoad): string {
  return `${f.node_type_id}@${f.node_type_version} (${f.package})`;
}

/**
 * The `handlers` health check: "degraded" while any handler package or node type failed to load, whatever else is
 * served. `served` is what the executor serves of its kind: loaded definitions, or the cheaper ServedNodeType entries.
 */
export function handlersCheck(served: ReadonlyArray<LoadedDefinition | ServedNodeType>, handlers: LoadedHandlers, none: NoHandlersVerdict): HealthCheck {
  const failed = handlers.failed;
  const packages = failed.filter((f) => f.node_type_id === undefined);
  const nodeTypes = failed.filter((f) => f.node_type_id !== undefined);
  const messages: string[] = [];
  if (packages.length > 0) {
    messages.push(`${packages.length} handler package(s) could not be loaded and are not served: ${packages.map((f) => f.package).join(", ")}`);
  }
  if (nodeTypes.length > 0) {
    const named = nodeTypes.slice(0, NAMED_IN_MESSAGE).map(nodeTypeName).join(", ");
    const more = nodeTypes.length > NAMED_IN_MESSAGE ? ` and ${nodeTypes.length - NAMED_IN_MESSAGE} more` : "";
    messages.push(`${nodeTypes.length} node type(s) could not be loaded and are not served: ${named}${more}`);
  }
  if (served.length === 0) messages.push(none.message);
  const status: HealthStatus = failed.length > 0 ? "degraded" : served.length === 0 ? none.status : "ok";
  return {
    name: "handlers",
    status,
    ...(messages.length > 0 ? { message: messages.join("; ") } : {}),
    details: {
      count: served.length,
      node_types: served.map((d) => {
        const r = servedRef(d);
        return {
          node_type_id: r.node_type_id,
          version: r.version,
          ...(r.source.package ? { package: r.source.package } : {}),
          ...(r.source.version ? { package_version: r.source.version } : {}),
        };
      }),
      failed,
      ...(handlers.warnings.length > 0 ? { warnings: handlers.warnings } : {}),
    },
  };
}

/** Logs each handler package or node type that could not be loaded, once, as a warning naming the reason. */
export function logFailedLoads(log: FastifyBaseLogger, handlers: LoadedHandlers): void {
  for (const f of handlers.failed) {
    if (f.node_type_id === undefined) log.warn({ failed_handler_load: f }, `handler package ${f.package} could not be loaded and is not served: ${f.reason}`);
    else log.warn({ failed_handler_load: f }, `handler package ${f.package}: ${f.reason}; that node type is not served, the rest of the package is`);
  }
}
