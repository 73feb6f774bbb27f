/**
 * @nodefabric/plugin-telemetry: OpenTelemetry traces across every hop and Prometheus metrics on every service.
 *
 * Loaded like any plugin (`--plugin @nodefabric/plugin-telemetry`, `plugins` in fabric.config.json, or found in
 * node_modules). On each service it adds `GET /metrics` (scope `metrics:read` when authentication is on) and, for the
 * process, registers the OpenTelemetry SDK when an exporter is configured by the `OTEL_*` variables.
 * `FABRIC_METRICS_PORT` serves the same metrics on a port of their own, without authentication.
 */
import { createServer, type Server } from "node:http";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { ConfigError, definePlugin, SERVICE_NAMES, type PluginServiceContext, type ServiceName } from "@nodefabric/core";
import { FabricMetrics } from "./metrics.js";
import { startTracing, stopTracing, type TracingSettings } from "./tracing.js";
import { TELEMETRY_SETTINGS } from "./settings.js";

export { METRICS, MAX_LABEL_VALUES, type MetricSpec, type MetricType } from "./catalogue.js";
export { tracingSettings, flushTracing, type TracingSettings } from "./tracing.js";
export { TELEMETRY_SETTINGS } from "./settings.js";

const VERSION = "0.1.0";
const PLUGIN_NAME = "@nodefabric/plugin-telemetry";

/** What the process shares between its services: one registry, one metrics port. */
let metrics: FabricMetrics | undefined;
let metricsServer: Server | undefined;
let services = 0;

/** Reads FABRIC_METRICS_PORT / FABRIC_METRICS_HOST (TELEMETRY_SETTINGS); throws a sentence when the port is not one. */
export function metricsPortSettings(env: NodeJS.ProcessEnv = process.env): { port: number; host: string } | undefined {
  const { metricsPort, metricsHost } = TELEMETRY_SETTINGS.read(env);
  return metricsPort === undefined ? undefined : { port: metricsPort, host: metricsHost };
}

/** The address of the process's metrics port, once it listens (tests, the banner). */
export function metricsPortAddress(): { host: string; port: number } | undefined {
  const a = metricsServer?.address();
  return a && typeof a === "object" ? { host: a.address, port: a.port } : undefined;
}

async function openMetricsPort(settings: { port: number; host: string }, m: FabricMetrics): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics") {
      res.writeHead(404, { "content-type": "application/json; charset=utf-8" }).end(JSON.stringify({ error: { code: "route_not_found", message: `no route ${req.method} ${path}: the metrics are at GET /metrics` } }));
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET", "content-type": "application/json; charset=utf-8" }).end(JSON.stringify({ error: { code: "method_not_allowed", message: `${req.method} is not allowed on /metrics` } }));
      return;
    }
    m.text().then(
      ({ contentType, body }) => res.writeHead(200, { "content-type": contentType }).end(req.method === "HEAD" ? undefined : body),
      () => res.writeHead(500, { "content-type": "application/json; charset=utf-8" }).end(JSON.stringify({ error: { code: "internal_error", message: "the metrics could not be collected" } })),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(settings.port, settings.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server;
}

/** What the plugin adds to one service. */
async function telemetryService(app: FastifyInstance, options: { fabric: PluginServiceContext }): Promise<void> {
  const fabric = options.fabric;
  // A setting the plugin cannot use is the operator's to fix: `fabric` exits with 2, naming the plugin.
  const refuse = (err: unknown) => new ConfigError(`plugin ${PLUGIN_NAME}: ${(err as Error).message}`);
  let port: ReturnType<typeof metricsPortSettings>;
  try {
    port = metricsPortSettings();
  } catch (err) {
    throw refuse(err);
  }
  let tracing: TracingSettings;
  try {
    tracing = await startTracing(fabric.processServices);
  } catch (err) {
    // The users count was taken: give it back, so a later start is not held by this one.
    await stopTracing();
    throw refuse(err);
  }
  services++;
  metrics ??= new FabricMetrics();
  const m = metrics;
  const key = {};
  m.watch(key, fabric.service, () => fabric.observe());
  if (port && !metricsServer) metricsServer = await openMetricsPort(port, m);
  app.log.debug({ tracing: tracing.exporter, protocol: tracing.protocol, service_name: tracing.serviceName }, "telemetry on");

  app.get("/metrics", { config: { access: { method: "GET", path: "/metrics", scope: "metrics:read" } } }, async (_req, reply) => {
    const { contentType, body } = await m.text();
    return reply.type(contentType).send(body);
  });

  app.addHook("onClose", async () => {
    m.forget(key);
    services--;
    if (services === 0) {
      const server = metricsServer;
      metricsServer = undefined;
      metrics = undefined;
      m.close();
      if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    await stopTracing();
  });
}

// Wrapped with fastify-plugin so the route sits beside core's (its access is checked by core's auth hook).
const servicePlugin = fp(telemetryService, { name: "nodefabric-telemetry", fastify: "5.x" });

export default definePlugin({
  name: PLUGIN_NAME,
  version: VERSION,
  services: SERVICE_NAMES.map((service: ServiceName) => ({ service, plugin: servicePlugin })),
});
