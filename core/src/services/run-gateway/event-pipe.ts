/**
 * The gateway's NDJSON event stream: the coordinator's stream piped through chunk by chunk, never buffered, with
 * the upstream request aborted as soon as the client goes away.
 */
import { once } from "node:events";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Dispatcher } from "undici";
import type { CoordinatorPool } from "./coordinator-pool.js";
import { relayError } from "./coordinator-forwarding.js";
import { runLogFields } from "../../observe/log-fields.js";

export interface EventPipeOptions {
  path: string;
  query: Record<string, string | number | boolean | undefined>;
  headers: Record<string, string>;
  /** Streams in flight, so that closing the gateway can end them. */
  open: Set<AbortController>;
}

/** Pipes one coordinator event stream to the client; it opens on a live coordinator, passing over down ones. */
export async function pipeEvents(pool: CoordinatorPool, req: FastifyRequest, reply: FastifyReply, o: EventPipeOptions): Promise<void> {
  const raw = reply.raw;
  const upstreamAbort = new AbortController();
  let clientGone = false;
  const onClientClose = () => {
    // "close" also follows a normal end; only a close before the end means the client left.
    if (!raw.writableFinished) clientGone = true;
    upstreamAbort.abort();
  };
  raw.on("close", onClientClose);
  o.open.add(upstreamAbort);
  try {
    let upstream: Dispatcher.ResponseData;
    let baseUrl: string;
    try {
      ({ value: upstream, baseUrl } = await pool.stream(o.path, { query: o.query, headers: o.headers, signal: upstreamAbort.signal }));
    } catch (err) {
      if (clientGone) {
        reply.hijack();
        return;
      }
      throw err;
    }

    if (upstream.statusCode < 200 || upstream.statusCode >= 300) {
      const text = await upstream.body.text();
      let body: unknown = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        // not JSON: relayError turns it into the error its status implies
      }
      relayError(reply, baseUrl, upstream.statusCode, body, upstream.headers);
      return;
    }

    reply.hijack();
    raw.writeHead(200, { "content-type": "application/x-ndjson; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" });
    // Headers go out now, so a client learns the stream is open before the first event arrives.
    raw.flushHeaders();
    try {
      for await (const chunk of upstream.body) {
        if (!raw.write(chunk as Buffer)) await once(raw, "drain", { signal: upstreamAbort.signal });
      }
      raw.end();
    } catch (err) {
      if (clientGone || raw.destroyed) return;
      // The coordinator broke off mid-stream. Ending cleanly would look like a complete stream, so the client
      // connection is cut instead and the client knows to resume with after_seq.
      const runId = (req.params as { run_id?: string }).run_id;
      req.log.warn({ err, ...(runId ? runLogFields(runId) : {}) }, "upstream event stream failed");
      raw.destroy();
    }
  } finally {
    o.open.delete(upstreamAbort);
    raw.off("close", onClientClose);
  }
}
