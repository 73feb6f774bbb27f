/**
 * Where each service listens and is reached under a configuration, and the limits its HTTP edge runs with.
 */
import { SERVICE_NAMES, type ServiceName } from "../service-names.js";
import type { ServiceLimits } from "../http/edge.js";
import type { FabricConfig, LimitsConfig } from "./fabric-settings.js";

/** The option names of `limits`, each with its ServiceLimits field. */
const LIMIT_FIELDS = {
  max_json_depth: "maxJsonDepth",
  max_body_bytes: "maxBodyBytes",
  max_in_flight: "maxInFlight",
  max_streams: "maxStreams",
  max_header_bytes: "maxHeaderBytes",
  headers_timeout_ms: "headersTimeoutMs",
  request_timeout_ms: "requestTimeoutMs",
  keep_alive_timeout_ms: "keepAliveTimeoutMs",
} as const satisfies Record<keyof LimitsConfig, keyof ServiceLimits>;

/** The `limits` configuration as the services take it. */
export function serviceLimits(limits: LimitsConfig): ServiceLimits {
  const out: ServiceLimits = {};
  for (const [option, field] of Object.entries(LIMIT_FIELDS) as Array<[keyof LimitsConfig, keyof ServiceLimits]>) {
    if (limits?.[option] !== undefined) out[field] = limits[option];
  }
  return out;
}

/** Whether `host` is a loopback address (or `localhost`). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./.test(h);
}

/** The port a service listens on under this configuration. */
export function servicePort(config: FabricConfig, name: ServiceName): number {
  // port_base 0 puts every service on an ephemeral port (tests, benchmarks).
  return config.services[name]?.port ?? (config.port_base === 0 ? 0 : config.port_base + SERVICE_NAMES.indexOf(name));
}

/** The base URL other services use to reach a service. */
export function serviceUrl(config: FabricConfig, name: ServiceName): string {
  const configured = config.services[name]?.url;
  if (configured) return configured.replace(/\/+$/, "");
  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  const h = host.includes(":") ? `[${host}]` : host;
  return `http://${h}:${servicePort(config, name)}`;
}
