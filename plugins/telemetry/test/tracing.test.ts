/**
 * The tracing half in one process (`fabric dev`): what the OTEL_* variables turn on, a bad one stopping the start
 * with a sentence, nothing recorded or sent without an exporter, and the same trace shape when the services call each
 * other in-process instead of over HTTP.
 */
import { describe, it, expect, afterEach } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createServer, type Server } from "node:http";
import { loadConfig, startFabric, SERVICE_NAMES, type RunningFabric } from "@nodefabric/core";
import { defineAtomic } from "@nodefabric/core/sdk";
import telemetry, { tracingSettings } from "../src/index.js";
import { startOtlpReceiver, type OtlpReceiver } from "../../../test/support/otlp-receiver.js";

const loaded = { definition: telemetry, source: "@nodefabric/plugin-telemetry", file: "index.ts", discovered: false };

const fetcher = defineAtomic({
  nodeType: {
    node_type_id: "t.fetch",
    version: "1.0.0",
    description: "GETs a URL",
    input_schema: { type: "object", required: ["url"], properties: { url: { type: "string" } } },
    constraints: { gates: { side_effect_class: "read" } },
  },
  async handler(inputs: { url: string }, ctx) {
    const res = await ctx.fetch(inputs.url);
    return { status: res.status };
  },
});

const requester = defineAtomic({
  nodeType: {
    node_type_id: "t.request",
    version: "1.0.0",
    description: "GETs a URL with ctx.request",
    input_schema: { type: "object", required: ["url"], properties: { url: { type: "string" } } },
    constraints: { gates: { side_effect_class: "read" } },
  },
  async handler(inputs: { url: string }, ctx) {
    const res = await ctx.request(inputs.url, { method: "GET" });
    await res.text();
    return { status: res.statusCode };
  },
});

describe("tracingSettings: the OTEL_* variables", () => {
  const one = ["run-coordinator"] as const;
  it("is off without an endpoint or an exporter named, and on with either", () => {
    expect(tracingSettings({}, SERVICE_NAMES)).toEqual({ exporter: "none", protocol: "http/protobuf", serviceName: "nodefabric" });
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }, one)).toEqual({ exporter: "otlp", protocol: "http/protobuf", serviceName: "nodefabric-run-coordinator" });
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }, one).protocol).toBe("http/json");
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: "console" }, one).exporter).toBe("console");
    expect(tracingSettings({ OTEL_TRACES_EXPORTER: "otlp" }, one).exporter).toBe("otlp");
    expect(tracingSettings({ OTEL_SERVICE_NAME: "fabric-eu" }, one).serviceName).toBe("fabric-eu");
  });

  it("is off when told so, whatever else is set", () => {
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }, one).exporter).toBe("none");
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }, one).exporter).toBe("none");
  });

  it("names the variable and what it may hold when a value is not supported", () => {
    expect(() => tracingSettings({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, one)).toThrow('OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported: use http/protobuf (the default) or http/json');
    expect(() => tracingSettings({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "thrift" }, one)).toThrow(/^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="thrift"/);
    expect(() => tracingSettings({ OTEL_TRACES_EXPORTER: "zipkin" }, one)).toThrow('OTEL_TRACES_EXPORTER="zipkin" names zipkin: the exporters are otlp, console and none');
  });
});

describe("tracing in one process", () => {
  let fabric: RunningFabric | undefined;
  let receiver: OtlpReceiver | undefined;
  let upstream: Server | undefined;
  const saved = { ...process.env };
  const headers: (string | undefined)[] = [];

  afterEach(async () => {
    await fabric?.close();
    fabric = undefined;
    await receiver?.close();
    receiver = undefined;
    await new Promise<void>((r) => (upstream ? upstream.close(() => r()) : r()));
    upstream = undefined;
    for (const k of Object.keys(process.env)) if (k.startsWith("OTEL_") && !(k in saved)) delete process.env[k];
    headers.length = 0;
  });

  async function start(env: Record<string, string>): Promise<{ gw: string; upstreamUrl: string }> {
    Object.assign(process.env, env);
    upstream = createServer((req, res) => {
      headers.push(req.headers.traceparent as string | undefined);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((r) => upstream!.listen(0, "127.0.0.1", () => r()));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-tracing-"));
    const config = { ...loadConfig({ cwd: dir, env: {} }), port_base: 0, data_dir: dir, log_level: "silent" as const };
    fabric = await startFabric(config, SERVICE_NAMES, { plugins: [loaded], definitions: [fetcher, requester] });
    return { gw: fabric.urls["run-gateway"]!, upstreamUrl: `http://127.0.0.1:${(upstream.address() as { port: number }).port}/x` };
  }

  async function run(gw: string, upstreamUrl: string, extra: Record<string, string> = {}, nodeTypeId = "t.fetch") {
    const res = await fetch(`${gw}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json", prefer: "wait=10", ...extra },
      body: JSON.stringify({ root_node_type_ref: { node_type_id: nodeTypeId, version: "1.0.0" }, input: { url: upstreamUrl } }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { state: string; run_context?: { trace?: { trace_id: string; span_id: string } } };
  }

  it("records and sends nothing without an exporter: no trace on the Run, no traceparent upstream", async () => {
    const { gw, upstreamUrl } = await start({});
    const body = await run(gw, upstreamUrl, { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" });
    expect(body.state).toBe("completed");
    expect(body.run_context?.trace).toBeUndefined();
    expect(headers).toEqual([undefined]);
  });

  it("stops the start, naming the plugin's complaint, when the protocol is not supported", async () => {
    await expect(start({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).rejects.toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported/);
  });

  it("builds the same tree when the services call each other in-process, under the service name nodefabric", async () => {
    receiver = await startOtlpReceiver();
    const { gw, upstreamUrl } = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_BSP_SCHEDULE_DELAY: "20" });
    const body = await run(gw, upstreamUrl);
    expect(body.state).toBe("completed");
    const traceId = body.run_context!.trace!.trace_id;
    const spans = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId && s.name === "GET") && all.some((s) => s.traceId === traceId && s.name === "POST /v1/runs"), 10_000);
    const mine = spans.filter((s) => s.traceId === traceId);
    const byName = (n: string) => mine.find((s) => s.name === n)!;
    for (const s of mine) expect(s.resource["service.name"]).toBe("nodefabric");
    const server = byName("POST /v1/runs");
    expect(server.attributes["nodefabric.service"]).toBe("run-gateway");
    const anchor = byName("run.start t.fetch");
    expect(anchor.parentSpanId).toBe(server.spanId);
    expect(anchor.spanId).toBe(body.run_context!.trace!.span_id);
    const attempt = byName("node_run t.fetch");
    expect(attempt.parentSpanId).toBe(anchor.spanId);
    const handler = byName("handler t.fetch");
    expect(handler.parentSpanId).toBe(attempt.spanId);
    // The handler's upstream call (the other GETs are the coordinator's lookups in the registry, under the anchor).
    const call = mine.find((s) => s.name === "GET" && s.parentSpanId === handler.spanId)!;
    expect(call).toMatchObject({ kind: 3, attributes: expect.objectContaining({ "url.full": upstreamUrl, "http.response.status_code": 200 }) });
    expect(headers).toEqual([`00-${traceId}-${call.spanId}-01`]);

    // A run_context.trace the client names is the trace the run joins; the request's own span is linked.
    const named = { trace_id: "4bf92f3577b34da6a3ce929d0e0e4736", span_id: "00f067aa0ba902b7" };
    const res = await fetch(`${gw}/v1/runs`, {
      method: "POST",
      headers: { "content-type": "application/json", prefer: "wait=10" },
      body: JSON.stringify({ root_node_type_ref: { node_type_id: "t.fetch", version: "1.0.0" }, input: { url: upstreamUrl }, run_context: { trace: { ...named, request_id: "req-1" } } }),
    });
    const joined = (await res.json()) as { state: string; run_context: { trace: { trace_id: string; span_id: string; request_id: string } } };
    expect(joined.state).toBe("completed");
    expect(joined.run_context.trace).toMatchObject({ trace_id: named.trace_id, request_id: "req-1" });
    const spansNamed = await receiver.waitForSpans((all) => all.some((s) => s.traceId === named.trace_id && s.name === "node_run t.fetch" && s.attributes["nodefabric.state"] === "completed"), 10_000);
    const anchorNamed = spansNamed.find((s) => s.traceId === named.trace_id && s.name === "run.start t.fetch")!;
    expect(anchorNamed.parentSpanId).toBe(named.span_id);
    expect(anchorNamed.spanId).toBe(joined.run_context.trace.span_id);
    const requestSpan = spansNamed.find((s) => s.name === "POST /v1/runs" && s.spanId === anchorNamed.links[0]?.spanId);
    expect(requestSpan, "the request's span, linked from the anchor").toBeDefined();
    expect(headers[1]).toMatch(new RegExp(`^00-${named.trace_id}-`));
    headers.splice(1, 1);

    // A caller that does not sample its trace: the run joins it unsampled, and so does every later span of the run
    // (the decision is kept with the Run), down to the upstream, which is told so; nothing of it is exported.
    const unsampled = "5b8efff798038103d269b633813fc60c";
    const skipped = (await run(gw, upstreamUrl, { traceparent: `00-${unsampled}-eee19b7ec3c1b174-00` })) as { state: string; run_context: { trace: { trace_id: string } }; extensions: Record<string, unknown> };
    expect(skipped.state).toBe("completed");
    expect(skipped.run_context.trace.trace_id).toBe(unsampled);
    expect(skipped.extensions["nodefabric.trace_unsampled"]).toBe(true);
    expect(headers[1]).toMatch(new RegExp(`^00-${unsampled}-[0-9a-f]{16}-00$`));
    headers.splice(1, 1);

    // ctx.request (undici) carries the trace as ctx.fetch does.
    const second = await run(gw, upstreamUrl, {}, "t.request");
    expect(second.state).toBe("completed");
    const traceId2 = second.run_context!.trace!.trace_id;
    expect(traceId2).not.toBe(traceId);
    const spans2 = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId2 && s.name === "GET" && s.kind === 3 && s.attributes["url.full"] === upstreamUrl), 10_000);
    const handler2 = spans2.find((s) => s.traceId === traceId2 && s.name === "handler t.request")!;
    const call2 = spans2.find((s) => s.traceId === traceId2 && s.name === "GET" && s.parentSpanId === handler2.spanId)!;
    expect(call2.attributes["http.response.status_code"]).toBe(200);
    expect(headers[1]).toBe(`00-${traceId2}-${call2.spanId}-01`);
    // Exported after the unsampled run: had any span of it been recorded, it would be here by now.
    expect(receiver.spans.filter((s) => s.traceId === unsampled)).toEqual([]);
  });

  it("traces to the new exporter when a fabric is started again in the same process, and records nothing once off", async () => {
    const first = await startOtlpReceiver();
    try {
      const a = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: first.url, OTEL_BSP_SCHEDULE_DELAY: "20" });
      const ranA = await run(a.gw, a.upstreamUrl);
      await first.waitForSpans((all) => all.some((s) => s.traceId === ranA.run_context!.trace!.trace_id && s.name === "GET"), 10_000);
      await fabric!.close();
      fabric = undefined;
      await new Promise<void>((r) => upstream!.close(() => r()));
      upstream = undefined;

      receiver = await startOtlpReceiver();
      const b = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" });
      const ranB = await run(b.gw, b.upstreamUrl);
      const traceB = ranB.run_context!.trace!.trace_id;
      await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceB && s.name === "node_run t.fetch"), 10_000);
      expect(first.spans.some((s) => s.traceId === traceB)).toBe(false);
      await fabric!.close();
      fabric = undefined;
      await new Promise<void>((r) => upstream!.close(() => r()));
      upstream = undefined;

      // Started again with no exporter: nothing recorded, nothing sent, to either.
      for (const k of Object.keys(process.env)) if (k.startsWith("OTEL_")) delete process.env[k];
      const c = await start({});
      const ranC = await run(c.gw, c.upstreamUrl);
      expect(ranC.run_context?.trace).toBeUndefined();
      expect(headers.at(-1)).toBeUndefined();
    } finally {
      await first.close();
    }
  });
});
