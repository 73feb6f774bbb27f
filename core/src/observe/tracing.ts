/**
 * Tracing through the OpenTelemetry API. Core only calls the API: with no SDK registered (no telemetry plugin, or
 * one without an exporter) every call below returns at once with a span that records nothing, and no header is
 * written. The telemetry plugin registers the SDK, the W3C trace-context propagator and the async context manager.
 *
 * One run is one trace: the span that starts a run is the run's anchor, kept in its `run_context.trace`, and every
 * later span of the run (each NodeRun attempt, in whichever coordinator, after any restart) descends from it.
 */
import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ProxyTracer,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
  type TracerProvider,
} from "@opentelemetry/api";
import type { Run } from "@nodefabric/schemas";
import { SERVICE_VERSION } from "../version.js";

export { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Context, type Span, type Attributes };

/**
 * Core's tracer, looked up at each span: the API's proxy tracer keeps the first SDK tracer it is handed, so a tracer
 * taken once would go on recording into an SDK that was shut down and replaced (a fabric stopped and started again in
 * one process, with other settings). Without an SDK the lookup returns the API's no-op at once.
 */
export const tracer: Pick<Tracer, "startSpan"> = {
  startSpan: (name, options, ctx) => currentTracer().tracer.startSpan(name, options, ctx),
};

let held: { provider: unknown; tracer: Tracer; on: boolean } | undefined;

/** The tracer of the SDK registered now: looked up again only when another SDK (or none) was registered since. */
function currentTracer(): { tracer: Tracer; on: boolean } {
  const global = trace.getTracerProvider() as TracerProvider & { getDelegate?: () => TracerProvider };
  const provider = global.getDelegate?.() ?? global;
  if (held?.provider !== provider) {
    const t = trace.getTracer("@nodefabric/core", SERVICE_VERSION);
    // With no SDK the API hands out its proxy, which records nothing until one is registered.
    held = { provider, tracer: t, on: !(t instanceof ProxyTracer) };
  }
  return held;
}

/**
 * Whether an SDK is registered in this process. Without one no span is ever recorded, so the places that build a
 * span on every request or NodeRun (its name, its attributes) skip it altogether.
 */
export function tracingOn(): boolean {
  return currentTracer().on;
}

/** What `inSpan` hands its function when nothing is traced: a span that records nothing and names no trace. */
const UNTRACED: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** Attribute names shared by every NodeFabric span. */
export const ATTR = {
  service: "nodefabric.service",
  runId: "nodefabric.run_id",
  nodeRunId: "nodefabric.node_run_id",
  nodeTypeId: "nodefabric.node_type_id",
  nodeTypeVersion: "nodefabric.node_type_version",
  kind: "nodefabric.node_run.kind",
  attempt: "nodefabric.attempt",
  state: "nodefabric.state",
  errorCode: "nodefabric.error.code",
} as const;

/** Whether a span is being recorded in this context (false whenever no SDK is registered). */
export function recording(ctx: Context = context.active()): boolean {
  return trace.getSpan(ctx)?.isRecording() === true;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

/** Run extension set when the run's anchor was not sampled, so its later spans are not sampled either. */
export const TRACE_UNSAMPLED_KEY = "nodefabric.trace_unsampled";

/** The span context a `run_context.trace` names, when it holds a W3C trace id and span id. */
export function spanContextOf(traceField: { trace_id?: string; span_id?: string } | undefined, sampled = true): SpanContext | undefined {
  const traceId = traceField?.trace_id?.toLowerCase();
  const spanId = traceField?.span_id?.toLowerCase();
  if (!traceId || !spanId || !HEX32.test(traceId) || !HEX16.test(spanId) || /^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true };
}

/** The context a run's spans descend from: its anchor, from `run_context.trace`; the root context without one. */
export function runTraceContext(run: Run): Context {
  const sc = spanContextOf(run.run_context?.trace, run.extensions?.[TRACE_UNSAMPLED_KEY] !== true);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
}

/** The trace id of a run, when it has one (for log lines). */
export function traceIdOf(run: Run | undefined): string | undefined {
  const id = run?.run_context?.trace?.trace_id;
  return id && HEX32.test(id) ? id : undefined;
}

/** The trace id and span id of the span active now, when it is a real one (for log lines). */
export function activeTraceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpan(context.active());
  if (!span) return {};
  const sc = span.spanContext();
  if (!HEX32.test(sc.traceId) || /^0+$/.test(sc.traceId)) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId };
}

/** Ends a span, recording a failure as its status (and the error code as an attribute). */
export function endSpan(span: Span, failure?: { code?: string; message?: string } | Error | unknown): void {
  if (failure !== undefined && failure !== null) recordFailure(span, failure);
  span.end();
}

/** Records a failure on a span: its status, its message, the error code as an attribute, and the exception. */
export function recordFailure(span: Span, failure: { code?: string; message?: string } | Error | unknown): void {
  const f = failure as { code?: unknown; message?: unknown };
  const code = typeof f.code === "string" ? f.code : undefined;
  const message = typeof f.message === "string" ? f.message : String(failure);
  if (code) span.setAttribute(ATTR.errorCode, code);
  if (failure instanceof Error) span.recordException(failure);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/**
 * Runs `fn` inside a new span (a child of `parent`, by default the active context) and ends it when `fn` settles; a
 * throw is recorded on the span and thrown on. With no SDK the span records nothing and `fn` runs as it would.
 */
export async function inSpan<T>(name: string, options: { kind?: SpanKind; attributes?: Attributes; parent?: Context; links?: Link[] }, fn: (span: Span) => Promise<T>): Promise<T> {
  if (!tracingOn()) return fn(UNTRACED);
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes, links: options.links }, parent);
  // An unsampled span is still made active, so what `fn` starts inherits the decision instead of starting a trace.
  if (!span.isRecording()) return context.with(trace.setSpan(parent, span), () => fn(span));
  try {
    const out = await context.with(trace.setSpan(parent, span), () => fn(span));
    span.end();
    return out;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/** Writes the active trace context into outgoing headers (`traceparent`, `tracestate`); nothing without an SDK. */
export function injectTraceHeaders(headers: Record<string, string>, ctx: Context = context.active()): Record<string, string> {
  propagation.inject(ctx, headers);
  return headers;
}

/** The trace context incoming headers carry, as a parent for the request's span. */
export function extractTraceContext(headers: Record<string, string | string[] | undefined>): Context {
  return propagation.extract(ROOT_CONTEXT, headers);
}

/**
 * Traces a handler's upstream call (the executor's `traceUpstream`): a client span, a child of the active one, whose
 * context the request carries as `traceparent`. The URL is recorded without its query, which may hold a secret.
 */
export function traceUpstream(method: string, url: URL | undefined): { headers: Record<string, string>; end(status?: number, error?: unknown): void } | undefined {
  if (!tracingOn()) return undefined;
  // Not sampled: no span, but the upstream is told the trace and that it is not sampled.
  if (!recording()) return { headers: injectTraceHeaders({}), end: () => undefined };
  const span = tracer.startSpan(method, {
    kind: SpanKind.CLIENT,
    attributes: {
      "http.request.method": method,
      ...(url ? { "url.full": url.origin + url.pathname, "server.address": url.hostname, "server.port": Number(url.port) || (url.protocol === "https:" ? 443 : 80) } : {}),
    },
  });
  const headers = injectTraceHeaders({}, trace.setSpan(context.active(), span));
  return {
    headers,
    end(status, error) {
      if (status !== undefined) span.setAttribute("http.response.status_code", status);
      endSpan(span, error ?? (status !== undefined && status >= 500 ? { message: `the upstream answered ${status}` } : undefined));
    },
  };
}
