/**
 * The TickWriter against a real SQLite store: one caller's bad part of a tick fails alone, while every other part of
 * the same tick commits, with gapless seqs, per-record last-write-wins and events in the order they were written.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { RunEvent } from "@nodefabric/schemas";
import { TickWriter } from "../src/engine/tick-writer.js";
import { openSqliteRunStore, type SqliteRunStore } from "../src/store/sqlite-run-store.js";
import type { RunStore, WriteBatch } from "../src/store/run-store.js";
import { makeEvent, makeNodeRun, makeRun } from "./store/run-store-contract.js";

/** A value JSON.stringify cannot write: nested far deeper than its recursion allows. */
function deeplyNested(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = {};
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

/** Counts the transactions a store is asked for. */
function counting(store: RunStore): RunStore & { applies: number } {
  const wrapped = Object.create(store) as RunStore & { applies: number };
  wrapped.applies = 0;
  wrapped.apply = (batch: WriteBatch) => {
    wrapped.applies++;
    return store.apply(batch);
  };
  return wrapped;
}

describe("TickWriter", () => {
  const dirs: string[] = [];
  const stores: SqliteRunStore[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });
  function open(): SqliteRunStore {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-tick-"));
    dirs.push(dir);
    const store = openSqliteRunStore({ path: path.join(dir, "runs.db") });
    stores.push(store);
    return store;
  }

  it("commits a healthy tick in one transaction", async () => {
    const store = counting(open());
    const writer = new TickWriter(store, () => undefined);
    const a = makeRun();
    const b = makeRun();
    const [ea, eb] = await Promise.all([
      writer.write({ runs: [a], events: [makeEvent(a.run_id, { type: "run_started" })] }),
      writer.write({ runs: [b], events: [makeEvent(b.run_id, { type: "run_started" })] }),
    ]);
    expect(store.applies).toBe(1);
    expect(ea.map((e) => e.seq)).toEqual([0]);
    expect(eb.map((e) => e.seq)).toEqual([0]);
  });

  it("fails only the poisoned parts of a tick; the others commit with gapless seqs and in order", async () => {
    const store = open();
    const published: RunEvent[] = [];
    const writer = new TickWriter(store, (events) => published.push(...events));

    // A run that already exists, with one event.
    const a = makeRun({ state: "running" });
    const nrA = makeNodeRun({ run_id: a.run_id, state: "queued" });
    await writer.write({ runs: [a], nodeRuns: [nrA], events: [makeEvent(a.run_id, { type: "run_started" })] });
    published.length = 0;

    // One tick: good, poisoned three ways, good, and a part that depends on a poisoned one.
    const c = makeRun();
    const nrC = makeNodeRun({ run_id: c.run_id, state: "queued" });
    const bad = makeRun();
    const unserializable = makeRun();
    const parts: Array<Promise<RunEvent[]>> = [
      writer.write({ nodeRuns: [{ ...nrA, state: "running" }], events: [makeEvent(a.run_id), makeEvent(a.run_id)] }),
      // JSON.stringify of the run document blows the stack.
      writer.write({ runs: [{ ...bad, run: { ...bad.run, extensions: { "nodefabric.deep": deeplyNested(200_000) } } }], events: [makeEvent(bad.run_id, { type: "run_started" })] }),
      writer.write({ runs: [c], nodeRuns: [nrC], events: [makeEvent(c.run_id, { type: "run_started" }), makeEvent(c.run_id, { type: "node_run_created" })] }),
      // JSON.stringify refuses a BigInt.
      writer.write({ runs: [{ ...unserializable, run: { ...unserializable.run, extensions: { "nodefabric.n": 1n as unknown as number } } }] }),
      // An event for a run that exists nowhere (a constraint of the store).
      writer.write({ events: [makeEvent("run_nowhere")] }),
      // The same NodeRun written again later in the tick: the last write wins.
      writer.write({ nodeRuns: [{ ...nrA, state: "completed" }], events: [makeEvent(a.run_id, { type: "node_run_completed" })] }),
      writer.write({ nodeRuns: [{ ...nrC, state: "running" }], events: [makeEvent(c.run_id, { type: "node_run_started" })] }),
      // Depends on the poisoned run above, so it fails as well.
      writer.write({ events: [makeEvent(bad.run_id, { type: "node_run_created" })] }),
    ];
    const settled = await Promise.allSettled(parts);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected", "rejected", "fulfilled", "fulfilled", "rejected"]);
    const value = (i: number) => (settled[i] as PromiseFulfilledResult<RunEvent[]>).value;
    const reason = (i: number) => (settled[i] as PromiseRejectedResult).reason as Error;
    expect(reason(1)).toBeInstanceOf(RangeError);
    expect(reason(3)).toBeInstanceOf(TypeError);
    expect(reason(4).message).toMatch(/unknown run run_nowhere/);

    // Each caller gets its own events, numbered in write order.
    expect(value(0).map((e) => [e.run_id, e.seq])).toEqual([[a.run_id, 1], [a.run_id, 2]]);
    expect(value(2).map((e) => [e.run_id, e.seq, e.type])).toEqual([[c.run_id, 0, "run_started"], [c.run_id, 1, "node_run_created"]]);
    expect(value(5).map((e) => [e.run_id, e.seq, e.type])).toEqual([[a.run_id, 3, "node_run_completed"]]);
    expect(value(6).map((e) => [e.run_id, e.seq, e.type])).toEqual([[c.run_id, 2, "node_run_started"]]);

    // What is durable: gapless seqs, nothing of the poisoned parts, last write wins per record.
    const eventsA = await store.listEvents(a.run_id, -1, 100);
    expect(eventsA.map((e) => e.seq)).toEqual([0, 1, 2, 3]);
    const eventsC = await store.listEvents(c.run_id, -1, 100);
    expect(eventsC.map((e) => [e.seq, e.type])).toEqual([[0, "run_started"], [1, "node_run_created"], [2, "node_run_started"]]);
    expect(await store.getRun(bad.run_id)).toBeUndefined();
    expect(await store.getRun(unserializable.run_id)).toBeUndefined();
    expect(await store.listEvents(bad.run_id, -1, 100)).toEqual([]);
    expect((await store.getNodeRun(nrA.node_run_id))?.state).toBe("completed");
    expect((await store.getNodeRun(nrC.node_run_id))?.state).toBe("running");
    expect((await store.getRun(c.run_id))?.run_id).toBe(c.run_id);

    // Listeners hear about exactly what committed, in commit order.
    expect(published.map((e) => [e.run_id, e.seq])).toEqual([
      [a.run_id, 1], [a.run_id, 2], [c.run_id, 0], [c.run_id, 1], [a.run_id, 3], [c.run_id, 2],
    ]);

    // The writer keeps working after a poisoned tick.
    const next = await writer.write({ events: [makeEvent(a.run_id)] });
    expect(next.map((e) => e.seq)).toEqual([4]);
  });

  it("keeps writing after a listener throws", async () => {
    const store = open();
    let calls = 0;
    const writer = new TickWriter(store, () => {
      calls++;
      throw new Error("a listener failed");
    });
    const a = makeRun();
    const first = await writer.write({ runs: [a], events: [makeEvent(a.run_id, { type: "run_started" })] });
    expect(first.map((e) => e.seq)).toEqual([0]);
    const second = await writer.write({ events: [makeEvent(a.run_id)] });
    expect(second.map((e) => e.seq)).toEqual([1]);
    expect(calls).toBe(2);
  }, 5_000);

  it("keeps up to applyConcurrency batches under way, never two with the same run, each run's writes in order", async () => {
    const inner = open();
    const active = new Set<string>();
    let underWay = 0;
    let most = 0;
    let applies = 0;
    const overlaps: string[] = [];
    const store = Object.create(inner) as RunStore;
    Object.defineProperty(store, "applyConcurrency", { value: 3 });
    store.apply = async (batch: WriteBatch) => {
      applies++;
      const runs = new Set([...(batch.runs ?? []).map((r) => r.run_id), ...(batch.events ?? []).map((e) => e.run_id)]);
      for (const id of runs) if (active.has(id)) overlaps.push(id);
      for (const id of runs) active.add(id);
      most = Math.max(most, ++underWay);
      // A commit that takes a while, as a round trip to a server does; later ones may finish first.
      await new Promise((r) => setTimeout(r, 5 + ((applies * 7) % 11)));
      try {
        return await inner.apply(batch);
      } finally {
        underWay--;
        for (const id of runs) active.delete(id);
      }
    };
    const published: RunEvent[] = [];
    const writer = new TickWriter(store, (events) => published.push(...events));
    const runs = Array.from({ length: 6 }, () => makeRun());
    const writes: Array<Promise<RunEvent[]>> = [];
    // Six ticks: each starts two runs; then four more ticks of events for every run while earlier ones are under way.
    for (let t = 0; t < 3; t++) {
      for (const r of runs.slice(2 * t, 2 * t + 2)) writes.push(writer.write({ runs: [r], events: [makeEvent(r.run_id, { type: "run_started" })] }));
      await new Promise((r) => setImmediate(r));
    }
    for (let t = 0; t < 4; t++) {
      for (const r of runs) writes.push(writer.write({ events: [makeEvent(r.run_id)] }));
      await new Promise((r) => setImmediate(r));
    }
    await writer.drain();
    expect(underWay).toBe(0);
    await Promise.all(writes);
    expect(overlaps).toEqual([]);
    expect(most).toBe(3);
    for (const r of runs) {
      // Stored gapless and published in seq order, as written.
      expect((await inner.listEvents(r.run_id, -1, 100)).map((e) => e.seq)).toEqual([0, 1, 2, 3, 4]);
      expect(published.filter((e) => e.run_id === r.run_id).map((e) => e.seq)).toEqual([0, 1, 2, 3, 4]);
    }
  }, 10_000);

  it("drain waits for every batch under way", async () => {
    const inner = open();
    const store = Object.create(inner) as RunStore;
    Object.defineProperty(store, "applyConcurrency", { value: 2 });
    let committed = 0;
    store.apply = async (batch: WriteBatch) => {
      await new Promise((r) => setTimeout(r, 20));
      const out = await inner.apply(batch);
      committed++;
      return out;
    };
    const writer = new TickWriter(store, () => undefined);
    const a = makeRun();
    const b = makeRun();
    void writer.write({ runs: [a], events: [makeEvent(a.run_id, { type: "run_started" })] });
    await new Promise((r) => setImmediate(r));
    void writer.write({ runs: [b], events: [makeEvent(b.run_id, { type: "run_started" })] });
    await writer.drain();
    expect(committed).toBe(2);
  }, 5_000);
});
