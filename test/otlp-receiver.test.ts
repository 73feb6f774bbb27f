/**
 * The test OTLP receiver, proven against the official OpenTelemetry exporters: whatever
 * the SDK recorded must come out of the receiver unchanged, over http/protobuf and http/json,
 * compressed or not, and bad requests must be refused the way a collector refuses them.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type SpanContext } from "@opentelemetry/api";
import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { CompressionAlgorithm } from "@opentelemetry/otlp-exporter-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  InMemorySpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-node";
import { gzipSync } from "node:zlib";
import { ProtobufReader } from "./support/otlp-protobuf-reader.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "./support/otlp-receiver.js";

const protocols = [
  {
    protocol: "http/protobuf",
    contentType: "application/x-protobuf",
    exporter: (url: string, compression = CompressionAlgorithm.NONE): SpanExporter => new ProtoTraceExporter({ url, compression }),
  },
  {
    protocol: "http/json",
    contentType: "application/json",
    exporter: (url: string, compression = CompressionAlgorithm.NONE): SpanExporter => new JsonTraceExporter({ url, compression }),
  },
] as const;

const LINKED: SpanContext = { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1 };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function receiver(): Promise<OtlpReceiver> {
  const started = await startOtlpReceiver();
  cleanups.push(() => started.close());
  return started;
}

function provider(exportTo: SpanExporter, batch = false): { provider: NodeTracerProvider; memory: InMemorySpanExporter } {
  const memory = new InMemorySpanExporter();
  const created = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": "otlp-test" }),
    spanProcessors: [batch ? new BatchSpanProcessor(exportTo) : new SimpleSpanProcessor(exportTo), new SimpleSpanProcessor(memory)],
  });
  cleanups.push(() => created.shutdown());
  return { provider: created, memory };
}

/** The parent/child pair every protocol test sends. */
function recordParentAndChild(tracerProvider: NodeTracerProvider): void {
  const tracer = tracerProvider.getTracer("otlp-receiver-test", "1.2.3");
  const parent = tracer.startSpan("checkout");
  const child = tracer.startSpan(
    "GET /inventory",
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "http.request.method": "GET",
        "retry.count": 3,
        "balance.delta": -7,
        "cache.hit": true,
        "sample.ratio": 0.25,
        "peer.tags": ["edge", "eu"],
        "peer.ports": [80, 443],
      },
      links: [{ context: LINKED, attributes: { "link.reason": "batch" } }],
    },
    trace.setSpan(ROOT_CONTEXT, parent),
  );
  child.addEvent("retrying", { attempt: 2, reason: "timeout" });
  child.setStatus({ code: SpanStatusCode.ERROR, message: "upstream refused" });
  child.end();
  parent.end();
}

function nanos(time: [number, number]): bigint {
  return BigInt(time[0]) * 1_000_000_000n + BigInt(time[1]);
}

function byName(spans: readonly ReadableSpan[], name: string): ReadableSpan {
  const found = spans.find((s) => s.name === name);
  if (!found) throw new Error(`the SDK recorded no span named ${name}`);
  return found;
}

function receivedByName(spans: readonly ReceivedSpan[], name: string): ReceivedSpan {
  const found = spans.find((s) => s.name === name);
  if (!found) throw new Error(`the receiver got no span named ${name}; got ${spans.map((s) => s.name).join(", ")}`);
  return found;
}

function exportDirectly(exporter: SpanExporter, spans: ReadableSpan[]): Promise<ExportResult> {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

describe.each(protocols)("OTLP receiver with the $protocol exporter", ({ contentType, exporter }) => {
  it("decodes a parent and a CLIENT child exactly as the SDK recorded them", async () => {
    const otlp = await receiver();
    const { provider: tracerProvider, memory } = provider(exporter(otlp.tracesUrl));

    recordParentAndChild(tracerProvider);
    await tracerProvider.forceFlush();
    const received = await otlp.waitForSpans((spans) => spans.length >= 2);

    const recordedParent = byName(memory.getFinishedSpans(), "checkout");
    const recordedChild = byName(memory.getFinishedSpans(), "GET /inventory");
    expect(received).toHaveLength(2);
    const parent = receivedByName(received, "checkout");
    const child = receivedByName(received, "GET /inventory");

    expect(parent).toEqual({
      traceId: recordedParent.spanContext().traceId,
      spanId: recordedParent.spanContext().spanId,
      parentSpanId: undefined,
      traceState: undefined,
      name: "checkout",
      kind: 1,
      startTimeUnixNano: nanos(recordedParent.startTime),
      endTimeUnixNano: nanos(recordedParent.endTime),
      attributes: {},
      status: { code: 0 },
      events: [],
      links: [],
      resource: recordedParent.resource.attributes,
      scope: { name: "otlp-receiver-test", version: "1.2.3" },
    });
    expect(child).toEqual({
      traceId: parent.traceId,
      spanId: recordedChild.spanContext().spanId,
      parentSpanId: parent.spanId,
      traceState: undefined,
      name: "GET /inventory",
      kind: 3,
      startTimeUnixNano: nanos(recordedChild.startTime),
      endTimeUnixNano: nanos(recordedChild.endTime),
      attributes: {
        "http.request.method": "GET",
        "retry.count": 3,
        "balance.delta": -7,
        "cache.hit": true,
        "sample.ratio": 0.25,
        "peer.tags": ["edge", "eu"],
        "peer.ports": [80, 443],
      },
      status: { code: 2, message: "upstream refused" },
      events: [{ name: "retrying", timeUnixNano: nanos(recordedChild.events[0]!.time), attributes: { attempt: 2, reason: "timeout" } }],
      links: [{ traceId: LINKED.traceId, spanId: LINKED.spanId, attributes: { "link.reason": "batch" } }],
      resource: recordedChild.resource.attributes,
      scope: { name: "otlp-receiver-test", version: "1.2.3" },
    });
    expect(parent.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(child.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(child.resource["service.name"]).toBe("otlp-test");
    // A SimpleSpanProcessor exports each span as it ends: child first, then parent.
    expect(otlp.requests).toEqual([
      { contentType, contentEncoding: "", count: 1, status: 200 },
      { contentType, contentEncoding: "", count: 1, status: 200 },
    ]);
  });

  it("accepts a gzip-compressed batch", async () => {
    const otlp = await receiver();
    const { provider: tracerProvider } = provider(exporter(otlp.tracesUrl, CompressionAlgorithm.GZIP), true);

    recordParentAndChild(tracerProvider);
    await tracerProvider.forceFlush();
    const received = await otlp.waitForSpans((spans) => spans.length >= 2);

    expect(received.map((s) => s.name).sort()).toEqual(["GET /inventory", "checkout"]);
    const child = receivedByName(received, "GET /inventory");
    expect(child.parentSpanId).toBe(receivedByName(received, "checkout").spanId);
    expect(child.attributes["peer.ports"]).toEqual([80, 443]);
    expect(child.status).toEqual({ code: 2, message: "upstream refused" });
    expect(otlp.requests).toEqual([{ contentType, contentEncoding: "gzip", count: 2, status: 200 }]);
  });

  it("answers so the exporter reports success, and failure on a path it does not serve", async () => {
    const otlp = await receiver();
    const { provider: tracerProvider, memory } = provider(new InMemorySpanExporter());
    recordParentAndChild(tracerProvider);
    const recorded = memory.getFinishedSpans();

    const good = exporter(otlp.tracesUrl);
    const bad = exporter(`${otlp.url}/v1/nothing-here`);
    cleanups.push(() => good.shutdown(), () => bad.shutdown());

    expect((await exportDirectly(good, recorded)).code).toBe(ExportResultCode.SUCCESS);
    const failed = await exportDirectly(bad, recorded);
    expect(failed.code).toBe(ExportResultCode.FAILED);
    expect(String(failed.error)).toMatch(/404|Not Found/i);
    expect(otlp.spans).toHaveLength(2);
  });
});

describe("OTLP receiver refusing what a collector refuses", () => {
  it("answers 400 to a body that is not protobuf, with a google.rpc.Status, and keeps serving", async () => {
    const otlp = await receiver();

    const response = await fetch(otlp.tracesUrl, {
      method: "POST",
      headers: { "Content-Type": "application/x-protobuf" },
      body: "not protobuf at all",
    });
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toBe("application/x-protobuf");
    const status = new ProtobufReader(new Uint8Array(await response.arrayBuffer()));
    expect(status.nextField()).toBe(1);
    expect(status.uint32()).toBe(3); // INVALID_ARGUMENT
    expect(status.nextField()).toBe(2);
    expect(status.string()).toMatch(/wire type/);

    // The same receiver still takes a real export afterwards.
    const { provider: tracerProvider } = provider(protocols[0].exporter(otlp.tracesUrl));
    recordParentAndChild(tracerProvider);
    await tracerProvider.forceFlush();
    await otlp.waitForSpans((spans) => spans.length === 2);
    expect(otlp.requests.map((r) => r.status)).toEqual([400, 200, 200]);
  });

  it("answers 400 to malformed JSON, bad ids and corrupt gzip", async () => {
    const otlp = await receiver();
    const post = (body: string | Uint8Array<ArrayBuffer>, headers: Record<string, string>) =>
      fetch(otlp.tracesUrl, { method: "POST", headers, body });

    const notJson = await post("{not json", { "Content-Type": "application/json" });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toEqual({ code: 3, message: expect.stringMatching(/invalid JSON/) });

    const badId = await post(
      JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: "xyz", spanId: "b7ad6b7169203331", name: "x" }] }] }] }),
      { "Content-Type": "application/json" },
    );
    expect(badId.status).toBe(400);
    expect((await badId.json()).message).toMatch(/traceId/);

    const shortId = await post(Buffer.from([0x0a, 0x08, 0x12, 0x06, 0x12, 0x04, 0x0a, 0x02, 0x01, 0x02]), {
      "Content-Type": "application/x-protobuf",
    });
    expect(shortId.status).toBe(400);

    const corruptGzip = await post("plainly not gzip", { "Content-Type": "application/json", "Content-Encoding": "gzip" });
    expect(corruptGzip.status).toBe(400);

    const unknownEncoding = await post("{}", { "Content-Type": "application/json", "Content-Encoding": "br" });
    expect(unknownEncoding.status).toBe(400);

    expect(otlp.spans).toEqual([]);
    expect(otlp.requests.map((r) => r.status)).toEqual([400, 400, 400, 400, 400]);
  });

  it("answers 415 to other media types, 405 to other methods and 404 to other paths", async () => {
    const otlp = await receiver();

    const text = await fetch(otlp.tracesUrl, { method: "POST", headers: { "Content-Type": "text/plain" }, body: "hi" });
    expect(text.status).toBe(415);
    expect(await text.text()).toMatch(/application\/x-protobuf/);

    const get = await fetch(otlp.tracesUrl);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");

    const metrics = await fetch(`${otlp.url}/v1/metrics`, {
      method: "POST",
      headers: { "Content-Type": "application/x-protobuf" },
      body: new Uint8Array(),
    });
    expect(metrics.status).toBe(404);
  });
});

describe("OTLP receiver details", () => {
  it("reads OTLP JSON int64 strings, kvlists and bytes, and a gzip body sent by hand", async () => {
    const otlp = await receiver();
    const request = {
      resourceSpans: [
        {
          resource: { attributes: [{ key: "service.name", value: { stringValue: "hand-made" } }] },
          scopeSpans: [
            {
              scope: { name: "by-hand" },
              spans: [
                {
                  traceId: "0AF7651916CD43DD8448EB211C80319C",
                  spanId: "b7ad6b7169203331",
                  parentSpanId: "",
                  name: "manual",
                  kind: 2,
                  startTimeUnixNano: "1700000000000000001",
                  endTimeUnixNano: 1700000000000000,
                  attributes: [
                    { key: "big", value: { intValue: "9007199254740993" } },
                    { key: "small", value: { intValue: "-5" } },
                    { key: "map", value: { kvlistValue: { values: [{ key: "k", value: { boolValue: false } }] } } },
                    { key: "raw", value: { bytesValue: Buffer.from([1, 2, 3]).toString("base64") } },
                  ],
                  status: { code: 1 },
                },
              ],
            },
          ],
        },
      ],
    };

    const response = await fetch(otlp.tracesUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json; charset=utf-8", "Content-Encoding": "gzip" },
      body: gzipSync(JSON.stringify(request)),
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("{}");

    expect(otlp.spans).toEqual([
      {
        traceId: "0af7651916cd43dd8448eb211c80319c",
        spanId: "b7ad6b7169203331",
        parentSpanId: undefined,
        traceState: undefined,
        name: "manual",
        kind: 2,
        startTimeUnixNano: 1700000000000000001n,
        endTimeUnixNano: 1700000000000000n,
        attributes: { big: 9007199254740993n, small: -5, map: { k: false }, raw: new Uint8Array([1, 2, 3]) },
        status: { code: 1 },
        events: [],
        links: [],
        resource: { "service.name": "hand-made" },
        scope: { name: "by-hand" },
      },
    ]);
  });

  it("rejects waitForSpans with what it did receive when the predicate never holds", async () => {
    const otlp = await receiver();
    await expect(otlp.waitForSpans((spans) => spans.length > 0, 50)).rejects.toThrow(/within 50 ms; received 0: none/);
  });
});
