import { describe, expect, it } from "vitest";
import type { Executor, NodeType } from "../web/src/api";
import { servedBy } from "../web/src/serving";

// The node types pages say whether an executor serves each node type, from the registry's executor directory, the
// way `fabric node-types ls` reads it.

const executor = (id: string, kind: "atomic" | "composite", refs: Array<[string, string]>): Executor => ({
  executor_instance_id: id,
  endpoint: `http://127.0.0.1/${id}`,
  kind,
  node_types: refs.map(([node_type_id, version]) => ({ node_type_id, version })),
  registered_at: "2026-11-25T21:00:00Z",
});

const nt = (node_type_id: string, version: string, more: Partial<NodeType> = {}): NodeType => ({ node_type_id, version, kind: "atomic", ...more });

describe("whether an executor serves a node type", () => {
  const served = servedBy([
    executor("a", "atomic", [
      ["demo.echo", "1.0.0"],
      ["http.request", "1.0.0"],
    ]),
    executor("c", "composite", [["examples.fanout", "1.0.0"]]),
  ]);
  const ids = (s: ReturnType<typeof served>) => s?.executors.map((e) => e.executor_instance_id);

  it("by the exact version an executor lists", () => {
    expect(ids(served(nt("demo.echo", "1.0.0")))).toEqual(["a"]);
    expect(ids(served(nt("demo.echo", "2.0.0")))).toEqual([]);
  });

  it("by whoever serves the definition that implements it", () => {
    expect(
      ids(served(nt("weather.get", "1.0.0", { extensions: { "nodefabric.implementation": { node_type_id: "http.request", version: "1.0.0" } } }))),
    ).toEqual(["a"]);
  });

  it("a declarative composite by any composite executor", () => {
    const plan = { steps: [], outputs: {} };
    expect(ids(served(nt("trip.brief", "1.0.0", { kind: "composite", extensions: { "nodefabric.plan": plan } })))).toEqual(["c"]);
    expect(ids(served(nt("code.composite", "1.0.0", { kind: "composite" })))).toEqual([]);
  });

  it("unknown when the directory could not be read", () => {
    expect(servedBy(undefined)(nt("demo.echo", "1.0.0"))).toBeUndefined();
  });
});
