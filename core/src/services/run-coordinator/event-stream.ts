/**
 * NDJSON event streams: replay from the store after `after_seq`, then live from the in-memory hub, closing after the
 * last event that concerns the stream (`run_completed`, or the end of the followed NodeRun).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { RunEvent } from "@nodefabric/schemas";
import type { RunStore } from "../../store/run-store.js";
import type { EventHub, HubEvent } from "../../engine/event-hub.js";
import { runLogFields } from "../../observe/log-fields.js";

const PAGE = 1000;

export interface StreamOptions {
  runId: string;
  afterSeq: number;
  follow: boolean;
  /** Follow one NodeRun and its descendants instead of the whole run. */
  nodeRunId?: string;
  /** True when the run had already ended when the stream was asked for. */
  runEnded: boolean;
  /** Only these event types are sent (the stream still ends where it would). */
  types?: ReadonlySet<string>;
}

/** Tracks which events a node-run stream covers, learning the subtree from `node_run_created` events. */
class SubtreeFilter {
  private readonly members: Set<string>;
  constructor(private readonly root: string) {
    this.members = new Set([root]);
  }
  /** Whether the event belongs to the subtree (and learns new members). */
  covers(e: RunEvent): boolean {
    if (e.type === "node_run_created" && e.node_run_id && typeof e.data?.parent_node_run_id === "string" && this.members.has(e.data.parent_node_run_id)) {
      this.members.add(e.node_run_id);
    }
    return e.node_run_id !== undefined && this.members.has(e.node_run_id);
  }
  /** Whether the event ends the stream. */
  ends(e: RunEvent): boolean {
    return (e.type === "node_run_completed" && e.node_run_id === this.root) || e.type === "run_completed";
  }
}

/** Streams a run's (or a NodeRun subtree's) events as NDJSON on a hijacked reply. */
export async function streamEvents(req: FastifyRequest, reply: FastifyReply, store: RunStore, hub: EventHub, o: StreamOptions): Promise<void> {
  const raw = reply.raw;
  reply.hijack();
  raw.writeHead(200, { "content-type": "application/x-ndjson; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" });

  const filter = o.nodeRunId ? new SubtreeFilter(o.nodeRunId) : undefined;
  let last = -1; // highest seq examined (sent or filtered out)
  let done = false;
  let live = false;
  const pending: HubEvent[] = [];
  let unsubscribe: () => void = () => undefined;

  // Lines go out once per turn, joined: a commit of a fan-out publishes thousands of events at once, and a write per
  // line kept as many chunks (and their callbacks) queued on the socket while the follower read.
  let out = "";
  let flushQueued = false;
  const flush = () => {
    flushQueued = false;
    if (done || out === "") return;
    const text = out;
    out = "";
    raw.write(text);
  };
  const send = (line: string) => {
    out += line;
    if (!flushQueued) {
      flushQueued = true;
      queueMicrotask(flush);
    }
  };
  const finish = () => {
    if (done) return;
    if (out !== "" && !raw.destroyed) raw.write(out);
    out = "";
    done = true;
    unsubscribe();
    raw.end();
  };
  // A live event's line comes from the hub, encoded only when some stream writes it.
  const consider = (e: RunEvent, hub?: HubEvent) => {
    if (done || e.seq <= last) return;
    last = e.seq;
    const covered = filter ? filter.covers(e) : true;
    if (covered && e.seq > o.afterSeq && (!o.types || o.types.has(e.type))) send(hub ? hub.line : `${JSON.stringify(e)}\n`);
    if (filter ? filter.ends(e) : e.type === "run_completed") finish();
  };

  // Live events arrive in seq order from one writer; after another coordinator took the run over, or when a notice
  // of another coordinator's commit was read late, a live event can come past a gap: the gap is read from the store
  // first, so a follower never misses an event.
  let filling = false;
  const fill = async () => {
    filling = true;
    try {
      while (!done && pending.length > 0) {
        const next = pending[0];
        if (next.event.seq > last + 1) {
          const page = await store.listEvents(o.runId, last, Math.min(PAGE, next.event.seq - last - 1));
          for (const e of page) consider(e);
          // Nothing stored in the gap (it cannot happen with a store that commits seqs in order): do not wait forever.
          if (page.length === 0) last = next.event.seq - 1;
          continue;
        }
        pending.shift();
        consider(next.event, next);
      }
    } catch (err) {
      req.log.error({ err, ...runLogFields(o.runId, o.nodeRunId) }, "reading missed events failed");
      finish();
    } finally {
      filling = false;
    }
  };
  const onLive = (e: HubEvent) => {
    if (done || e.event.seq <= last) return;
    if (!filling && pending.length === 0 && e.event.seq === last + 1) {
      consider(e.event, e);
      return;
    }
    pending.push(e);
    if (!filling) void fill();
  };

  req.raw.on("close", finish);
  if (o.follow && !o.runEnded) {
    unsubscribe = hub.subscribe(o.runId, (e) => (live ? onLive(e) : pending.push(e)));
  }
  try {
    // A node-run stream must see the subtree's creation events, so it replays from the start and filters by seq.
    let from = filter ? -1 : o.afterSeq;
    for (;;) {
      const page = await store.listEvents(o.runId, from, PAGE);
      for (const e of page) consider(e);
      if (done || page.length < PAGE) break;
      from = page[page.length - 1].seq;
    }
  } catch (err) {
    req.log.error({ err, ...runLogFields(o.runId, o.nodeRunId) }, "event replay failed");
    finish();
    return;
  }
  if (!o.follow || o.runEnded) {
    finish();
    return;
  }
  live = true;
  pending.sort((a, b) => a.event.seq - b.event.seq);
  while (pending.length > 0 && pending[0].event.seq <= last) pending.shift();
  if (pending.length > 0) await fill();
}
