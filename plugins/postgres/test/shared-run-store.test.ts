/**
 * SharedRunStore on the real PostgreSQL server: two (or three) stores, each with its own pool and owner, on one
 * schema, as coordinators in separate processes would be. Run ownership and its fencing epochs, takeovers racing,
 * gapless seqs under concurrent writers, commit notices over LISTEN/NOTIFY, the coordinator directory and the shared
 * secret.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { FencedError, RunExistsError, type NodeRunRecord, type RunRecord } from "@nodefabric/core";
import { makeEvent, makeNodeRun, makeRun } from "../../../core/test/store/run-store-contract.js";
import { openPgRunStore, type PgRunStore } from "../src/index.js";
import { dropSchema, newSchema, OPEN_OPTIONS, PG_URL, storeUrl } from "./support/pg.js";

const LEASE = 5_000;

const schemas: string[] = [];
const stores: PgRunStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const s of schemas.splice(0)) await dropSchema(s);
});

/** Stores on one fresh schema, attached to the given owners. */
async function coordinators(...owners: string[]): Promise<PgRunStore[]> {
  const schema = newSchema();
  schemas.push(schema);
  const out: PgRunStore[] = [];
  for (const owner of owners) {
    const store = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
    stores.push(store);
    store.attach(owner, LEASE);
    out.push(store);
  }
  return out;
}

/** A stored run with its root NodeRun, created by `store` (which then holds it). */
async function createRun(store: PgRunStore, overrides: Partial<RunRecord> = {}): Promise<{ run: RunRecord; root: NodeRunRecord }> {
  const run = makeRun({ state: "running", ...overrides });
  const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
  await store.apply({ runs: [run], nodeRuns: [root], events: [makeEvent(run.run_id, { type: "run_started", data: {} })] });
  return { run, root };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (err: unknown) => err,
  );
}

/** Waits until `check` holds, or fails after a few seconds. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  const until = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("SharedRunStore: PostgreSQL", () => {
  it("creating a run holds it, from epoch 1, with a lease of leaseMs", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const before = Date.now();
    const { run } = await createRun(a);
    expect(a.holds(run.run_id)).toBe(true);
    expect(b.holds(run.run_id)).toBe(false);
    const owner = (await b.ownerOf(run.run_id))!;
    expect(owner).toMatchObject({ owner: "coord-a", endpoint: null, epoch: 1 });
    expect(owner.expires_at).toBeGreaterThanOrEqual(before + LEASE);
    expect(owner.expires_at).toBeLessThanOrEqual(Date.now() + LEASE);
    expect(await a.ownerOf("run_missing")).toBeUndefined();
  });

  it("lets only one of two coordinators creating the same run at the same moment create it; the other gets RunExistsError and writes nothing", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    for (let round = 0; round < 20; round++) {
      const ofA = makeRun();
      const ofB: RunRecord = { ...makeRun(), run_id: ofA.run_id };
      const start = (store: PgRunStore, run: RunRecord) =>
        rejection(
          store.apply({
            runs: [run],
            nodeRuns: [makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id })],
            events: [makeEvent(run.run_id, { type: "run_started", data: { root_node_run_id: run.run.root_node_run_id } })],
            creates: [run.run_id],
          }),
        );
      const [errA, errB] = await Promise.all([start(a, ofA), start(b, ofB)]);
      // Exactly one created it, and the other was told the run exists (not fenced, not a unique violation).
      expect([errA, errB].filter((e) => e === undefined)).toHaveLength(1);
      const refused = errA ?? errB;
      expect(RunExistsError.is(refused)).toBe(true);
      const winner = errA === undefined ? ofA : ofB;
      const loser = errA === undefined ? ofB : ofA;
      expect((await a.getRun(ofA.run_id))?.run).toEqual(winner.run);
      expect(await a.getNodeRun(loser.run.root_node_run_id)).toBeUndefined();
      const events = await b.listEvents(ofA.run_id, -1, 10);
      expect(events.map((e) => [e.seq, e.type])).toEqual([[0, "run_started"]]);
      // The creator holds it; the other does not think it does.
      expect((errA === undefined ? a : b).holds(ofA.run_id)).toBe(true);
      expect((errA === undefined ? b : a).holds(ofA.run_id)).toBe(false);
    }
  });

  it("refuses another coordinator's write to a run it does not hold, writing nothing of the batch", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const { run, root } = await createRun(a);
    const mine = await createRun(b);
    const changed: RunRecord = { ...run, state: "completed", run: { ...run.run, state: "completed" } };
    const err = await rejection(
      b.apply({
        runs: [changed],
        nodeRuns: [{ ...mine.root, state: "running", node_run: { ...mine.root.node_run, state: "running" } }],
        events: [makeEvent(run.run_id), makeEvent(mine.run.run_id)],
      }),
    );
    expect(FencedError.is(err)).toBe(true);
    expect((err as FencedError).runIds).toEqual([run.run_id]);
    // Nothing of the batch: neither the other's run nor b's own run moved.
    expect(await a.getRun(run.run_id)).toEqual(run);
    expect(await a.lastSeq(run.run_id)).toBe(0);
    expect(await b.getNodeRun(mine.root.node_run_id)).toEqual(mine.root);
    expect(await b.lastSeq(mine.run.run_id)).toBe(0);
    // A NodeRun, an approval or an event alone is fenced the same way.
    await expect(b.apply({ nodeRuns: [{ ...root, state: "running" }] })).rejects.toSatisfy(FencedError.is);
    await expect(b.apply({ events: [makeEvent(run.run_id)] })).rejects.toSatisfy(FencedError.is);
    // The holder writes on.
    expect((await a.apply({ events: [makeEvent(run.run_id)] })).map((e) => e.seq)).toEqual([1]);
  });

  it("takes over a run once its lease ran out, bumping the epoch; the old owner's writes are refused and renew reports it lost", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const { run } = await createRun(a);
    expect(await b.takeOver(Date.now(), 10)).toEqual([]);
    const later = Date.now() + LEASE + 1_000;
    expect(await b.takeOver(later, 10)).toEqual([run.run_id]);
    expect(b.holds(run.run_id)).toBe(true);
    expect(await a.ownerOf(run.run_id)).toMatchObject({ owner: "coord-b", epoch: 2, expires_at: later + LEASE });

    // a still believes it holds the run (it was paused); its write is refused, and it learns it lost the run.
    expect(a.holds(run.run_id)).toBe(true);
    await expect(a.apply({ events: [makeEvent(run.run_id)] })).rejects.toSatisfy(FencedError.is);
    expect(await a.lastSeq(run.run_id)).toBe(0);
    expect(await b.apply({ events: [makeEvent(run.run_id)] })).toMatchObject([{ seq: 1 }]);

    expect(await a.renew(Date.now())).toEqual({ lost: [run.run_id] });
    expect(a.holds(run.run_id)).toBe(false);
  });

  it("release on a clean stop lets the owner's open runs go at once, and withdraws it from the directory", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const now = Date.now();
    await a.announce("http://127.0.0.1:1", now, LEASE);
    const open = await createRun(a);
    const ended = await createRun(a, { state: "completed" });
    expect(await b.takeOver(Date.now(), 10)).toEqual([]);
    expect(await a.release(Date.now())).toEqual([open.run.run_id]);
    expect((await b.coordinators(Date.now())).map((c) => c.instance_id)).not.toContain("coord-a");
    // Without waiting for the lease: the open run is taken over at once, the ended one is not.
    expect(await b.takeOver(Date.now(), 10)).toEqual([open.run.run_id]);
    expect(await b.ownerOf(ended.run.run_id)).toMatchObject({ owner: "coord-a", epoch: 1 });
    await expect(a.apply({ events: [makeEvent(open.run.run_id)] })).rejects.toSatisfy(FencedError.is);
  });

  it("renew extends every open run held and answers the runs lost meanwhile", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const kept = await createRun(a);
    const lost = await createRun(a);
    const ended = await createRun(a);
    await a.apply({ runs: [{ ...ended.run, state: "completed", run: { ...ended.run.run, state: "completed" } }] });
    expect(await b.takeOver(Date.now() + LEASE + 1, 10, [lost.run.run_id])).toEqual([lost.run.run_id]);
    const now = Date.now() + 1_000;
    expect(await a.renew(now)).toEqual({ lost: [lost.run.run_id] });
    expect(a.holds(lost.run.run_id)).toBe(false);
    expect(a.holds(kept.run.run_id)).toBe(true);
    // An ended run stays held (requests for it still come here) though it is no longer renewed.
    expect(a.holds(ended.run.run_id)).toBe(true);
    expect((await a.ownerOf(kept.run.run_id))!.expires_at).toBe(now + LEASE);
    // An ended run stays leased to its last owner but is neither renewed nor taken over.
    const endedOwner = (await b.ownerOf(ended.run.run_id))!;
    expect(endedOwner.owner).toBe("coord-a");
    expect(endedOwner.expires_at).toBeLessThan(now + LEASE);
    expect(await b.takeOver(Date.now() + 10 * LEASE, 10, [kept.run.run_id, ended.run.run_id])).toEqual([kept.run.run_id]);
    expect(await a.renew(Date.now())).toEqual({ lost: [kept.run.run_id] });
    expect(await a.renew(Date.now())).toEqual({ lost: [] });
  });

  it("never gives a run to two coordinators taking over at once", async () => {
    const [creator, a, b, c] = await coordinators("creator", "coord-a", "coord-b", "coord-c");
    const runs = Array.from({ length: 60 }, () => makeRun({ state: "running" }));
    await creator.apply({ runs });
    const ids = runs.map((r) => r.run_id).sort();
    const later = Date.now() + LEASE + 1_000;
    // Several rounds of three coordinators racing for the same expired runs, in small bites and large.
    const taken = await Promise.all([
      a.takeOver(later, 25),
      b.takeOver(later, 25),
      c.takeOver(later, 100),
      a.takeOver(later, 10),
      b.takeOver(later, 100),
    ]);
    const all = taken.flat();
    expect(new Set(all).size).toBe(all.length);
    expect([...all].sort()).toEqual(ids);
    for (const id of ids) {
      const owner = (await a.ownerOf(id))!;
      expect(owner.epoch).toBe(2);
      const holders = [a, b, c].filter((s) => s.holds(id));
      expect(holders).toHaveLength(1);
      expect(owner.owner).toBe(["coord-a", "coord-b", "coord-c"][[a, b, c].indexOf(holders[0]!)]);
    }
    // Named runs, raced for by two at once: each goes to one.
    const more = Array.from({ length: 20 }, () => makeRun({ state: "running" }));
    await creator.apply({ runs: more });
    const named = more.map((r) => r.run_id);
    const much = Date.now() + 3 * LEASE;
    const [x, y] = await Promise.all([a.takeOver(much, 100, named), b.takeOver(much, 100, named)]);
    expect(x.filter((id) => y.includes(id))).toEqual([]);
    expect([...x, ...y].sort()).toEqual([...named].sort());
  });

  it("keeps every run's seqs gapless while two coordinators apply to their own runs at once", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const mine = { a: [] as string[], b: [] as string[] };
    for (let i = 0; i < 8; i++) {
      mine.a.push((await createRun(a)).run.run_id);
      mine.b.push((await createRun(b)).run.run_id);
    }
    const writer = async (store: PgRunStore, runIds: string[], seed: number) => {
      let x = seed;
      for (let batch = 0; batch < 30; batch++) {
        const events = Array.from({ length: 1 + (batch % 7) }, (_, i) => {
          x = (x * 1103515245 + 12345) % 2 ** 31;
          return makeEvent(runIds[x % runIds.length]!, { data: { batch, i } });
        });
        await store.apply({ events });
      }
    };
    await Promise.all([writer(a, mine.a, 1), writer(b, mine.b, 2), writer(a, mine.a, 3), writer(b, mine.b, 4)]);
    for (const id of [...mine.a, ...mine.b]) {
      const events = await a.listEvents(id, -1, 10_000);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      expect(await b.lastSeq(id)).toBe(events.length - 1);
    }
  });

  it("tells each store of the other's commits, in order, and not of its own", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const heardA: [string | null, number][] = [];
    const heardB: [string | null, number][] = [];
    a.onCommit((runId, seq) => heardA.push([runId, seq]));
    const stopB = b.onCommit((runId, seq) => heardB.push([runId, seq]));
    await a.whenListening();
    await b.whenListening();

    const { run: runB } = await createRun(b);
    await b.apply({ events: [makeEvent(runB.run_id), makeEvent(runB.run_id)] });
    await b.apply({ events: [makeEvent(runB.run_id)] });
    await eventually(() => heardA.length >= 3, "a to hear b's three commits");
    expect(heardA).toEqual([
      [runB.run_id, 0],
      [runB.run_id, 2],
      [runB.run_id, 3],
    ]);

    const { run: runA } = await createRun(a);
    await eventually(() => heardB.length >= 1, "b to hear a's commit");
    expect(heardB).toEqual([[runA.run_id, 0]]);
    // A commit that writes no event is not announced; a fenced one neither.
    await a.apply({ runs: [{ ...runA, deadline_at: 1 }] });
    await expect(b.apply({ events: [makeEvent(runA.run_id)] })).rejects.toSatisfy(FencedError.is);

    // Many runs in one commit: the notices are split under pg_notify's limit, and every run is told.
    const many = Array.from({ length: 300 }, () => makeRun({ run_id: `run_${"x".repeat(40)}_${Math.random().toString(36).slice(2)}` }));
    await b.apply({ runs: many, events: many.map((r) => makeEvent(r.run_id)) });
    await eventually(() => heardA.length >= 3 + 300, "a to hear the 300 runs");
    expect(heardA.slice(3).map(([id]) => id).sort()).toEqual(many.map((r) => r.run_id).sort());
    expect(heardA.slice(3).every(([, seq]) => seq === 0)).toBe(true);
    expect(heardB).toEqual([[runA.run_id, 0]]);

    // An unsubscribed listener hears nothing more.
    stopB();
    await a.apply({ events: [makeEvent(runA.run_id)] });
    await new Promise((r) => setTimeout(r, 200));
    expect(heardB).toEqual([[runA.run_id, 0]]);
  });

  it("after losing its LISTEN connection, reconnects and tells the listener it may have missed notices", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const heard: [string | null, number][] = [];
    a.onCommit((runId, seq) => heard.push([runId, seq]));
    await a.whenListening();
    const channel = `nf_commit_${createHash("sha256").update(schemas.at(-1)!).digest("hex").slice(0, 24)}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      const { rows } = await admin.query(`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE query = $1`, [`LISTEN "${channel}"`]);
      expect(rows).toEqual([{ ok: true }]);
    } finally {
      await admin.end();
    }
    await eventually(() => heard.some(([id, seq]) => id === null && seq === -1), "the reconnect notice");
    await a.whenListening();
    const { run } = await createRun(b);
    await eventually(() => heard.some(([id]) => id === run.run_id), "a notice after the reconnect");
  });

  it("claims, attached, only NodeRuns of runs it holds, and those a previous owner of its run still leases", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const ra = await createRun(a);
    const rb = await createRun(b);
    const now = Date.now();
    const claimedA = await a.claim({ owner: "coord-a", now, limit: 10, leaseMs: 60_000 });
    expect(claimedA.map((n) => n.node_run_id)).toEqual([ra.root.node_run_id]);
    const claimedB = await b.claim({ owner: "coord-b", now, limit: 10, leaseMs: 60_000 });
    expect(claimedB.map((n) => n.node_run_id)).toEqual([rb.root.node_run_id]);
    expect(await a.claim({ owner: "coord-a", now, limit: 10, leaseMs: 60_000 })).toEqual([]);

    // b takes a's run over; a's lease on its root is still live, but a is no longer the run's owner.
    expect(await b.takeOver(now + LEASE + 1, 10, [ra.run.run_id])).toEqual([ra.run.run_id]);
    const taken = await b.claim({ owner: "coord-b", now: now + LEASE + 1, limit: 10, leaseMs: 60_000 });
    expect(taken.map((n) => [n.node_run_id, n.lease_owner])).toEqual([[ra.root.node_run_id, "coord-b"]]);
    expect(await a.claim({ owner: "coord-a", now: now + LEASE + 1, limit: 10, leaseMs: 60_000 })).toEqual([]);

    // The listings follow ownership too.
    expect((await a.listOpenRuns()).map((r) => r.run_id)).toEqual([]);
    expect((await b.listOpenRuns()).map((r) => r.run_id).sort()).toEqual([ra.run.run_id, rb.run.run_id].sort());
  });

  it("answers the same shared secret to every coordinator, made once even when asked at once", async () => {
    const [a, b] = await coordinators("coord-a", "coord-b");
    const [x, y, z] = await Promise.all([a.sharedSecret("tokens"), b.sharedSecret("tokens"), a.sharedSecret("tokens")]);
    expect(x).toHaveLength(32);
    expect(Buffer.from(y)).toEqual(Buffer.from(x));
    expect(Buffer.from(z)).toEqual(Buffer.from(x));
    const other = await b.sharedSecret("other");
    expect(Buffer.from(other)).not.toEqual(Buffer.from(x));
    expect(Buffer.from(await a.sharedSecret("other"))).toEqual(Buffer.from(other));
  });

  it("keeps a directory of live coordinators, and ownerOf names the owner's endpoint", async () => {
    const [a, b] = await coordinators("coord-b-first", "coord-a-second");
    const now = Date.now();
    await a.announce("http://127.0.0.1:7001", now, 1_000);
    await b.announce(null, now, 3_000);
    expect(await a.coordinators(now)).toEqual([
      { instance_id: "coord-a-second", endpoint: null, expires_at: now + 3_000 },
      { instance_id: "coord-b-first", endpoint: "http://127.0.0.1:7001", expires_at: now + 1_000 },
    ]);
    expect((await b.coordinators(now + 1_000)).map((c) => c.instance_id)).toEqual(["coord-a-second", "coord-b-first"]);
    expect((await b.coordinators(now + 1_001)).map((c) => c.instance_id)).toEqual(["coord-a-second"]);
    // Announcing again moves the expiry and the endpoint.
    await b.announce("http://127.0.0.1:7002", now + 2_000, 3_000);
    expect(await a.coordinators(now + 4_000)).toEqual([{ instance_id: "coord-a-second", endpoint: "http://127.0.0.1:7002", expires_at: now + 5_000 }]);

    const { run } = await createRun(a);
    expect(await b.ownerOf(run.run_id)).toMatchObject({ owner: "coord-b-first", endpoint: "http://127.0.0.1:7001", epoch: 1 });
  });

  it("does not fence, announce or notify before attach (the embedded single-coordinator use)", async () => {
    const schema = newSchema();
    schemas.push(schema);
    const store = await openPgRunStore(storeUrl(schema), OPEN_OPTIONS);
    stores.push(store);
    const run = makeRun({ state: "completed" });
    await store.apply({ runs: [run], events: [makeEvent(run.run_id)] });
    expect(await store.ownerOf(run.run_id)).toBeUndefined();
    expect(store.holds(run.run_id)).toBe(false);
    await expect(store.announce(null, Date.now(), 1_000)).rejects.toThrow(/not attached/);
    // Once attached, an unowned run is taken over like an expired one.
    store.attach("coord-late", LEASE);
    expect(await store.takeOver(Date.now(), 10)).toEqual([]);
    const queued = makeRun({ state: "queued" });
    await openPgRunStore(storeUrl(schema), OPEN_OPTIONS).then(async (plain) => {
      await plain.apply({ runs: [queued] });
      await plain.close();
    });
    expect(await store.takeOver(Date.now(), 10)).toEqual([queued.run_id]);
    expect(await store.ownerOf(queued.run_id)).toMatchObject({ owner: "coord-late", epoch: 1 });
  });
});
