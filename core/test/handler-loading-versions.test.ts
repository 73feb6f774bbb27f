import { describe, it, expect } from "vitest";
import { defineAtomic } from "@nodefabric/core/sdk";
import { handlersFromDefinitions } from "../src/services/atomic-executor/handler-loader.js";

// Any version string (issue 10, invariant 7): the atomic executor loads definitions whose versions are not semver (the
// SDK version alone is checked as semver), and refuses at load a version the registry would refuse to publish.
describe("loading definitions whose versions are not semver", () => {
  it("loads v1, 2024-01 and 1.0 next to semver versions, and finds each by its exact version", () => {
    const defs = ["1.0.0", "v1", "2024-01", "1.0"].map((version) =>
      defineAtomic({ nodeType: { node_type_id: "mem.versions", version }, handler: () => ({ version }) }),
    );
    const h = handlersFromDefinitions(defs);
    expect(h.byId.get("mem.versions")!.map((d) => d.definition.nodeType.version)).toEqual(["1.0.0", "v1", "2024-01", "1.0"]);
    for (const v of ["1.0.0", "v1", "2024-01", "1.0"]) expect(h.find("mem.versions", v)?.definition.nodeType.version, v).toBe(v);
    expect(h.find("mem.versions", "V1")).toBeUndefined();
  });

  it("refuses a version the registry would refuse to publish, naming the version", () => {
    for (const version of ["1.0 beta", "a/b", "x@y"]) {
      const def = defineAtomic({ nodeType: { node_type_id: "mem.badversion", version }, handler: () => ({}) });
      expect(() => handlersFromDefinitions([def]), version).toThrow(/mem\.badversion@.* is not a valid NodeType: \/version must start with a letter or digit/);
    }
  });
});
