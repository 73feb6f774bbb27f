import { describe, expect, it } from "vitest";
import {
  isSemver,
  latestOf,
  NODE_TYPE_VERSION_PATTERN,
  orderVersions,
  semverSortKey,
  versionProblem,
} from "../src/store/node-type-version-order.js";

describe("node type versions: which strings are versions", () => {
  it("accepts any non-empty string safe as an id: semver, v-prefixed, dates, words, two-part numbers", () => {
    for (const v of ["1.0.0", "2.0.0-rc.1+build.7", "v1", "v1.0.0", "2024-01", "2024-01-31", "latest-beta", "1.0", "01.0.0", "R2", "rev:7", "a".repeat(64)]) {
      expect(versionProblem(v), v).toBeUndefined();
      expect(new RegExp(NODE_TYPE_VERSION_PATTERN).test(v), v).toBe(true);
    }
  });

  it("refuses empty, over-long, spaced, path-like, @-carrying and non-ASCII strings", () => {
    for (const v of ["", "a".repeat(65), " 1.0.0", "1.0.0 ", "v 1", "a/b", "..", ".1", "-1", "x@y", "1?x", "é", "1\n", "1#2", "a%20b"]) {
      expect(versionProblem(v), JSON.stringify(v)).toBeTypeOf("string");
    }
  });

  it("tells strict semver from the rest", () => {
    expect(isSemver("1.2.3")).toBe(true);
    expect(isSemver("1.2.3-rc.1+b.5")).toBe(true);
    for (const v of ["v1.2.3", "1.2", "01.2.3", "1.2.3 ", "=1.2.3", "latest", "2024-01"]) expect(isSemver(v), v).toBe(false);
  });

  it("keeps semver precedence in the sort key (prereleases below releases, numbers by value, build last)", () => {
    const sorted = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.0+b", "1.2.0", "1.10.0"];
    const keys = sorted.map(semverSortKey);
    expect([...keys].sort()).toEqual(keys);
    expect(new Set(keys).size).toBe(keys.length);
    // Build metadata never outranks a longer prerelease.
    expect(semverSortKey("1.0.0-a+zzz") < semverSortKey("1.0.0-a.b")).toBe(true);
  });
});

describe("node type versions: the order, and which one is the latest", () => {
  it("orders semver versions by semver whatever order they were published in", () => {
    expect(orderVersions(["1.10.0", "1.9.0", "1.10.0-rc.1", "1.9.0-beta", "2.0.0", "0.1.0"])).toEqual(["0.1.0", "1.9.0-beta", "1.9.0", "1.10.0-rc.1", "1.10.0", "2.0.0"]);
  });

  it("orders other versions by publication", () => {
    expect(orderVersions(["v2", "v10", "v1"])).toEqual(["v2", "v10", "v1"]);
    expect(orderVersions(["2024-03", "2024-01", "latest-beta", "1.0"])).toEqual(["2024-03", "2024-01", "latest-beta", "1.0"]);
  });

  it("ranks a non-semver version just above the highest semver published before it", () => {
    // 2.0.0, then v1, then a 1.0.1 backport: v1 stays the latest, the backport slots in below 2.0.0.
    expect(orderVersions(["2.0.0", "v1", "1.0.1"])).toEqual(["1.0.1", "2.0.0", "v1"]);
    // A higher semver published later outranks it again.
    expect(orderVersions(["2.0.0", "v1", "1.0.1", "3.0.0"])).toEqual(["1.0.1", "2.0.0", "v1", "3.0.0"]);
    // Non-semver versions published before any semver rank below all of them.
    expect(orderVersions(["2024-01", "2024-02", "1.0.0", "0.5.0"])).toEqual(["2024-01", "2024-02", "0.5.0", "1.0.0"]);
    // Several non-semver versions anchored at the same semver keep their publication order.
    expect(orderVersions(["1.0.0", "b", "a", "0.9.0", "c"])).toEqual(["0.9.0", "1.0.0", "b", "a", "c"]);
    // A prerelease is a semver like any other: it does not outrank the release the non-semver is anchored to.
    expect(orderVersions(["1.0.0", "v1", "1.0.0-rc.1", "1.0.0+b"])).toEqual(["1.0.0-rc.1", "1.0.0", "v1", "1.0.0+b"]);
  });

  it("never reorders versions already published when another is published", () => {
    const published = ["2024-01", "1.0.0", "v2", "0.9.0", "2.0.0-rc.1", "x", "1.5.0", "2.0.0", "y", "1.0.0+b"];
    let before: string[] = [];
    for (let i = 1; i <= published.length; i++) {
      const now = orderVersions(published.slice(0, i));
      expect(now.filter((v) => before.includes(v)), published[i - 1]).toEqual(before);
      before = now;
    }
  });

  it("makes the newest publication the latest, unless it is a semver below a semver already published", () => {
    const pick = (versions: string[]) => latestOf(versions, (v) => v);
    expect(pick([])).toBeUndefined();
    expect(pick(["1.0.0", "2.0.0", "1.5.0"])).toBe("2.0.0");
    expect(pick(["v1", "v2"])).toBe("v2");
    expect(pick(["1.0.0", "v1"])).toBe("v1");
    expect(pick(["v1", "1.0.0"])).toBe("1.0.0");
    expect(pick(["2.0.0", "v1", "1.0.1"])).toBe("v1");
    expect(pick(["2.0.0", "v1", "1.0.1", "2.0.1"])).toBe("2.0.1");
  });

  it("picks the same latest from a list in publication order and from the same versions in version order", () => {
    const published = ["2024-01", "1.0.0", "v2", "0.9.0", "x", "1.5.0", "y"];
    const ordered = orderVersions(published);
    expect(latestOf(published, (v) => v)).toBe("y");
    expect(latestOf(ordered, (v) => v)).toBe("y");
    expect(ordered.at(-1)).toBe("y");
  });
});
