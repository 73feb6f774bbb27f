import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ScaffoldError } from "../src/errors.js";
import { DEFAULT_SDK_SPEC, peerSpecOf } from "../src/package-manifest.js";
import { assertUsableTargetDirectory, renderPackage, TEMPLATE_NAMES, writePackage, type TemplateName } from "../src/scaffold.js";
import { linkGeneratedPackage } from "./generated-package-runner.js";

const sdkPackage = JSON.parse(readFileSync(new URL("../../../sdk/package.json", import.meta.url), "utf8")) as { version: string };

function filesOf(template: TemplateName, packageName = "@acme/fabric-weather", extra: { sdkSpec?: string; schemasSpec?: string } = {}) {
  const rendered = renderPackage({ packageName, template, ...extra });
  return { rendered, byPath: new Map(rendered.files.map((f) => [f.path, f.content])) };
}

function manifestOf(byPath: Map<string, string>): Record<string, any> {
  return JSON.parse(byPath.get("package.json")!);
}

const COMMON_FILES = ["package.json", "README.md", ".gitignore", "tsconfig.json", "tsup.config.ts", "src/index.ts", "test/handler.test.ts"];

describe("the file set of each template", () => {
  it("atomic: one handler module, the package entry, and its test", () => {
    const { byPath, rendered } = filesOf("atomic");
    expect([...byPath.keys()].sort()).toEqual([...COMMON_FILES, "src/current-weather.ts"].sort());
    expect(rendered.nodeTypeIds).toEqual(["weather.current-weather"]);
    expect(byPath.get("src/current-weather.ts")).toContain('node_type_id: "weather.current-weather"');
    expect(byPath.get("src/current-weather.ts")).toContain('BASE_URL_SETTING = "WEATHER_BASE_URL"');
    expect(byPath.get("src/index.ts")).toContain("export default [currentWeather]");
    expect(byPath.get("test/handler.test.ts")).toContain('from "@nodefabric/sdk/testing"');
    expect(byPath.get("test/handler.test.ts")).toContain('import nock from "nock"');
  });

  it("composite: the composite, the atomic node type it calls, and their tests", () => {
    const { byPath, rendered } = filesOf("composite");
    expect([...byPath.keys()].sort()).toEqual([...COMMON_FILES, "src/current-weather.ts", "src/warmest-city.ts"].sort());
    expect(rendered.nodeTypeIds).toEqual(["weather.warmest-city", "weather.current-weather"]);
    expect(byPath.get("src/warmest-city.ts")).toContain("defineComposite");
    expect(byPath.get("src/warmest-city.ts")).toContain("ctx.call(CURRENT_WEATHER");
  });

  it("http: one operation as a NodeType file, the set definition, and the replayed exchange", () => {
    const { byPath, rendered } = filesOf("http");
    expect([...byPath.keys()].sort()).toEqual([...COMMON_FILES, "node-types/index.json", "node-types/get-item.json", "test/exchanges.json"].sort());
    expect(rendered.nodeTypeIds).toEqual(["weather.getItem"]);
    expect(byPath.get("src/index.ts")).toContain('DEFAULT_BASE_URL = "https://api.example.com/v1"');
    expect(JSON.parse(byPath.get("node-types/get-item.json")!).extensions["nodefabric.openapi"]).toMatchObject({ method: "GET", path: "/items/{itemId}" });
    expect(manifestOf(byPath).files).toEqual(["dist", "node-types"]);
  });

  it("leaves no placeholder unfilled, and every README starts with a runnable example", () => {
    for (const template of TEMPLATE_NAMES) {
      const { byPath } = filesOf(template);
      for (const [file, content] of byPath) expect(content, `${template}: ${file}`).not.toMatch(/\{\{\w+\}\}/);
      const readme = byPath.get("README.md")!.split("\n");
      expect(readme[0]).toBe("# @acme/fabric-weather");
      expect(readme.slice(1).find((line) => line.trim() !== "")).toBe("```sh");
      expect(readme).toContain("npm install && npm test && npm run build");
      expect(readme).toContain("npx fabric dev --discover .");
    }
  });
});

describe("the generated package.json", () => {
  it("is discoverable, publishes dist (and an http package's node-types), and depends on @nodefabric/sdk (not core) as peer and dev dependency", () => {
    for (const template of TEMPLATE_NAMES) {
      const manifest = manifestOf(filesOf(template).byPath);
      expect(manifest).toMatchObject({
        name: "@acme/fabric-weather",
        version: "0.1.0",
        type: "module",
        keywords: ["nodefabric-handler"],
        nodefabric: { handlers: ["./dist/index.js"] },
        files: template === "http" ? ["dist", "node-types"] : ["dist"],
        main: "./dist/index.js",
        types: "./dist/index.d.ts",
        exports: { ".": { types: "./dist/index.d.ts", import: "./dist/index.js" } },
        scripts: { build: "tsup", test: "vitest run" },
        engines: { node: ">=20" },
        peerDependencies: { "@nodefabric/sdk": DEFAULT_SDK_SPEC },
        devDependencies: {
          "@nodefabric/sdk": DEFAULT_SDK_SPEC,
          tsup: "^8.5.0",
          typescript: "~5.9.3",
          vitest: "^4.0.0",
          nock: "^14.0.0",
        },
      });
      expect(manifest.overrides).toBeUndefined();
      // Nothing that builds native code or brings the fabric: the SDK is plain JavaScript.
      expect(Object.keys({ ...manifest.dependencies, ...manifest.devDependencies, ...manifest.peerDependencies })).not.toContain("@nodefabric/core");
      expect(manifest.allowScripts).toEqual({ esbuild: true });
      expect(typeof manifest.description).toBe("string");
    }
  });

  it("defaults the SDK range to the release of @nodefabric/sdk in this workspace", () => {
    expect(DEFAULT_SDK_SPEC).toBe(`^${sdkPackage.version}`);
  });

  it("writes --sdk to devDependencies, and to peerDependencies unless it points at this machine", () => {
    const local = manifestOf(filesOf("atomic", "weather", { sdkSpec: "file:/tmp/packs/nodefabric-sdk-0.1.0.tgz" }).byPath);
    expect(local.devDependencies["@nodefabric/sdk"]).toBe("file:/tmp/packs/nodefabric-sdk-0.1.0.tgz");
    expect(local.peerDependencies["@nodefabric/sdk"]).toBe(DEFAULT_SDK_SPEC);

    const ranged = manifestOf(filesOf("atomic", "weather", { sdkSpec: ">=0.1.2 <0.2.0" }).byPath);
    expect(ranged.devDependencies["@nodefabric/sdk"]).toBe(">=0.1.2 <0.2.0");
    expect(ranged.peerDependencies["@nodefabric/sdk"]).toBe(">=0.1.2 <0.2.0");

    expect(peerSpecOf("latest")).toBe("latest");
    expect(peerSpecOf("../sdk")).toBe(DEFAULT_SDK_SPEC);
    expect(peerSpecOf("github:acme/sdk")).toBe(DEFAULT_SDK_SPEC);
  });

  it("writes --schemas as an override of @nodefabric/schemas", () => {
    const manifest = manifestOf(filesOf("http", "weather", { schemasSpec: "file:/tmp/packs/nodefabric-schemas-0.1.0.tgz" }).byPath);
    expect(manifest.overrides).toEqual({ "@nodefabric/schemas": "file:/tmp/packs/nodefabric-schemas-0.1.0.tgz" });
  });
});

describe("the target directory", () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "cfh-target-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("may be missing or empty", () => {
    expect(() => assertUsableTargetDirectory(path.join(root, "missing"))).not.toThrow();
    mkdirSync(path.join(root, "empty"));
    const files = filesOf("atomic").rendered.files;
    writePackage(path.join(root, "empty"), files);
    expect(readFileSync(path.join(root, "empty", "src", "index.ts"), "utf8")).toBe(files.find((f) => f.path === "src/index.ts")!.content);
    expect(readFileSync(path.join(root, "empty", ".gitignore"), "utf8")).toContain("node_modules/");
  });

  it("is refused when it holds anything, or is a file, and nothing is written", () => {
    mkdirSync(path.join(root, "taken"));
    writeFileSync(path.join(root, "taken", "notes.txt"), "mine");
    expect(() => writePackage(path.join(root, "taken"), filesOf("atomic").rendered.files)).toThrow(ScaffoldError);
    expect(() => assertUsableTargetDirectory(path.join(root, "taken"))).toThrow(/exists and is not empty/);
    writeFileSync(path.join(root, "plain-file"), "");
    expect(() => assertUsableTargetDirectory(path.join(root, "plain-file"))).toThrow(/is not a directory/);
    expect(readFileSync(path.join(root, "taken", "notes.txt"), "utf8")).toBe("mine");
  });
});

// The generated tests themselves, run as `npm test` would run them, against this workspace's @nodefabric/sdk build.
describe.each(TEMPLATE_NAMES)("a package generated from the %s template", (template) => {
  it("passes its own tests and typecheck as generated", { timeout: 120_000 }, async () => {
    const generated = linkGeneratedPackage(filesOf(template, "@acme/fabric-weather").rendered.files);
    try {
      const tests = await generated.test();
      expect(tests.code, tests.output).toBe(0);
      expect(tests.output).toMatch(/Tests\s+\d+ passed/);
      const types = await generated.typecheck();
      expect(types.code, types.output).toBe(0);
    } finally {
      generated.remove();
    }
  });
});
