/**
 * A real OTLP/HTTP trace receiver for tests: the official OpenTelemetry exporters send to it
 * exactly as they would to a collector, and tests read back the spans it decoded.
 *
 * It behaves like a collector's OTLP/HTTP receiver where a test could notice:
 * POST /v1/traces with application/x-protobuf or application/json, optionally gzip- or
 * deflate-compressed, answers 200 with an empty ExportTraceServiceResponse in the request's
 * encoding; other paths 404, other methods 405, other media types 415, undecodable bodies 400
 * (with a google.rpc.Status body in the request's encoding).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { gunzip, inflate } from "node:zlib";
import { decodeJsonTraceRequest, decodeProtobufTraceRequest, type ReceivedSpan } from "./otlp-trace-decoder.js";

export type { OtlpAttributes, OtlpValue, ReceivedSpan } from "./otlp-trace-decoder.js";

/** One export request as the receiver saw it. */
export interface ReceivedRequest {
  /** The media type, without parameters such as charset. */
  contentType: string;
  /** Content-Encoding as sent, "" when uncompressed. */
  contentEncoding: string;
  /** Spans decoded from this request (0 when it was rejected). */
  count: number;
  /** The HTTP status the receiver answered. */
  status: number;
}

export interface OtlpReceiver {
  /** Base URL, e.g. http://127.0.0.1:PORT */
  url: string;
  /** url + "/v1/traces": what an exporter's `url` option takes. */
  tracesUrl: string;
  /** Every span received so far, in arrival order. */
  spans: ReceivedSpan[];
  /** One entry per POST to /v1/traces, accepted or not. */
  requests: ReceivedRequest[];
  /** Resolves with a snapshot of the spans once predicate holds; rejects after timeoutMs (default 5000). */
  waitForSpans(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const PROTOBUF = "application/x-protobuf";
const JSON_TYPE = "application/json";
/** Collectors cap request bodies too; 20 MiB is generous for tests. */
const MAX_BODY_BYTES = 20 * 1024 * 1024;
/** google.rpc.Code INVALID_ARGUMENT, what a collector reports for a malformed export. */
const RPC_INVALID_ARGUMENT = 3;

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);

class HttpFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Starts a receiver on 127.0.0.1 with an ephemeral port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: ReceivedRequest[] = [];
  const waiters = new Set<{ check: () => void; fail: (error: Error) => void }>();

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // Only reachable if writing the response itself failed; never let it take the test process down.
      if (!res.headersSent) res.writeHead(500).end(String(error));
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://receiver").pathname;
    if (path !== "/v1/traces") {
      return sendText(res, 404, "404 page not found");
    }
    if (req.method !== "POST") {
      res.setHeader("Allow", "POST");
      return sendText(res, 405, `405 method not allowed, supported: [POST]`);
    }
    const contentType = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    const contentEncoding = (req.headers["content-encoding"] ?? "").trim().toLowerCase();
    const record = (status: number, count: number) => requests.push({ contentType, contentEncoding, count, status });

    if (contentType !== PROTOBUF && contentType !== JSON_TYPE) {
      record(415, 0);
      return sendText(res, 415, `415 unsupported media type, supported: [${JSON_TYPE}, ${PROTOBUF}]`);
    }

    let received: ReceivedSpan[];
    try {
      const raw = await readBody(req);
      const body = await decompress(raw, contentEncoding);
      received = contentType === PROTOBUF ? decodeProtobufTraceRequest(body) : decodeJsonTraceRequest(parseJson(body));
    } catch (error) {
      const status = error instanceof HttpFailure ? error.status : 400;
      record(status, 0);
      return sendStatus(res, status, contentType, error instanceof Error ? error.message : String(error));
    }

    spans.push(...received);
    record(200, received.length);
    // Record before answering, so an exporter's successful flush means the spans are visible.
    for (const waiter of [...waiters]) waiter.check();
    res.writeHead(200, { "Content-Type": contentType });
    res.end(contentType === PROTOBUF ? Buffer.alloc(0) : "{}");
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    tracesUrl: `${url}/v1/traces`,
    spans,
    requests,
    waitForSpans(predicate, timeoutMs = 5000) {
      return new Promise<ReceivedSpan[]>((resolve, reject) => {
        const waiter = {
          check: () => {
            let done: boolean;
            try {
              done = predicate(spans);
            } catch (error) {
              finish();
              reject(error);
              return;
            }
            if (done) {
              finish();
              resolve([...spans]);
            }
          },
          fail: (error: Error) => {
            finish();
            reject(error);
          },
        };
        const timer = setTimeout(() => {
          const names = spans.map((s) => s.name).join(", ") || "none";
          waiter.fail(new Error(`OTLP receiver: spans did not match within ${timeoutMs} ms; received ${spans.length}: ${names}`));
        }, timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          waiters.delete(waiter);
        };
        waiters.add(waiter);
        waiter.check();
      });
    },
    async close() {
      for (const waiter of [...waiters]) waiter.fail(new Error("OTLP receiver closed"));
      // Exporters keep connections alive; close them so close() does not wait for their idle timeout.
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpFailure(413, `request body exceeds ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function decompress(body: Buffer, encoding: string): Promise<Buffer> {
  switch (encoding) {
    case "":
    case "identity":
      return body;
    case "gzip":
    case "x-gzip":
      return gunzipAsync(body).catch((error: Error) => {
        throw new HttpFailure(400, `invalid gzip body: ${error.message}`);
      });
    case "deflate":
      return inflateAsync(body).catch((error: Error) => {
        throw new HttpFailure(400, `invalid deflate body: ${error.message}`);
      });
    default:
      throw new HttpFailure(400, `unsupported Content-Encoding ${JSON.stringify(encoding)}`);
  }
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (error) {
    throw new HttpFailure(400, `invalid JSON body: ${(error as Error).message}`);
  }
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8" });
  res.end(text);
}

/** Errors carry a google.rpc.Status (code 1, message 2) in the request's encoding, as the collector sends. */
function sendStatus(res: ServerResponse, status: number, contentType: string, message: string): void {
  res.writeHead(status, { "Content-Type": contentType });
  if (contentType === JSON_TYPE) {
    res.end(JSON.stringify({ code: RPC_INVALID_ARGUMENT, message }));
    return;
  }
  const text = Buffer.from(message, "utf8");
  res.end(Buffer.concat([Buffer.from([0x08, RPC_INVALID_ARGUMENT, 0x12]), varint(text.length), text]));
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  while (value > 0x7f) {
    bytes.push((value & 0x7f) | 0x80);
    value >>>= 7;
  }
  bytes.push(value);
  return Buffer.from(bytes);
}
