/**
 * The tracing half of the plugin: registers the OpenTelemetry SDK for this process, configured by the standard
 * `OTEL_*` variables, so that core's spans (which only call the API) are recorded and exported over OTLP/HTTP.
 *
 * Tracing is on when an exporter is configured: `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
 * is set, or `OTEL_TRACES_EXPORTER` names one (`otlp`, `console`). Otherwise nothing is registered and core's spans
 * stay the API's no-ops. `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` turn it off.
 *
 * The SDK and the exporters are imported only when tracing is on: a fabric without tracing never loads them (about
 * 3 MB of heap, 15 MB of memory and a third of a second at start; test/lazy-modules.test.ts checks).
 */
import { context, propagation, trace } from "@opentelemetry/api";
import type { NodeTracerProvider, SpanExporter } from "@opentelemetry/sdk-trace-node";
import type { ServiceName } from "@nodefabric/core";

/** What the environment asks for, read once when the first service starts. */
export interface TracingSettings {
  exporter: "otlp" | "console" | "none";
  protocol: "http/protobuf" | "http/json";
  serviceName: string;
}

const PROTOCOLS = ["http/protobuf", "http/json"] as const;

/** Reads the `OTEL_*` variables; throws a sentence naming the variable when one holds what is not supported. */
export function tracingSettings(env: NodeJS.ProcessEnv, processServices: readonly ServiceName[]): TracingSettings {
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || (processServices.length === 1 ? `nodefabric-${processServices[0]}` : "nodefabric");
  const protocolVar = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL !== undefined ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = (env[protocolVar]?.trim() || "http/protobuf") as TracingSettings["protocol"];
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new Error(`${protocolVar}=${JSON.stringify(env[protocolVar])} is not supported: use http/protobuf (the default) or http/json`);
  }
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return { exporter: "none", protocol, serviceName };
  const named = env.OTEL_TRACES_EXPORTER?.split(",").map((s) => s.trim().toLowerCase()).filter(Boolean) ?? [];
  const unknown = named.filter((n) => !["otlp", "console", "none"].includes(n));
  if (unknown.length > 0) throw new Error(`OTEL_TRACES_EXPORTER=${JSON.stringify(env.OTEL_TRACES_EXPORTER)} names ${unknown.join(", ")}: the exporters are otlp, console and none`);
  if (named.includes("none")) return { exporter: "none", protocol, serviceName };
  if (named.includes("otlp")) return { exporter: "otlp", protocol, serviceName };
  if (named.includes("console")) return { exporter: "console", protocol, serviceName };
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return { exporter: endpoint ? "otlp" : "none", protocol, serviceName };
}

/** The exporter the settings name, imported with the one protocol it speaks. */
async function exporterFor(settings: TracingSettings): Promise<SpanExporter> {
  if (settings.exporter === "console") return new (await import("@opentelemetry/sdk-trace-node")).ConsoleSpanExporter();
  // The exporters read the endpoint, headers, timeout and compression from the OTEL_EXPORTER_OTLP_* variables.
  if (settings.protocol === "http/json") return new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter();
  return new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter();
}

let provider: NodeTracerProvider | undefined;
let users = 0;
let active: Promise<TracingSettings> | undefined;

/**
 * Registers the SDK for this process, once (each service of the process calls it; the last to stop flushes and
 * unregisters it). Resolves to what is in force; rejects, and is tried again by the next service, when the variables
 * hold what is not supported.
 */
export function startTracing(processServices: readonly ServiceName[], env: NodeJS.ProcessEnv = process.env): Promise<TracingSettings> {
  users++;
  if (!active) {
    const starting = register(processServices, env);
    active = starting;
    starting.catch(() => {
      if (active === starting) active = undefined;
    });
  }
  return active;
}

async function register(processServices: readonly ServiceName[], env: NodeJS.ProcessEnv): Promise<TracingSettings> {
  const settings = tracingSettings(env, processServices);
  if (settings.exporter === "none") return settings;
  const [{ detectResources, envDetector, resourceFromAttributes }, { BatchSpanProcessor, NodeTracerProvider, SimpleSpanProcessor }, exporter] = await Promise.all([
    import("@opentelemetry/resources"),
    import("@opentelemetry/sdk-trace-node"),
    exporterFor(settings),
  ]);
  const detected = detectResources({ detectors: [envDetector] });
  const resource = resourceFromAttributes({ "service.name": settings.serviceName, "service.namespace": "nodefabric", "nodefabric.services": processServices.join(",") }).merge(
    // OTEL_RESOURCE_ATTRIBUTES adds to (and may override) what the fabric says, but OTEL_SERVICE_NAME has the last word.
    detected,
  ).merge(resourceFromAttributes({ "service.name": settings.serviceName }));
  provider = new NodeTracerProvider({
    resource,
    // The batch processor reads OTEL_BSP_*; the console exporter prints each span at once.
    spanProcessors: [settings.exporter === "console" ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter)],
  });
  // The W3C trace-context and baggage propagators, and the AsyncLocalStorage context manager.
  provider.register();
  return settings;
}

/** One service stopped: when it was the last, the spans still buffered are sent and the SDK is unregistered. */
export async function stopTracing(): Promise<void> {
  users = Math.max(0, users - 1);
  if (users > 0) return;
  // A start still importing the SDK finishes first, so what it registers is unregistered here.
  await active?.catch(() => undefined);
  if (users > 0) return;
  const p = provider;
  provider = undefined;
  active = undefined;
  if (!p) return;
  try {
    await p.shutdown();
  } finally {
    trace.disable();
    propagation.disable();
    context.disable();
  }
}

/** Sends the spans buffered so far (tests, and a process about to exit). */
export async function flushTracing(): Promise<void> {
  await provider?.forceFlush();
}
