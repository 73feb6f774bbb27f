/**
 * An OTLP/HTTP traces receiver for the bench, run as a child process of its own so that reading what the fabric
 * exports costs the measured process nothing. It answers 200 to POST /v1/traces once the body is read, and counts
 * the requests, the bytes and the spans (protobuf or JSON). GET /stats answers the counts as JSON.
 *
 * `node test/bench/otlp-sink.mjs` prints `{"port":N}` on its first line of stdout once it listens on 127.0.0.1.
 * `startOtlpSink()` (imported) does that and returns `{ url, stats(), close() }`.
 */
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** Reads a protobuf varint at `pos`; returns [value, next position]. */
function varint(buf, pos) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const b = buf[pos++];
    value += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return [value, pos];
    shift += 7;
  }
}

/** The length-delimited fields numbered `field` of one protobuf message, as [start, end) ranges. */
function embedded(buf, start, end, field) {
  const out = [];
  let pos = start;
  while (pos < end) {
    let key;
    [key, pos] = varint(buf, pos);
    const wire = key & 7;
    if (wire === 0) [, pos] = varint(buf, pos);
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      let len;
      [len, pos] = varint(buf, pos);
      if (key >>> 3 === field) out.push([pos, pos + len]);
      pos += len;
    } else throw new Error(`protobuf wire type ${wire} is not expected in a traces export`);
  }
  return out;
}

/**
 * Spans in an ExportTraceServiceRequest: resource_spans = 1, in each scope_spans = 2, in each spans = 2
 * (opentelemetry-proto's trace.proto and trace_service.proto).
 */
function countProtobufSpans(buf) {
  let spans = 0;
  for (const [rs, re] of embedded(buf, 0, buf.length, 1)) {
    for (const [ss, se] of embedded(buf, rs, re, 2)) spans += embedded(buf, ss, se, 2).length;
  }
  return spans;
}

function countJsonSpans(text) {
  const body = JSON.parse(text);
  let spans = 0;
  for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) spans += ss.spans?.length ?? 0;
  return spans;
}

function serve() {
  const stats = { requests: 0, bytes: 0, spans: 0, undecoded: 0 };
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && path === "/stats") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(stats));
      return;
    }
    if (req.method !== "POST" || path !== "/v1/traces") {
      res.writeHead(404).end();
      req.resume();
      return;
    }
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      stats.requests++;
      stats.bytes += body.length;
      const json = (req.headers["content-type"] ?? "").includes("json");
      try {
        stats.spans += json ? countJsonSpans(body.toString("utf8")) : countProtobufSpans(body);
      } catch {
        stats.undecoded++;
      }
      // An empty ExportTraceServiceResponse: nothing rejected.
      if (json) res.writeHead(200, { "content-type": "application/json" }).end("{}");
      else res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  server.listen(0, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
  // The parent going away ends the sink.
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
}

/** Starts the sink in a child process; resolves once it listens. */
export async function startOtlpSink() {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const port = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", (line) => resolve(JSON.parse(line).port));
    child.once("exit", (code) => reject(new Error(`the OTLP sink exited (code ${code}) before it listened`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    pid: child.pid,
    stats: async () => (await fetch(`${url}/stats`)).json(),
    close: async () => {
      child.stdin.end();
      await exited;
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve();
