/**
 * A live event stream that hears of an event past a gap (another coordinator wrote the events between, or a commit
 * notice was read late) reads the missing events from the store first: the follower gets every event once, in order.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import type { RunEvent } from "@nodefabric/schemas";
import { EventHub } from "../src/engine/event-hub.js";
import { streamEvents } from "../src/services/run-coordinator/event-stream.js";
import { openSqliteRunStore, type SqliteRunStore } from "../src/store/sqlite-run-store.js";
import { makeEvent, makeNodeRun, makeRun } from "./store/run-store-contract.js";
import { followNdjson } from "../../test/run-client.js";

describe("event streams across a gap", () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  it("fill the gap from the store before a live event, and end with run_completed", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-gap-"));
    const store: SqliteRunStore = openSqliteRunStore({ path: path.join(dir, "runs.db") });
    closers.push(async () => fs.rmSync(dir, { recursive: true, force: true }), () => store.close());
    const run = makeRun({ state: "running" });
    await store.apply({
      runs: [run],
      nodeRuns: [makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id })],
      events: [makeEvent(run.run_id, { type: "run_started", data: {} }), makeEvent(run.run_id), makeEvent(run.run_id)],
    });
    const hub = new EventHub();
    const app = Fastify();
    app.get("/events", async (req, reply) => streamEvents(req, reply, store, hub, { runId: run.run_id, afterSeq: -1, follow: true, runEnded: false }));
    await app.listen({ host: "127.0.0.1", port: 0 });
    closers.push(() => app.close());
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/events`;

    const seen: RunEvent[] = [];
    const following = followNdjson(url, (e) => {
      seen.push(e);
      return e.type === "run_completed";
    });
    // Live from here: seqs 3 and 4 are committed but only 5 is published (as if only its notice was read).
    while (hub.followers() === 0 || seen.length < 3) await new Promise((r) => setTimeout(r, 10));
    const later = await store.apply({ events: [makeEvent(run.run_id), makeEvent(run.run_id), makeEvent(run.run_id, { type: "node_run_completed", data: { state: "completed" } })] });
    hub.publish([later[2]]);
    // An event published again, and the end, arrive in order.
    const end = await store.apply({ events: [makeEvent(run.run_id, { type: "run_completed", data: { state: "completed" } })] });
    hub.publish([later[1], end[0]]);
    await following;
    expect(seen.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(seen).toEqual(await store.listEvents(run.run_id, -1, 100));
  });
});
