/**
 * The RunStore contract as a vitest suite: any implementation (SQLite now, PostgreSQL next) runs it with
 * `runStoreContract(name, open)`. Every test opens a fresh, empty store.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { validatorFor, type RunEvent } from "@nodefabric/schemas";
import { newId } from "../../src/ids.js";
import type {
  ApprovalRecord,
  NewRunEvent,
  NodeRunRecord,
  RunRecord,
  RunStore,
} from "../../src/store/run-store.js";
import { RunExistsError } from "../../src/store/run-store.js";

/** What `open` hands the suite: an empty store, optionally a way to open the same data again, and a cleanup. */
export interface RunStoreHarness {
  store: RunStore;
  /** Opens the data of `store` again; the suite closes `store` first. */
  reopen?: () => Promise<RunStore>;
  /** Removes what `open` made; the suite has closed every store by then. */
  cleanup: () => Promise<void>;
}

/** A fixed instant the tests count from, so claims and deadlines are exact. */
export const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

const iso = (ms: number) => new Date(ms).toISOString();

/** A RunRecord whose `run` document is a valid v1 Run agreeing with the record's columns. */
export function makeRun(overrides: Partial<RunRecord> = {}): RunRecord {
  const run_id = overrides.run_id ?? newId("run");
  const state = overrides.state ?? "queued";
  const created_at = overrides.created_at ?? T0;
  return {
    run_id,
    tenant_id: null,
    state,
    request_hash: `sha256:${run_id}`,
    deadline_at: null,
    created_at,
    ...overrides,
    run: overrides.run ?? {
      run_id,
      state,
      root_node_run_id: `nr_root_of_${run_id}`,
      run_context: overrides.tenant_id ? { tenant_id: overrides.tenant_id } : {},
      started_at: iso(created_at),
    },
  };
}

/** A NodeRunRecord of `run_id` whose `node_run` document is a valid v1 NodeRun agreeing with the columns. */
export function makeNodeRun(overrides: Partial<NodeRunRecord> & { run_id: string }): NodeRunRecord {
  const node_run_id = overrides.node_run_id ?? newId("nr");
  const state = overrides.state ?? "queued";
  const created_at = overrides.created_at ?? T0;
  const parent = overrides.parent_node_run_id ?? null;
  const doc: NodeRunRecord["node_run"] = {
    node_run_id,
    run_id: overrides.run_id,
    node_type_ref: { node_type_id: "test.echo", version: "1.0.0" },
    state,
    kind: "atomic",
    created_at: iso(created_at),
    inputs: { message: "hello", nested: { list: [1, 2, 3], flag: true, none: null } },
    extensions: { "nodefabric.attempt": overrides.attempt ?? 1, "nodefabric.depth": overrides.depth ?? 0 },
  };
  if (parent) doc.parent_node_run_id = parent;
  return {
    node_run_id,
    parent_node_run_id: parent,
    state,
    attempt: 1,
    available_at: created_at,
    lease_owner: null,
    lease_expires_at: null,
    approval_id: null,
    idempotency_key: null,
    spec_hash: null,
    depth: 0,
    created_at,
    ...overrides,
    node_run: overrides.node_run ?? doc,
  };
}

/** A new event of `run_id` (without seq). */
export function makeEvent(run_id: string, overrides: Partial<NewRunEvent> = {}): NewRunEvent {
  return { run_id, type: "node_run_started", time: iso(T0), data: { note: "x" }, ...overrides };
}

/** An approval of a NodeRun. */
export function makeApproval(nr: NodeRunRecord, overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    approval_id: newId("apr"),
    run_id: nr.run_id,
    node_run_id: nr.node_run_id,
    state: "pending",
    created_at: T0,
    resolved_at: null,
    decision: { decision: "require_approval", reason_code: "needs_review", approval_ref: { approval_id: "x" } },
    ...overrides,
  };
}

function expectValid(name: "run" | "node_run" | "run_event", doc: unknown): void {
  const validate = validatorFor(name);
  const ok = validate(doc);
  expect(validate.errors ?? [], `${name} must validate`).toEqual([]);
  expect(ok).toBe(true);
}

/** A deterministic pseudo-random sequence, so a failing interleaving can be replayed. */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

const ids = (records: { node_run_id: string }[]) => records.map((r) => r.node_run_id);
const runIds = (records: { run_id: string }[]) => records.map((r) => r.run_id);

/** Registers the RunStore contract tests for one implementation. */
export function runStoreContract(name: string, open: () => Promise<RunStoreHarness>): void {
  describe(`RunStore contract: ${name}`, () => {
    let h: RunStoreHarness;
    let store: RunStore;
    const opened: RunStore[] = [];

    beforeEach(async () => {
      h = await open();
      store = h.store;
      opened.push(store);
    });

    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await h.cleanup();
    });

    /** A stored run with its root NodeRun. */
    async function seedRun(runOverrides: Partial<RunRecord> = {}): Promise<{ run: RunRecord; root: NodeRunRecord }> {
      const run = makeRun(runOverrides);
      const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
      await store.apply({ runs: [run], nodeRuns: [root] });
      return { run, root };
    }

    describe("fixtures", () => {
      it("produce documents that validate against the v1 schemas", () => {
        const run = makeRun({ tenant_id: "t1", state: "running" });
        expectValid("run", run.run);
        const nr = makeNodeRun({ run_id: run.run_id, parent_node_run_id: "nr_parent", state: "assigned" });
        expectValid("node_run", nr.node_run);
        expectValid("run_event", { ...makeEvent(run.run_id, { node_run_id: nr.node_run_id }), seq: 0 });
      });
    });

    describe("apply and reads", () => {
      it("stores runs, node runs and approvals and reads back exactly what was written", async () => {
        const run = makeRun({ tenant_id: "tenant-a", deadline_at: T0 + 60_000, state: "running" });
        const root = makeNodeRun({ run_id: run.run_id, state: "running", attempt: 2, available_at: T0 + 5 });
        const child = makeNodeRun({
          run_id: run.run_id,
          parent_node_run_id: root.node_run_id,
          idempotency_key: `${root.node_run_id}:0`,
          spec_hash: "spec-1",
          depth: 1,
          created_at: T0 + 1,
          lease_owner: "coord-1",
          lease_expires_at: T0 + 30_000,
        });
        const approval = makeApproval(child);
        const events = await store.apply({ runs: [run], nodeRuns: [root, child], approvals: [approval] });
        expect(events).toEqual([]);

        const gotRun = await store.getRun(run.run_id);
        expect(gotRun).toEqual(run);
        expectValid("run", gotRun!.run);
        const gotRoot = await store.getNodeRun(root.node_run_id);
        expect(gotRoot).toEqual(root);
        expectValid("node_run", gotRoot!.node_run);
        expect(await store.getNodeRun(child.node_run_id)).toEqual(child);
        expect(await store.getApproval(approval.approval_id)).toEqual(approval);
      });

      it("answers undefined, -1 and empty lists for ids it does not hold", async () => {
        expect(await store.getRun("run_missing")).toBeUndefined();
        expect(await store.getNodeRun("nr_missing")).toBeUndefined();
        expect(await store.getApproval("apr_missing")).toBeUndefined();
        expect(await store.findChild("run_missing", "nr_missing", "k")).toBeUndefined();
        expect(await store.listNodeRuns("run_missing")).toEqual([]);
        expect(await store.listEvents("run_missing", -1, 100)).toEqual([]);
        expect(await store.lastSeq("run_missing")).toBe(-1);
        expect(await store.listRuns({ limit: 10 })).toEqual([]);
        expect(await store.listOpenRuns()).toEqual([]);
        expect(await store.apply({})).toEqual([]);
      });

      it("hands out fresh objects, so a caller mutating one changes nothing stored", async () => {
        const { run, root } = await seedRun();
        const a = (await store.getRun(run.run_id))!;
        a.state = "failed";
        a.run.state = "failed";
        a.run.extensions = { "nodefabric.x": 1 };
        const n = (await store.getNodeRun(root.node_run_id))!;
        n.node_run.inputs!.message = "changed";
        n.lease_owner = "thief";
        expect(await store.getRun(run.run_id)).toEqual(run);
        expect(await store.getNodeRun(root.node_run_id)).toEqual(root);
        const [listed] = await store.listNodeRuns(run.run_id);
        listed.node_run.state = "completed";
        expect((await store.listNodeRuns(run.run_id))[0]).toEqual(root);
      });

      it("upserts: writing a record again replaces its state, document and bookkeeping", async () => {
        const { run, root } = await seedRun({ deadline_at: T0 + 1000 });
        await store.apply({ events: [makeEvent(run.run_id), makeEvent(run.run_id)] });
        // Read first, so an implementation that keeps what it read must also keep it current.
        expect(await store.getRun(run.run_id)).toEqual(run);
        expect(await store.getNodeRun(root.node_run_id)).toEqual(root);

        const running: RunRecord = { ...run, state: "running", deadline_at: T0 + 2000, run: { ...run.run, state: "running" } };
        await store.apply({ runs: [running] });
        expect(await store.getRun(run.run_id)).toEqual(running);
        expect(await store.listRuns({ limit: 10 })).toEqual([running]);

        const run2: RunRecord = {
          ...run,
          state: "completed",
          deadline_at: null,
          run: { ...run.run, state: "completed", ended_at: iso(T0 + 9), extensions: { "nodefabric.outputs": { v: 1 } } },
        };
        const root2: NodeRunRecord = {
          ...root,
          state: "running",
          attempt: 3,
          available_at: T0 + 777,
          lease_owner: "coord-9",
          lease_expires_at: T0 + 888,
          approval_id: "apr_1",
          node_run: { ...root.node_run, state: "running", started_at: iso(T0 + 5), outputs: { partial: true } },
        };
        const events = await store.apply({ runs: [run2], nodeRuns: [root2], events: [makeEvent(run.run_id)] });
        // The upsert of the run leaves its event numbering alone.
        expect(events.map((e) => e.seq)).toEqual([2]);
        expect(await store.getRun(run.run_id)).toEqual(run2);
        expect(await store.getNodeRun(root.node_run_id)).toEqual(root2);
        expectValid("run", (await store.getRun(run.run_id))!.run);

        // And back: a lease cleared by writing the record with nulls reads back as nulls.
        const root3: NodeRunRecord = { ...root2, lease_owner: null, lease_expires_at: null, approval_id: null };
        await store.apply({ nodeRuns: [root3] });
        expect(await store.getNodeRun(root.node_run_id)).toEqual(root3);
        expect(await store.listNodeRuns(run.run_id)).toEqual([root3]);
      });

      it("upserts approvals: pending, then resolved", async () => {
        const { root } = await seedRun();
        const pending = makeApproval(root);
        await store.apply({ approvals: [pending] });
        expect(await store.getApproval(pending.approval_id)).toEqual(pending);
        const approved: ApprovalRecord = { ...pending, state: "approved", resolved_at: T0 + 50 };
        await store.apply({ approvals: [approved] });
        expect(await store.getApproval(pending.approval_id)).toEqual(approved);
        const rejected: ApprovalRecord = { ...pending, state: "rejected", resolved_at: T0 + 60 };
        await store.apply({ approvals: [rejected] });
        expect(await store.getApproval(pending.approval_id)).toEqual(rejected);
      });
    });

    describe("event seq allocation", () => {
      it("starts at 0, also for a run created in the same batch, and returns the events with their seq in batch order", async () => {
        const run = makeRun();
        const inputs = [
          makeEvent(run.run_id, { type: "run_started", data: {} }),
          makeEvent(run.run_id, { type: "node_run_created", node_run_id: run.run.root_node_run_id }),
          makeEvent(run.run_id, { type: "policy_decided", data: { decision: "allow" }, extensions: { "nodefabric.k": "v" } }),
        ];
        const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
        const out = await store.apply({ runs: [run], nodeRuns: [root], events: inputs });
        expect(out).toEqual(inputs.map((e, seq) => ({ ...e, seq })));
        for (const e of out) expectValid("run_event", e);
        expect(await store.lastSeq(run.run_id)).toBe(2);
        expect(await store.listEvents(run.run_id, -1, 100)).toEqual(out);
      });

      it("is gapless and ordered per run across many batches of interleaved runs", async () => {
        const runs = [makeRun(), makeRun(), makeRun(), makeRun()];
        await store.apply({ runs });
        const random = lcg(42);
        const returned = new Map<string, RunEvent[]>(runs.map((r) => [r.run_id, []]));
        for (let batch = 0; batch < 40; batch++) {
          const size = 1 + Math.floor(random() * 12);
          const events: NewRunEvent[] = [];
          for (let i = 0; i < size; i++) {
            const run = runs[Math.floor(random() * runs.length)];
            events.push(makeEvent(run.run_id, { data: { batch, i } }));
          }
          const out = await store.apply({ events });
          expect(out).toHaveLength(events.length);
          for (let i = 0; i < out.length; i++) {
            expect(out[i]).toEqual({ ...events[i], seq: out[i].seq });
            returned.get(out[i].run_id)!.push(out[i]);
          }
        }
        for (const run of runs) {
          const mine = returned.get(run.run_id)!;
          // In batch order, each run's seqs are exactly 0, 1, 2, … with no gap and no repeat.
          expect(mine.map((e) => e.seq)).toEqual(mine.map((_, i) => i));
          expect(await store.listEvents(run.run_id, -1, 10_000)).toEqual(mine);
          expect(await store.lastSeq(run.run_id)).toBe(mine.length - 1);
        }
      });

      it("lastSeq is -1 for a run without events, then the highest seq", async () => {
        const { run } = await seedRun();
        expect(await store.lastSeq(run.run_id)).toBe(-1);
        await store.apply({ events: [makeEvent(run.run_id)] });
        expect(await store.lastSeq(run.run_id)).toBe(0);
        await store.apply({ events: [makeEvent(run.run_id), makeEvent(run.run_id), makeEvent(run.run_id)] });
        expect(await store.lastSeq(run.run_id)).toBe(3);
      });

      it("listEvents pages by after_seq and limit", async () => {
        const { run } = await seedRun();
        const all = await store.apply({ events: Array.from({ length: 10 }, (_, i) => makeEvent(run.run_id, { data: { i } })) });
        expect(all.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        expect(await store.listEvents(run.run_id, -1, 100)).toEqual(all);
        expect(await store.listEvents(run.run_id, 3, 4)).toEqual(all.slice(4, 8));
        expect(await store.listEvents(run.run_id, 7, 100)).toEqual(all.slice(8));
        expect(await store.listEvents(run.run_id, 9, 100)).toEqual([]);
        expect(await store.listEvents(run.run_id, -1, 1)).toEqual(all.slice(0, 1));
        const other = await seedRun();
        expect(await store.listEvents(other.run.run_id, -1, 100)).toEqual([]);
      });

      it("listEvents pages the same whatever batches the events came in, with other runs' events between", async () => {
        // A store may keep a batch's events of one run together (SQLite does): every page, from anywhere, is the same.
        const { run } = await seedRun();
        const { run: other } = await seedRun();
        const all: RunEvent[] = [];
        for (const size of [1, 3, 1, 5, 2, 1]) {
          const events: NewRunEvent[] = [];
          for (let i = 0; i < size; i++) {
            events.push(makeEvent(run.run_id, { data: { n: all.length + i } }));
            events.push(makeEvent(other.run_id, { data: { n: i } }));
          }
          const committed = await store.apply({ events });
          all.push(...committed.filter((e) => e.run_id === run.run_id));
        }
        expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 13 }, (_, i) => i));
        expect(await store.lastSeq(run.run_id)).toBe(12);
        for (let after = -1; after <= 13; after++) {
          for (const limit of [1, 2, 3, 4, 7, 100]) {
            expect(await store.listEvents(run.run_id, after, limit), `after ${after}, limit ${limit}`).toEqual(all.slice(after + 1, after + 1 + limit));
          }
        }
        expect(await store.listEvents(run.run_id, 4, 0)).toEqual([]);
        expect((await store.listEvents(other.run_id, -1, 100)).map((e) => e.data)).toEqual([1, 3, 1, 5, 2, 1].flatMap((size) => Array.from({ length: size }, (_, i) => ({ n: i }))));
      });
    });

    describe("a failing batch", () => {
      it("an event for an unknown run rejects the whole batch and changes nothing at all", async () => {
        const { run, root } = await seedRun();
        const before = await store.apply({ events: [makeEvent(run.run_id), makeEvent(run.run_id)] });
        expect(await store.getRun(run.run_id)).toEqual(run);
        expect(await store.getNodeRun(root.node_run_id)).toEqual(root);
        const fresh = makeRun();
        const freshRoot = makeNodeRun({ run_id: fresh.run_id });
        const approval = makeApproval(root);
        const changedRun: RunRecord = { ...run, state: "running", run: { ...run.run, state: "running" } };
        const changedRoot: NodeRunRecord = { ...root, state: "running", node_run: { ...root.node_run, state: "running" } };

        await expect(
          store.apply({
            runs: [changedRun, fresh],
            nodeRuns: [changedRoot, freshRoot],
            approvals: [approval],
            events: [makeEvent(run.run_id), makeEvent(fresh.run_id), makeEvent("run_that_does_not_exist")],
          }),
        ).rejects.toThrow();

        expect(await store.getRun(run.run_id)).toEqual(run);
        expect(await store.getNodeRun(root.node_run_id)).toEqual(root);
        expect(await store.getRun(fresh.run_id)).toBeUndefined();
        expect(await store.getNodeRun(freshRoot.node_run_id)).toBeUndefined();
        expect(await store.getApproval(approval.approval_id)).toBeUndefined();
        expect(await store.listEvents(run.run_id, -1, 100)).toEqual(before);
        expect(await store.lastSeq(run.run_id)).toBe(1);
        expect(await store.lastSeq(fresh.run_id)).toBe(-1);
        expect(await store.listRuns({ limit: 10 })).toEqual([run]);
        expect(await store.listOpenRuns()).toEqual([run]);

        // The numbering carries on where the last committed batch left it.
        const after = await store.apply({ events: [makeEvent(run.run_id)] });
        expect(after.map((e) => e.seq)).toEqual([2]);
      });
    });

    describe("creating a run", () => {
      it("creates a run named in `creates` once; creating it again is refused with RunExistsError and writes nothing", async () => {
        const run = makeRun();
        const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id });
        const first = await store.apply({ runs: [run], nodeRuns: [root], events: [makeEvent(run.run_id, { type: "run_started" })], creates: [run.run_id] });
        expect(first.map((e) => e.seq)).toEqual([0]);

        // The same run_id again, with another root and other events (another coordinator's start of the same id),
        // and in the same batch another run that would be fine on its own.
        const again: RunRecord = { ...makeRun(), run_id: run.run_id, request_hash: "other" };
        const otherRoot = makeNodeRun({ run_id: run.run_id, node_run_id: again.run.root_node_run_id });
        const bystander = makeRun();
        const err = await store
          .apply({
            runs: [again, bystander],
            nodeRuns: [otherRoot, makeNodeRun({ run_id: bystander.run_id, node_run_id: bystander.run.root_node_run_id })],
            events: [makeEvent(run.run_id, { type: "run_started" }), makeEvent(bystander.run_id)],
            creates: [run.run_id, bystander.run_id],
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(RunExistsError.is(err)).toBe(true);
        expect((err as RunExistsError).runId).toBe(run.run_id);

        expect(await store.getRun(run.run_id)).toEqual(run);
        expect(await store.getNodeRun(otherRoot.node_run_id)).toBeUndefined();
        expect(await store.getRun(bystander.run_id)).toBeUndefined();
        expect((await store.listEvents(run.run_id, -1, 10)).map((e) => e.seq)).toEqual([0]);
        expect(await store.lastSeq(run.run_id)).toBe(0);

        // Without `creates`, a batch writing the run is an update as before.
        const running: RunRecord = { ...run, state: "running", run: { ...run.run, state: "running" } };
        await store.apply({ runs: [running], events: [makeEvent(run.run_id)] });
        expect((await store.getRun(run.run_id))?.state).toBe("running");
        expect(await store.lastSeq(run.run_id)).toBe(1);
      });
    });

    describe("children and idempotency keys", () => {
      it("findChild finds a child by (run, parent, idempotency key) only", async () => {
        const { run, root } = await seedRun();
        const child = makeNodeRun({
          run_id: run.run_id,
          parent_node_run_id: root.node_run_id,
          idempotency_key: `${root.node_run_id}:0`,
          spec_hash: "h0",
          depth: 1,
        });
        await store.apply({ nodeRuns: [child] });
        expect(await store.findChild(run.run_id, root.node_run_id, `${root.node_run_id}:0`)).toEqual(child);
        expect(await store.findChild(run.run_id, root.node_run_id, `${root.node_run_id}:1`)).toBeUndefined();
        expect(await store.findChild(run.run_id, child.node_run_id, `${root.node_run_id}:0`)).toBeUndefined();
        expect(await store.findChild("run_other", root.node_run_id, `${root.node_run_id}:0`)).toBeUndefined();
      });

      it("refuses a second child with the same key under the same parent, rejecting its whole batch", async () => {
        const { run, root } = await seedRun();
        const first = makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id, idempotency_key: "k", spec_hash: "a" });
        await store.apply({ nodeRuns: [first], events: [makeEvent(run.run_id)] });

        const dup = makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id, idempotency_key: "k", spec_hash: "b" });
        const bystander = makeRun();
        await expect(
          store.apply({ runs: [bystander], nodeRuns: [dup], events: [makeEvent(run.run_id), makeEvent(bystander.run_id)] }),
        ).rejects.toThrow();
        expect(await store.getNodeRun(dup.node_run_id)).toBeUndefined();
        expect(await store.getRun(bystander.run_id)).toBeUndefined();
        expect(await store.findChild(run.run_id, root.node_run_id, "k")).toEqual(first);
        expect(await store.lastSeq(run.run_id)).toBe(0);

        // Writing the same child again is an update, not a second child.
        const again: NodeRunRecord = { ...first, state: "running", node_run: { ...first.node_run, state: "running" } };
        await store.apply({ nodeRuns: [again] });
        expect(await store.findChild(run.run_id, root.node_run_id, "k")).toEqual(again);

        // The key is scoped to (run, parent): another parent, or another run, may use it.
        const sibling = makeNodeRun({ run_id: run.run_id, parent_node_run_id: first.node_run_id, idempotency_key: "k" });
        const other = await seedRun();
        const elsewhere = makeNodeRun({ run_id: other.run.run_id, parent_node_run_id: root.node_run_id, idempotency_key: "k" });
        await store.apply({ nodeRuns: [sibling, elsewhere] });
        expect(await store.findChild(run.run_id, first.node_run_id, "k")).toEqual(sibling);
        expect(await store.findChild(other.run.run_id, root.node_run_id, "k")).toEqual(elsewhere);

        // Children without a key never collide.
        const a = makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id });
        const b = makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id });
        await store.apply({ nodeRuns: [a, b] });
        expect(await store.getNodeRun(b.node_run_id)).toEqual(b);
      });

      it("listNodeRuns answers every NodeRun of a run, oldest first (created_at, then node_run_id)", async () => {
        const { run, root } = await seedRun();
        const late = makeNodeRun({ run_id: run.run_id, node_run_id: "nr_b_late", created_at: T0 + 20 });
        const tieB = makeNodeRun({ run_id: run.run_id, node_run_id: "nr_b_tie", created_at: T0 + 10 });
        const tieA = makeNodeRun({ run_id: run.run_id, node_run_id: "nr_a_tie", created_at: T0 + 10 });
        const early = makeNodeRun({ run_id: run.run_id, node_run_id: "nr_z_early", created_at: T0 + 5 });
        await store.apply({ nodeRuns: [late, tieB, tieA, early] });
        const other = await seedRun();
        const list = await store.listNodeRuns(run.run_id);
        expect(ids(list)).toEqual([root.node_run_id, "nr_z_early", "nr_a_tie", "nr_b_tie", "nr_b_late"]);
        expect(list[3]).toEqual(tieB);
        expect(ids(await store.listNodeRuns(other.run.run_id))).toEqual([other.root.node_run_id]);
      });
    });

    describe("claims and leases", () => {
      const lease = 1_000;

      it("claims only dispatchable NodeRuns, oldest first, and sets the lease", async () => {
        const { run } = await seedRun({ state: "running" });
        // The seeded root (created T0) is queued and dispatchable too; it is the oldest.
        const root = (await store.listNodeRuns(run.run_id))[0];
        const mk = (id: string, o: Partial<NodeRunRecord>) => makeNodeRun({ run_id: run.run_id, node_run_id: id, ...o });
        const queued = mk("nr_queued", { created_at: T0 + 2 });
        const tie = mk("nr_a_tie", { created_at: T0 + 2 });
        const assigned = mk("nr_assigned", { state: "assigned", created_at: T0 + 3 });
        const runningRetry = mk("nr_running", { state: "running", created_at: T0 + 1 });
        const backoff = mk("nr_backoff", { state: "running", created_at: T0, available_at: T0 + 10_000 });
        const waiting = mk("nr_waiting_approval", { approval_id: "apr_x", created_at: T0 });
        const done = ["completed", "failed", "canceled"].map((state, i) =>
          mk(`nr_${state}`, { state: state as NodeRunRecord["state"], created_at: T0 - 10 + i }),
        );
        await store.apply({ nodeRuns: [queued, tie, assigned, runningRetry, backoff, waiting, ...done] });

        const now = T0 + 100;
        const claimed = await store.claim({ owner: "c1", now, limit: 50, leaseMs: lease });
        expect(ids(claimed)).toEqual([root.node_run_id, "nr_running", "nr_a_tie", "nr_queued", "nr_assigned"]);
        for (const c of claimed) {
          // Claiming sets the lease and nothing else: state and document are the caller's to change.
          const written = [root, queued, tie, assigned, runningRetry].find((n) => n.node_run_id === c.node_run_id)!;
          expect(c).toEqual({ ...written, lease_owner: "c1", lease_expires_at: now + lease });
          expect(await store.getNodeRun(c.node_run_id)).toEqual(c);
        }
        expect((await store.getNodeRun("nr_backoff"))!.lease_owner).toBeNull();
        expect((await store.getNodeRun("nr_waiting_approval"))!.lease_owner).toBeNull();
      });

      it("does not claim before available_at, and does at available_at", async () => {
        const { run } = await seedRun();
        await store.apply({ nodeRuns: [makeNodeRun({ run_id: run.run_id, node_run_id: "nr_later", state: "running", available_at: T0 + 5_000 })] });
        expect(ids(await store.claim({ owner: "c1", now: T0 + 4_999, limit: 10, leaseMs: lease }))).toEqual([run.run.root_node_run_id]);
        expect(await store.claim({ owner: "c1", now: T0 + 4_999, limit: 10, leaseMs: lease })).toEqual([]);
        expect(ids(await store.claim({ owner: "c1", now: T0 + 5_000, limit: 10, leaseMs: lease }))).toEqual(["nr_later"]);
      });

      it("does not claim twice while leased, and claims again once the lease has expired", async () => {
        const { root } = await seedRun();
        const first = await store.claim({ owner: "c1", now: T0, limit: 10, leaseMs: lease });
        expect(ids(first)).toEqual([root.node_run_id]);
        expect(await store.claim({ owner: "c1", now: T0 + 1, limit: 10, leaseMs: lease })).toEqual([]);
        expect(await store.claim({ owner: "c2", now: T0 + 500, limit: 10, leaseMs: lease })).toEqual([]);
        // Live until lease_expires_at itself; expired only after it.
        expect(await store.claim({ owner: "c2", now: T0 + lease, limit: 10, leaseMs: lease })).toEqual([]);
        const again = await store.claim({ owner: "c2", now: T0 + lease + 1, limit: 10, leaseMs: lease });
        expect(ids(again)).toEqual([root.node_run_id]);
        expect(again[0].lease_owner).toBe("c2");
        expect(again[0].lease_expires_at).toBe(T0 + 2 * lease + 1);
        expect(await store.claim({ owner: "c1", now: T0 + lease + 2, limit: 10, leaseMs: lease })).toEqual([]);
      });

      it("claims again at once after the holder writes the record back without a lease", async () => {
        const { root } = await seedRun();
        const [claimed] = await store.claim({ owner: "c1", now: T0, limit: 10, leaseMs: lease });
        await store.apply({ nodeRuns: [{ ...claimed, state: "running", attempt: 2, lease_owner: null, lease_expires_at: null }] });
        const [again] = await store.claim({ owner: "c1", now: T0 + 1, limit: 10, leaseMs: lease });
        expect(again.node_run_id).toBe(root.node_run_id);
        expect(again.state).toBe("running");
        expect(again.attempt).toBe(2);
      });

      it("does not claim a NodeRun waiting on an approval until approval_id is cleared", async () => {
        const { run } = await seedRun();
        await store.claim({ owner: "c1", now: T0, limit: 10, leaseMs: lease }); // takes the root out of the way
        const waiting = makeNodeRun({ run_id: run.run_id, approval_id: "apr_1" });
        await store.apply({ nodeRuns: [waiting] });
        expect(await store.claim({ owner: "c1", now: T0 + 1, limit: 10, leaseMs: lease })).toEqual([]);
        await store.apply({ nodeRuns: [{ ...waiting, approval_id: null }] });
        expect(ids(await store.claim({ owner: "c1", now: T0 + 2, limit: 10, leaseMs: lease }))).toEqual([waiting.node_run_id]);
      });

      it("respects the limit and hands out the rest, oldest first, on the next claim", async () => {
        const { run } = await seedRun();
        const more = [1, 2, 3, 4].map((i) => makeNodeRun({ run_id: run.run_id, node_run_id: `nr_${i}`, created_at: T0 + i }));
        await store.apply({ nodeRuns: more.reverse() });
        expect(ids(await store.claim({ owner: "c1", now: T0 + 10, limit: 2, leaseMs: lease }))).toEqual([run.run.root_node_run_id, "nr_1"]);
        expect(ids(await store.claim({ owner: "c1", now: T0 + 10, limit: 2, leaseMs: lease }))).toEqual(["nr_2", "nr_3"]);
        expect(ids(await store.claim({ owner: "c1", now: T0 + 10, limit: 2, leaseMs: lease }))).toEqual(["nr_4"]);
        expect(await store.claim({ owner: "c1", now: T0 + 10, limit: 2, leaseMs: lease })).toEqual([]);
      });

      it("puts expired leases back in age order among unleased work", async () => {
        const { run } = await seedRun();
        const young = makeNodeRun({ run_id: run.run_id, node_run_id: "nr_young", created_at: T0 + 50 });
        await store.claim({ owner: "dead", now: T0, limit: 10, leaseMs: lease }); // the root, leased until T0 + lease
        await store.apply({ nodeRuns: [young] });
        const claimed = await store.claim({ owner: "c2", now: T0 + lease + 1, limit: 10, leaseMs: lease });
        expect(ids(claimed)).toEqual([run.run.root_node_run_id, "nr_young"]);
        expect(claimed.map((c) => c.lease_owner)).toEqual(["c2", "c2"]);
      });

      it("releaseLeases clears every lease of one owner, so its work is claimable at once", async () => {
        const { run } = await seedRun();
        const others = [1, 2].map((i) => makeNodeRun({ run_id: run.run_id, node_run_id: `nr_${i}`, created_at: T0 + i }));
        await store.apply({ nodeRuns: others });
        expect(await store.claim({ owner: "c1", now: T0 + 10, limit: 2, leaseMs: lease })).toHaveLength(2);
        expect(await store.claim({ owner: "c2", now: T0 + 10, limit: 10, leaseMs: lease })).toHaveLength(1);
        expect(await store.releaseLeases("nobody")).toBe(0);
        expect(await store.releaseLeases("c1")).toBe(2);
        const root = (await store.getNodeRun(run.run.root_node_run_id))!;
        expect([root.lease_owner, root.lease_expires_at]).toEqual([null, null]);
        expect(ids(await store.claim({ owner: "c1", now: T0 + 11, limit: 10, leaseMs: lease }))).toEqual([root.node_run_id, "nr_1"]);
        expect((await store.getNodeRun("nr_2"))!.lease_owner).toBe("c2");
      });

      it("listExpiredLeases answers open NodeRuns whose lease ran out before now", async () => {
        const { run } = await seedRun();
        const mk = (id: string, o: Partial<NodeRunRecord>) => makeNodeRun({ run_id: run.run_id, node_run_id: id, ...o });
        await store.apply({
          nodeRuns: [
            mk("nr_exp_queued", { lease_owner: "c1", lease_expires_at: T0 + 10 }),
            mk("nr_exp_running", { state: "running", lease_owner: "c1", lease_expires_at: T0 + 20 }),
            mk("nr_exp_assigned", { state: "assigned", lease_owner: "c2", lease_expires_at: T0 + 30 }),
            mk("nr_live", { state: "running", lease_owner: "c1", lease_expires_at: T0 + 100 }),
            mk("nr_at_now", { state: "running", lease_owner: "c1", lease_expires_at: T0 + 50 }),
            mk("nr_done", { state: "completed", lease_owner: "c1", lease_expires_at: T0 + 5 }),
          ],
        });
        const expired = await store.listExpiredLeases(T0 + 50, 100);
        expect(ids(expired).sort()).toEqual(["nr_exp_assigned", "nr_exp_queued", "nr_exp_running"]);
        expect(expired.find((n) => n.node_run_id === "nr_exp_running")).toEqual(await store.getNodeRun("nr_exp_running"));
        const two = await store.listExpiredLeases(T0 + 50, 2);
        expect(two).toHaveLength(2);
        expect(await store.listExpiredLeases(T0 + 10, 100)).toEqual([]);
      });
    });

    describe("open NodeRuns", () => {
      it("listOpenNodeRuns answers the open NodeRuns of one run, oldest first, as the last commit left them", async () => {
        if (!store.listOpenNodeRuns) throw new Error(`${name} gives no listOpenNodeRuns: a composite's end would read every NodeRun of its run`);
        const run = makeRun({ state: "running" });
        const other = makeRun({ state: "running" });
        const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id, state: "running", created_at: T0 });
        const children = (["queued", "assigned", "running", "completed", "failed", "canceled"] as const).map((state, i) =>
          makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id, state, depth: 1, created_at: T0 + 10 - i }),
        );
        const elsewhere = makeNodeRun({ run_id: other.run_id, node_run_id: other.run.root_node_run_id, state: "running" });
        await store.apply({ runs: [run, other], nodeRuns: [root, ...children, elsewhere] });
        const open = async () => (await store.listOpenNodeRuns!(run.run_id)).map((n) => [n.node_run_id, n.state]);
        // Oldest first: the running child was created before the assigned one, which was created before the queued one.
        expect(await open()).toEqual([
          [root.node_run_id, "running"],
          [children[2].node_run_id, "running"],
          [children[1].node_run_id, "assigned"],
          [children[0].node_run_id, "queued"],
        ]);
        // A child that ends leaves the answer with the commit that ends it; the records are whole.
        await store.apply({ nodeRuns: [{ ...children[2], state: "completed", node_run: { ...children[2].node_run, state: "completed" } }] });
        expect(await open()).toEqual([
          [root.node_run_id, "running"],
          [children[1].node_run_id, "assigned"],
          [children[0].node_run_id, "queued"],
        ]);
        expect((await store.listOpenNodeRuns!(run.run_id))[1]).toEqual(await store.getNodeRun(children[1].node_run_id));
        expect(await store.listOpenNodeRuns!("run_unknown")).toEqual([]);
      });
    });

    describe("queue statistics", () => {
      const lease = 1_000;
      it("queueStats counts what a claim would take now, and the earliest available_at among it", async () => {
        if (!store.queueStats) throw new Error(`${name} gives no queueStats: metrics could not show its queue`);
        const { run, root } = await seedRun();
        const mk = (id: string, o: Partial<NodeRunRecord>) => makeNodeRun({ run_id: run.run_id, node_run_id: id, ...o });
        expect(await store.queueStats(T0 + 100)).toEqual({ depth: 1, oldestAvailableAt: root.available_at });
        await store.claim({ owner: "c1", now: T0, limit: 10, leaseMs: lease }); // the root, leased until T0 + lease
        await store.apply({
          nodeRuns: [
            mk("nr_ready", { available_at: T0 + 20 }),
            mk("nr_retry", { state: "running", available_at: T0 + 40 }),
            mk("nr_backoff", { state: "running", available_at: T0 + 10_000 }),
            mk("nr_approval", { approval_id: "apr_q", available_at: T0 }),
            mk("nr_leased", { state: "running", lease_owner: "c2", lease_expires_at: T0 + 10_000, available_at: T0 }),
            mk("nr_done", { state: "completed", available_at: T0 }),
          ],
        });
        expect(await store.queueStats(T0 + 100)).toEqual({ depth: 2, oldestAvailableAt: T0 + 20 });
        // Once the root's lease has expired it is claimable again, and the oldest.
        expect(await store.queueStats(T0 + lease + 1)).toEqual({ depth: 3, oldestAvailableAt: root.available_at });
        await store.claim({ owner: "c1", now: T0 + 100, limit: 10, leaseMs: lease });
        expect(await store.queueStats(T0 + 100)).toEqual({ depth: 0, oldestAvailableAt: null });
      });
    });

    describe("run queries", () => {
      it("listOverdueRuns answers open runs whose deadline passed before now", async () => {
        const overdueQueued = makeRun({ deadline_at: T0 + 10 });
        const overdueRunning = makeRun({ state: "running", deadline_at: T0 + 20 });
        const atNow = makeRun({ state: "running", deadline_at: T0 + 50 });
        const future = makeRun({ state: "running", deadline_at: T0 + 1_000 });
        const noDeadline = makeRun({ state: "running" });
        const ended = (["completed", "failed", "canceled"] as const).map((state) => makeRun({ state, deadline_at: T0 }));
        await store.apply({ runs: [overdueQueued, overdueRunning, atNow, future, noDeadline, ...ended] });
        const overdue = await store.listOverdueRuns(T0 + 50, 100);
        expect(runIds(overdue).sort()).toEqual([overdueQueued.run_id, overdueRunning.run_id].sort());
        expect(overdue.find((r) => r.run_id === overdueRunning.run_id)).toEqual(overdueRunning);
        expect(await store.listOverdueRuns(T0 + 50, 1)).toHaveLength(1);
        expect(await store.listOverdueRuns(T0, 100)).toEqual([]);
      });

      it("listOpenRuns answers every run not yet terminal", async () => {
        const open1 = makeRun({ state: "queued" });
        const open2 = makeRun({ state: "running" });
        const ended = (["completed", "failed", "canceled"] as const).map((state) => makeRun({ state }));
        await store.apply({ runs: [open1, ...ended, open2] });
        const open = await store.listOpenRuns();
        expect(runIds(open).sort()).toEqual([open1.run_id, open2.run_id].sort());
        expect(open.find((r) => r.run_id === open2.run_id)).toEqual(open2);
        // A run that ends leaves the list.
        await store.apply({ runs: [{ ...open1, state: "completed", run: { ...open1.run, state: "completed" } }] });
        expect(runIds(await store.listOpenRuns())).toEqual([open2.run_id]);
      });

      it("listRuns answers newest first, pages by before_run_id and filters by tenant and state", async () => {
        // Ids sort by creation, so r1 is the oldest.
        const r1 = makeRun({ tenant_id: "t1", state: "completed" });
        const r2 = makeRun({ tenant_id: "t1", state: "running" });
        const r3 = makeRun({ tenant_id: "t2", state: "running" });
        const r4 = makeRun({ tenant_id: null, state: "failed" });
        const r5 = makeRun({ tenant_id: null, state: "running" });
        expect([r1, r2, r3, r4, r5].map((r) => r.run_id)).toEqual([r1, r2, r3, r4, r5].map((r) => r.run_id).sort());
        await store.apply({ runs: [r3, r1, r5, r2, r4] });

        expect(await store.listRuns({ limit: 10 })).toEqual([r5, r4, r3, r2, r1]);
        expect(runIds(await store.listRuns({ limit: 2 }))).toEqual([r5.run_id, r4.run_id]);
        expect(runIds(await store.listRuns({ limit: 2, before_run_id: r4.run_id }))).toEqual([r3.run_id, r2.run_id]);
        expect(runIds(await store.listRuns({ limit: 2, before_run_id: r2.run_id }))).toEqual([r1.run_id]);
        expect(await store.listRuns({ limit: 2, before_run_id: r1.run_id })).toEqual([]);

        expect(await store.listRuns({ limit: 10, tenant_id: "t1" })).toEqual([r2, r1]);
        expect(runIds(await store.listRuns({ limit: 10, tenant_id: null }))).toEqual([r5.run_id, r4.run_id]);
        expect(await store.listRuns({ limit: 10, tenant_id: "t3" })).toEqual([]);
        expect(runIds(await store.listRuns({ limit: 10, tenant_id: undefined }))).toHaveLength(5);

        expect(runIds(await store.listRuns({ limit: 10, state: "running" }))).toEqual([r5.run_id, r3.run_id, r2.run_id]);
        expect(runIds(await store.listRuns({ limit: 10, state: "running", tenant_id: "t1" }))).toEqual([r2.run_id]);
        expect(runIds(await store.listRuns({ limit: 10, state: "running", tenant_id: null }))).toEqual([r5.run_id]);
        expect(runIds(await store.listRuns({ limit: 1, state: "running", before_run_id: r5.run_id }))).toEqual([r3.run_id]);
        expect(runIds(await store.listRuns({ limit: 10, tenant_id: "t1", before_run_id: r2.run_id }))).toEqual([r1.run_id]);
        expect(await store.listRuns({ limit: 10, state: "canceled" })).toEqual([]);
      });

      it("listRuns filters by root node type and creation time, combined with tenant, state and pages", async () => {
        /** A run whose root is of `type`, with a child of another type, which must not count. */
        const seed = async (type: string, created_at: number, over: Partial<RunRecord> = {}) => {
          const run = makeRun({ created_at, ...over });
          const root = makeNodeRun({ run_id: run.run_id, node_run_id: run.run.root_node_run_id, created_at });
          root.node_run.node_type_ref = { node_type_id: type, version: "1.0.0" };
          const child = makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id, created_at });
          child.node_run.node_type_ref = { node_type_id: "test.child", version: "1.0.0" };
          await store.apply({ runs: [run], nodeRuns: [root, child] });
          return run;
        };
        const a1 = await seed("test.a", T0, { tenant_id: "t1" });
        const b1 = await seed("test.b", T0 + 10);
        const a2 = await seed("test.a", T0 + 20, { state: "running" });
        const a3 = await seed("test.a", T0 + 30, { tenant_id: "t1" });
        // Later writes of a run, without its root NodeRun, keep its root node type.
        const a2ended = { ...a2, state: "completed" as const, run: { ...a2.run, state: "completed" as const } };
        await store.apply({ runs: [a2ended] });

        expect(await store.listRuns({ limit: 10, root_node_type_id: "test.b" })).toEqual([b1]);
        expect(await store.listRuns({ limit: 10, root_node_type_id: "test.a" })).toEqual([a3, a2ended, a1]);
        expect(await store.listRuns({ limit: 10, root_node_type_id: "test.child" })).toEqual([]);
        expect(await store.listRuns({ limit: 10, root_node_type_id: "test.none" })).toEqual([]);

        // Both bounds are exclusive.
        expect(runIds(await store.listRuns({ limit: 10, created_after: T0 }))).toEqual(runIds([a3, a2, b1]));
        expect(runIds(await store.listRuns({ limit: 10, created_before: T0 + 30 }))).toEqual(runIds([a2, b1, a1]));
        expect(runIds(await store.listRuns({ limit: 10, created_after: T0, created_before: T0 + 30 }))).toEqual(runIds([a2, b1]));
        expect(await store.listRuns({ limit: 10, created_after: T0 + 30 })).toEqual([]);
        expect(await store.listRuns({ limit: 10, created_after: T0 + 20, created_before: T0 + 10 })).toEqual([]);

        expect(runIds(await store.listRuns({ limit: 10, root_node_type_id: "test.a", tenant_id: "t1" }))).toEqual(runIds([a3, a1]));
        expect(runIds(await store.listRuns({ limit: 10, root_node_type_id: "test.a", tenant_id: null }))).toEqual(runIds([a2]));
        expect(runIds(await store.listRuns({ limit: 10, root_node_type_id: "test.a", state: "completed" }))).toEqual(runIds([a2]));
        expect(runIds(await store.listRuns({ limit: 10, root_node_type_id: "test.b", state: "completed" }))).toEqual([]);
        expect(runIds(await store.listRuns({ limit: 1, root_node_type_id: "test.a", before_run_id: a3.run_id }))).toEqual(runIds([a2]));
        expect(runIds(await store.listRuns({ limit: 10, root_node_type_id: "test.a", created_after: T0, before_run_id: a3.run_id }))).toEqual(runIds([a2]));
        expect(runIds(await store.listRuns({ limit: 10, tenant_id: "t1", created_before: T0 + 30, state: "queued" }))).toEqual(runIds([a1]));
      });

      it("listApprovals answers newest first with the run's tenant and the NodeRun's node type, filters and pages", async () => {
        const { run: r1, root: n1 } = await seedRun({ tenant_id: "t1" });
        const { root: n2 } = await seedRun({ tenant_id: null });
        const child = makeNodeRun({ run_id: r1.run_id, parent_node_run_id: n1.node_run_id });
        child.node_run.node_type_ref = { node_type_id: "test.sleep", version: "2.0.0" };
        // A PDP may name an approval, so ids need not follow time: the order is created_at, then approval_id.
        const first = makeApproval(n1, { approval_id: "zz-first", created_at: T0 });
        const second = makeApproval(child, { approval_id: "aa-second", created_at: T0 + 1 });
        const done = makeApproval(n2, { approval_id: "mm-done", created_at: T0 + 1, state: "approved", resolved_at: T0 + 5 });
        const third = makeApproval(n2, { approval_id: "nn-third", created_at: T0 + 2 });
        await store.apply({ nodeRuns: [child], approvals: [first, second, done, third] });
        const ids = (list: { approval_id: string }[]) => list.map((a) => a.approval_id);

        const all = await store.listApprovals({ limit: 10 });
        expect(ids(all)).toEqual(["nn-third", "mm-done", "aa-second", "zz-first"]);
        expect(all[1]).toEqual({ ...done, tenant_id: null, node_type_ref: { node_type_id: "test.echo", version: "1.0.0" } });
        expect(all[2]).toEqual({ ...second, tenant_id: "t1", node_type_ref: { node_type_id: "test.sleep", version: "2.0.0" } });

        expect(ids(await store.listApprovals({ limit: 10, tenant_id: "t1" }))).toEqual(["aa-second", "zz-first"]);
        expect(ids(await store.listApprovals({ limit: 10, tenant_id: null }))).toEqual(["nn-third", "mm-done"]);
        expect(await store.listApprovals({ limit: 10, tenant_id: "t9" })).toEqual([]);
        expect(ids(await store.listApprovals({ limit: 10, state: "pending" }))).toEqual(["nn-third", "aa-second", "zz-first"]);
        expect(ids(await store.listApprovals({ limit: 10, state: "approved" }))).toEqual(["mm-done"]);
        expect(await store.listApprovals({ limit: 10, state: "canceled" })).toEqual([]);
        expect(ids(await store.listApprovals({ limit: 10, run_id: r1.run_id }))).toEqual(["aa-second", "zz-first"]);
        expect(await store.listApprovals({ limit: 10, run_id: r1.run_id, state: "approved" })).toEqual([]);
        expect(await store.listApprovals({ limit: 10, run_id: "run_unknown" })).toEqual([]);

        expect(ids(await store.listApprovals({ limit: 2 }))).toEqual(["nn-third", "mm-done"]);
        expect(ids(await store.listApprovals({ limit: 2, before: { created_at: T0 + 1, approval_id: "mm-done" } }))).toEqual(["aa-second", "zz-first"]);
        expect(ids(await store.listApprovals({ limit: 2, before: { created_at: T0 + 1, approval_id: "aa-second" } }))).toEqual(["zz-first"]);
        expect(await store.listApprovals({ limit: 2, before: { created_at: T0, approval_id: "zz-first" } })).toEqual([]);
        expect(ids(await store.listApprovals({ limit: 1, state: "pending", before: { created_at: T0 + 2, approval_id: "nn-third" } }))).toEqual(["aa-second"]);

        // A decision moves an approval from one state's listing to the other's.
        await store.apply({ approvals: [{ ...second, state: "rejected", resolved_at: T0 + 9 }] });
        expect(ids(await store.listApprovals({ limit: 10, state: "pending" }))).toEqual(["nn-third", "zz-first"]);
        expect(await store.listApprovals({ limit: 10, state: "rejected" })).toEqual([
          { ...second, state: "rejected", resolved_at: T0 + 9, tenant_id: "t1", node_type_ref: { node_type_id: "test.sleep", version: "2.0.0" } },
        ]);
      });
    });

    describe("durability and lifecycle", () => {
      it("keeps everything across a reopen, and the seq numbering continues without a gap", async ({ skip }) => {
        if (!h.reopen) skip("this implementation offers no reopen");
        const { run, root } = await seedRun({ tenant_id: "t1", deadline_at: T0 + 99 });
        const child = makeNodeRun({ run_id: run.run_id, parent_node_run_id: root.node_run_id, idempotency_key: "k0", spec_hash: "s", created_at: T0 + 1 });
        const approval = makeApproval(child);
        const events = await store.apply({ nodeRuns: [child], approvals: [approval], events: [makeEvent(run.run_id), makeEvent(run.run_id)] });
        const [claimed] = await store.claim({ owner: "c1", now: T0, limit: 1, leaseMs: 1_000 });
        await store.close();

        const again = await h.reopen!();
        opened.push(again);
        expect(await again.getRun(run.run_id)).toEqual(run);
        expect(await again.getNodeRun(root.node_run_id)).toEqual(claimed);
        expect(await again.findChild(run.run_id, root.node_run_id, "k0")).toEqual(child);
        expect(await again.getApproval(approval.approval_id)).toEqual(approval);
        expect(await again.listEvents(run.run_id, -1, 100)).toEqual(events);
        expect(await again.lastSeq(run.run_id)).toBe(1);
        const next = await again.apply({ events: [makeEvent(run.run_id), makeEvent(run.run_id)] });
        expect(next.map((e) => e.seq)).toEqual([2, 3]);
        // The lease taken on the root before the reopen still holds: only the child is claimable.
        expect(ids(await again.claim({ owner: "c2", now: T0 + 1, limit: 10, leaseMs: 1_000 }))).toEqual([child.node_run_id]);
        expect(runIds(await again.listRuns({ limit: 10, tenant_id: "t1" }))).toEqual([run.run_id]);
      });

      it("close can be called twice", async () => {
        await store.close();
        await expect(store.close()).resolves.toBeUndefined();
      });
    });
  });
}
