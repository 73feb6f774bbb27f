import { describe, expect, it } from "vitest";
import { UsageError } from "../src/errors.js";
import { assertValidPackageName, baseUrlSettingOf, folderNameOf, nodeTypePrefixOf, packageNameFromTitle, packageNameProblems } from "../src/package-name.js";

describe("package names", () => {
  it("accepts plain and scoped names that npm accepts for new packages", () => {
    for (const name of ["weather", "fabric-weather", "@acme/fabric-weather", "weather.v2", "a_b"]) {
      expect(packageNameProblems(name), name).toEqual([]);
      expect(() => assertValidPackageName(name)).not.toThrow();
    }
  });

  it("refuses names npm refuses, with npm's reasons, as a usage error", () => {
    const cases: Array<[string, RegExp]> = [
      ["Weather", /capital letters/],
      ["my handler", /URL-friendly/],
      [".hidden", /period/],
      ["", /length/],
      ["node_modules", /node_modules/],
      ["@acme/", /URL-friendly|scope/],
    ];
    for (const [name, reason] of cases) {
      let thrown: unknown;
      try {
        assertValidPackageName(name);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, name).toBeInstanceOf(UsageError);
      expect((thrown as UsageError).exitCode).toBe(2);
      expect((thrown as Error).message).toContain(JSON.stringify(name));
      expect((thrown as Error).message).toMatch(reason);
    }
  });

  it("puts a scoped package in a folder named without its scope", () => {
    expect(folderNameOf("@acme/fabric-weather")).toBe("fabric-weather");
    expect(folderNameOf("weather")).toBe("weather");
  });

  it("prefixes node type ids with the name, without the scope, a fabric- prefix or a -handler suffix", () => {
    expect(nodeTypePrefixOf("@acme/fabric-weather")).toBe("weather");
    expect(nodeTypePrefixOf("nodefabric-weather")).toBe("weather");
    expect(nodeTypePrefixOf("weather-handler")).toBe("weather");
    expect(nodeTypePrefixOf("fabric-weather-handlers")).toBe("weather");
    expect(nodeTypePrefixOf("petstore")).toBe("petstore");
    // Nothing would be left: the name stays.
    expect(nodeTypePrefixOf("fabric-handler")).toBe("handler");
    expect(nodeTypePrefixOf("create-fabric-handler")).toBe("create-fabric");
    // The prefix is the part of an id before its first dot, so a dot becomes a dash; it is cut at 64 characters.
    expect(nodeTypePrefixOf("my.api_v2")).toBe("my-api_v2");
    expect(nodeTypePrefixOf("api-specification-for-the-decentraland-catalyst-server-beta-and-more-words")).toBe("api-specification-for-the-decentraland-catalyst-server-beta-and");
  });

  it("names the base URL setting after the prefix, as a valid environment variable", () => {
    expect(baseUrlSettingOf("weather")).toBe("WEATHER_BASE_URL");
    expect(baseUrlSettingOf("pet-store.v2")).toBe("PET_STORE_V2_BASE_URL");
    expect(baseUrlSettingOf("3d-print")).toBe("_3D_PRINT_BASE_URL");
  });

  it("makes a package name from an API title when one fits", () => {
    expect(packageNameFromTitle("Petstore")).toBe("petstore");
    expect(packageNameFromTitle("Acme Billing API (v2)")).toBe("acme-billing-api-v2");
    expect(packageNameFromTitle("???")).toBeUndefined();
  });
});
