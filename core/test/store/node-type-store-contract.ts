/**
 * The NodeTypeStore contract as a vitest suite: any implementation (SQLite now, PostgreSQL next) runs it with
 * `nodeTypeStoreContract(name, open)`. Every test opens a fresh, empty store. The version order it checks is the one
 * `core/src/store/node-type-version-order.ts` defines: semver by semver, other versions by publication, each of those
 * just above the highest semver published before it.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { NodeKind, NodeTypeStore, StoredNodeType } from "../../src/store/node-type-store.js";

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
  });
}
