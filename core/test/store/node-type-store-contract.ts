/**
 * The NodeTypeStore contract as a vitest suite: any implementation (SQLite now, PostgreSQL next) runs it with
 * `nodeTypeStoreContract(name, open)`. Every test opens a fresh, empty store. The version order it checks is the one
 * `core/src/store/node-type-version-order.ts` defines: semver by semver, other versions by publication, each of those
 * just above the highest semver published before it.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ExecutorRecord, NodeKind, NodeTypeStore, StoredNodeType } from "../../src/store/node-type-store.js";

/** What `open` hands the suite: an empty store, optionally a way to open the same data again, and a cleanup. */
export interface NodeTypeStoreHarness {
  store: NodeTypeStore;
  /** Opens the data of `store` again; the suite closes `store` first. */
  reopen?: () => Promise<NodeTypeStore>;
  cleanup: () => Promise<void>;
}

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
let tick = 0;

/** A stored node type; published_at advances with every call so publication order and time agree. */
export function storedNodeType(node_type_id: string, version: string, kind: NodeKind = "atomic"): StoredNodeType {
  const json = JSON.stringify({ description: `${node_type_id} ${version}`, kind, node_type_id, version });
  return { node_type_id, version, kind, json, published_at: new Date(T0 + tick++).toISOString() };
}

/** An instant `s` seconds after T0, as RFC 3339. */
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

/** An executor entry registered `s` seconds after T0, serving `refs` (`id@version`). */
export function executorRecord(id: string, s: number, refs: string[] = ["svc.echo@1.0.0"], kind: NodeKind = "atomic"): ExecutorRecord {
  return {
    executor_instance_id: id,
    endpoint: `http://127.0.0.1:${9000 + id.length}/${id}`,
    kind,
    node_types: refs.map((r) => {
      const [node_type_id, version] = r.split("@") as [string, string];
      return { node_type_id, version };
    }),
    registered_at: at(s),
  };
}

export function nodeTypeStoreContract(name: string, open: () => Promise<NodeTypeStoreHarness>): void {
  describe(`NodeTypeStore contract: ${name}`, () => {
    let h: NodeTypeStoreHarness;
    let store: NodeTypeStore;
    const publish = async (id: string, versions: string[], kind: NodeKind = "atomic") => {
      for (const v of versions) expect((await store.insertNodeType(storedNodeType(id, v, kind))).inserted, `${id}@${v}`).toBe(true);
    };
    const latest = async (id: string) => (await store.latestNodeType(id))?.version;

    beforeEach(async () => {
      h = await open();
      store = h.store;
    });
    afterEach(async () => {
      await store.close();
      await h.cleanup();
    });

    it("stores and returns versions that are not semver, exactly as published", async () => {
      await publish("svc.any", ["v1", "2024-01", "latest-beta", "1.0", "rev:7+x"]);
      for (const v of ["v1", "2024-01", "latest-beta", "1.0", "rev:7+x"]) {
        const got = await store.getNodeType("svc.any", v);
        expect(got?.version, v).toBe(v);
        expect(JSON.parse(got!.json).version).toBe(v);
      }
      expect(await store.getNodeType("svc.any", "V1")).toBeUndefined();
    });

    it("orders semver versions by semver, whatever order they were published in", async () => {
      await publish("svc.semver", ["1.10.0", "1.9.0", "1.10.0-rc.1", "1.9.0-beta", "0.1.0"]);
      expect(await store.listVersions("svc.semver")).toEqual(["0.1.0", "1.9.0-beta", "1.9.0", "1.10.0-rc.1", "1.10.0"]);
      expect(await latest("svc.semver")).toBe("1.10.0");
    });

    it("orders other versions by publication, and the last published is the latest", async () => {
      await publish("svc.dated", ["2024-03", "2024-01", "v10", "v9"]);
      expect(await store.listVersions("svc.dated")).toEqual(["2024-03", "2024-01", "v10", "v9"]);
      expect(await latest("svc.dated")).toBe("v9");
    });

    it("ranks a non-semver version just above the highest semver published before it", async () => {
      await publish("svc.mixed", ["2.0.0", "v1"]);
      expect(await latest("svc.mixed")).toBe("v1");
      await publish("svc.mixed", ["1.0.1"]);
      expect(await store.listVersions("svc.mixed")).toEqual(["1.0.1", "2.0.0", "v1"]);
      expect(await latest("svc.mixed")).toBe("v1");
      await publish("svc.mixed", ["3.0.0"]);
      expect(await store.listVersions("svc.mixed")).toEqual(["1.0.1", "2.0.0", "v1", "3.0.0"]);
      expect(await latest("svc.mixed")).toBe("3.0.0");
      await publish("svc.mixed", ["w", "x"]);
      expect(await store.listVersions("svc.mixed")).toEqual(["1.0.1", "2.0.0", "v1", "3.0.0", "w", "x"]);

      await publish("svc.early", ["2024-01", "2024-02", "1.0.0", "0.5.0"]);
      expect(await store.listVersions("svc.early")).toEqual(["2024-01", "2024-02", "0.5.0", "1.0.0"]);
      expect(await latest("svc.early")).toBe("1.0.0");
    });

    it("does not move a version when identical content is inserted again", async () => {
      await publish("svc.again", ["v1", "1.0.0", "v2"]);
      const again = await store.insertNodeType(storedNodeType("svc.again", "v1"));
      expect(again.inserted).toBe(false);
      expect(again.stored.version).toBe("v1");
      expect(await store.listVersions("svc.again")).toEqual(["v1", "1.0.0", "v2"]);
      expect(await latest("svc.again")).toBe("v2");
    });

    it("picks the same latest of every id in latestNodeTypes, filtered by the latest version's kind", async () => {
      await publish("a.one", ["2.0.0", "v1", "1.0.1"]);
      await publish("b.two", ["v1", "1.0.0"]);
      await publish("c.three", ["2024-01", "2023-12"], "composite");
      const all = await store.latestNodeTypes();
      expect(all.map((t) => `${t.node_type_id}@${t.version}`)).toEqual(["a.one@v1", "b.two@1.0.0", "c.three@2023-12"]);
      expect((await store.latestNodeTypes("composite")).map((t) => t.version)).toEqual(["2023-12"]);
      expect((await store.latestNodeTypes("atomic")).map((t) => t.node_type_id)).toEqual(["a.one", "b.two"]);
    });

    it("lists every version by id then version order, and pages after any version, semver or not", async () => {
      await publish("p.mix", ["2.0.0", "v1", "1.0.1", "3.0.0", "2024-x"]);
      await publish("p.other", ["b", "a"]);
      await publish("q.last", ["1.0.0"]);
      const expected = ["p.mix@1.0.1", "p.mix@2.0.0", "p.mix@v1", "p.mix@3.0.0", "p.mix@2024-x", "p.other@b", "p.other@a", "q.last@1.0.0"];
      const whole = await store.listNodeTypes({ limit: 100 });
      expect(whole.items.map((t) => `${t.node_type_id}@${t.version}`)).toEqual(expected);
      expect(whole.more).toBe(false);

      for (const limit of [1, 2, 3]) {
        const seen: string[] = [];
        let after: { node_type_id: string; version: string } | undefined;
        for (;;) {
          const page = await store.listNodeTypes({ limit, after });
          seen.push(...page.items.map((t) => `${t.node_type_id}@${t.version}`));
          if (!page.more) break;
          const last = page.items[page.items.length - 1]!;
          after = { node_type_id: last.node_type_id, version: last.version };
        }
        expect(seen, `limit ${limit}`).toEqual(expected);
      }
      const q = await store.listNodeTypes({ q: "MIX", limit: 2, after: { node_type_id: "p.mix", version: "v1" } });
      expect(q.items.map((t) => t.version)).toEqual(["3.0.0", "2024-x"]);
      expect(q.more).toBe(false);
    });

    it("pages after a version it does not hold: a semver one by semver, another after the whole id", async () => {
      await publish("p.mix", ["1.0.0", "v1", "2.0.0"]);
      await publish("p.next", ["1.0.0"]);
      const afterSemver = await store.listNodeTypes({ limit: 10, after: { node_type_id: "p.mix", version: "1.5.0" } });
      expect(afterSemver.items.map((t) => `${t.node_type_id}@${t.version}`)).toEqual(["p.mix@2.0.0", "p.next@1.0.0"]);
      const afterUnknown = await store.listNodeTypes({ limit: 10, after: { node_type_id: "p.mix", version: "nope" } });
      expect(afterUnknown.items.map((t) => `${t.node_type_id}@${t.version}`)).toEqual(["p.next@1.0.0"]);
    });

    it("keeps the order when the data is opened again, and goes on from it", async () => {
      if (!h.reopen) return;
      await publish("r.keep", ["2.0.0", "v1", "1.0.1"]);
      await store.close();
      store = await h.reopen();
      expect(await store.listVersions("r.keep")).toEqual(["1.0.1", "2.0.0", "v1"]);
      expect(await latest("r.keep")).toBe("v1");
      await publish("r.keep", ["v2"]);
      expect(await store.listVersions("r.keep")).toEqual(["1.0.1", "2.0.0", "v1", "v2"]);
      expect(await latest("r.keep")).toBe("v2");
    });
    describe("executor directory and heartbeats", () => {
      const ids = async (filter?: Parameters<NodeTypeStore["listExecutors"]>[0]) => (await store.listExecutors(filter)).map((e) => e.executor_instance_id);

      it("stores an executor's entry as given, replaces it on registering again, and lists by served node type", async () => {
        const first = executorRecord("exec-b", 0, ["svc.echo@1.0.0", "svc.other@2.0.0"]);
        first.extensions = { "x.region": "eu" };
        expect(await store.putExecutor(first)).toEqual(first);
        await store.putExecutor(executorRecord("exec-a", 0, ["svc.echo@1.1.0"]));
        expect(await store.listExecutors()).toEqual([executorRecord("exec-a", 0, ["svc.echo@1.1.0"]), first]);
        expect(await ids({ node_type_id: "svc.echo" })).toEqual(["exec-a", "exec-b"]);
        expect(await ids({ node_type_id: "svc.echo", version: "1.0.0" })).toEqual(["exec-b"]);
        expect(await ids({ node_type_id: "svc.none" })).toEqual([]);

        await store.putExecutor(executorRecord("exec-b", 1, ["svc.other@2.0.0"]));
        expect(await ids({ node_type_id: "svc.echo" })).toEqual(["exec-a"]);
        expect(await ids({ node_type_id: "svc.other", version: "2.0.0" })).toEqual(["exec-b"]);
        expect((await store.listExecutors()).find((e) => e.executor_instance_id === "exec-b")).toEqual(executorRecord("exec-b", 1, ["svc.other@2.0.0"]));
      });

      it("counts a registration as a sign of life at registered_at: seen_since keeps it from that instant on", async () => {
        await store.putExecutor(executorRecord("exec-a", 10));
        await store.putExecutor(executorRecord("exec-b", 20));
        expect(await ids({ seen_since: at(10) })).toEqual(["exec-a", "exec-b"]);
        expect(await ids({ seen_since: at(10.5) })).toEqual(["exec-b"]);
        expect(await ids({ seen_since: at(20) })).toEqual(["exec-b"]);
        expect(await ids({ seen_since: at(21) })).toEqual([]);
        expect(await ids({ node_type_id: "svc.echo", version: "1.0.0", seen_since: at(15) })).toEqual(["exec-b"]);
        expect(await ids({ node_type_id: "svc.echo", seen_since: at(5) })).toEqual(["exec-a", "exec-b"]);
      });

      it("a heartbeat keeps an executor listed without changing its entry; an unknown one answers false", async () => {
        await store.putExecutor(executorRecord("exec-a", 10));
        expect(await store.touchExecutor("exec-a", at(30))).toBe(true);
        expect(await ids({ seen_since: at(25) })).toEqual(["exec-a"]);
        expect(await ids({ node_type_id: "svc.echo", version: "1.0.0", seen_since: at(30) })).toEqual(["exec-a"]);
        expect(await ids({ seen_since: at(31) })).toEqual([]);
        // The entry is what was registered: a heartbeat is not a registration.
        expect(await store.listExecutors()).toEqual([executorRecord("exec-a", 10)]);

        expect(await store.touchExecutor("exec-unknown", at(30))).toBe(false);
        expect(await ids()).toEqual(["exec-a"]);
      });

      it("prunes executors not heard from since an instant, keeps the others, and forgets what the pruned served", async () => {
        await store.putExecutor(executorRecord("exec-old", 10, ["svc.echo@1.0.0"]));
        await store.putExecutor(executorRecord("exec-edge", 20, ["svc.echo@1.0.0"]));
        await store.putExecutor(executorRecord("exec-beating", 0, ["svc.echo@1.0.0"]));
        expect(await store.touchExecutor("exec-beating", at(40))).toBe(true);

        expect(await store.pruneExecutors(at(20))).toBe(1);
        expect(await ids()).toEqual(["exec-beating", "exec-edge"]);
        expect(await ids({ node_type_id: "svc.echo", version: "1.0.0" })).toEqual(["exec-beating", "exec-edge"]);
        // Gone from the store: its heartbeat is refused, so it registers again.
        expect(await store.touchExecutor("exec-old", at(41))).toBe(false);

        expect(await store.pruneExecutors(at(20))).toBe(0);
        expect(await store.pruneExecutors(at(40.001))).toBe(2);
        expect(await ids()).toEqual([]);
        expect(await ids({ node_type_id: "svc.echo" })).toEqual([]);

        await store.putExecutor(executorRecord("exec-old", 50, ["svc.echo@1.0.0"]));
        expect(await ids({ node_type_id: "svc.echo", seen_since: at(50) })).toEqual(["exec-old"]);
      });

      it("keeps the last sign of life when the data is opened again", async () => {
        if (!h.reopen) return;
        await store.putExecutor(executorRecord("exec-a", 10));
        await store.putExecutor(executorRecord("exec-b", 10));
        expect(await store.touchExecutor("exec-b", at(30))).toBe(true);
        await store.close();
        store = await h.reopen();
        expect(await ids({ seen_since: at(20) })).toEqual(["exec-b"]);
        expect(await store.pruneExecutors(at(20))).toBe(1);
        expect(await ids()).toEqual(["exec-b"]);
      });
    });
  });
}
