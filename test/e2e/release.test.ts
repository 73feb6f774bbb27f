/**
 * `npm run release` (scripts/release.mjs): its pure parts (which packages, in which order, with which versions), the
 * dry run over this repository, and real publishing of a small throwaway workspace to a local Verdaccio, including a
 * release that fails half-way and is run again.
 */
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkVersions,
  classifyView,
  parseArgs,
  publicPackages,
  publishArgs,
  publishOrder,
  readWorkspacePackages,
  workspaceDirs,
  type WorkspacePackage,
} from "../../scripts/release-lib.mjs";
import { startLocalRegistry, type LocalRegistry } from "./local-registry.mjs";

const repo = fileURLToPath(new URL("../..", import.meta.url));

/** A workspace package as the release reads it, made up for a test. */
function pkg(name: string, version: string, manifest: Record<string, unknown> = {}, dir = name.replace(/^@[^/]+\//, "")): WorkspacePackage {
  return { name, version, dir, private: manifest.private === true, manifest: { name, version, ...manifest } };
}

interface Result {
  code: number | null;
  output: string;
}

/** Runs a command to completion and collects its stdout and stderr together. */
function runCommand(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env, timeoutMs = 120_000): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${cmd} ${args.join(" ")} did not finish in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

const releaseIn = (root: string, args: string[], env?: NodeJS.ProcessEnv, timeoutMs?: number) =>
  runCommand(process.execPath, [path.join(root, "scripts/release.mjs"), ...args], root, env, timeoutMs);

describe("release-lib: the packages of this repository", () => {
  const all = readWorkspacePackages(repo);
  const pub = publicPackages(all);

  it("finds the packages from the root workspaces, sdk included", () => {
    const names = all.map((p) => p.name);
    for (const n of ["@nodefabric/schemas", "@nodefabric/sdk", "@nodefabric/core", "@nodefabric/handler-demo", "@nodefabric/handler-examples", "@nodefabric/handler-http", "@nodefabric/importer-openapi", "@nodefabric/importer-mcp", "create-fabric-handler"]) {
      expect(names).toContain(n);
    }
    expect(all.find((p) => p.name === "@nodefabric/core")!.dir).toBe("core");
    expect(all.find((p) => p.name === "@nodefabric/handler-http")!.dir).toBe("handlers/http");
    expect(all.find((p) => p.name === "@nodefabric/importer-openapi")!.dir).toBe("importers/openapi");
  });

  it("shares one version, and every internal dependency names it", () => {
    const { version, problems } = checkVersions(all);
    expect(problems).toEqual([]);
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("orders schemas before sdk before core before the handlers and the scaffolder", () => {
    const order = publishOrder(pub).map((p) => p.name);
    const at = (n: string) => order.indexOf(n);
    expect(at("@nodefabric/schemas")).toBe(0);
    expect(at("@nodefabric/schemas")).toBeLessThan(at("@nodefabric/sdk"));
    expect(at("@nodefabric/sdk")).toBeLessThan(at("@nodefabric/core"));
    for (const later of ["@nodefabric/handler-demo", "@nodefabric/handler-examples", "@nodefabric/handler-http", "create-fabric-handler"]) {
      expect(at("@nodefabric/core")).toBeLessThan(at(later));
    }
    // The importers: after what they build on (the SDK; mcp.call's package for the MCP one), before the scaffolder that bundles them.
    expect(at("@nodefabric/sdk")).toBeLessThan(at("@nodefabric/importer-openapi"));
    expect(at("@nodefabric/handler-mcp")).toBeLessThan(at("@nodefabric/importer-mcp"));
    for (const importer of ["@nodefabric/importer-openapi", "@nodefabric/importer-mcp"]) expect(at(importer)).toBeLessThan(at("create-fabric-handler"));
    expect(order).toHaveLength(pub.length);
  });
});

describe("release-lib: rules", () => {
  it("puts every package after the workspace packages it depends on, in any field, keeping workspace order otherwise", () => {
    const order = publishOrder([
      pkg("@x/handler", "1.0.0", { peerDependencies: { "@x/core": "1.0.0" } }),
      pkg("@x/tool", "1.0.0", { devDependencies: { "@x/core": "1.0.0" } }),
      pkg("@x/core", "1.0.0", { dependencies: { "@x/base": "1.0.0", lodash: "^4.0.0" } }),
      pkg("@x/base", "1.0.0"),
      pkg("@x/alone", "1.0.0"),
    ]).map((p) => p.name);
    expect(order).toEqual(["@x/base", "@x/core", "@x/handler", "@x/tool", "@x/alone"]);
  });

  it("names the cycle when packages depend on each other in a loop", () => {
    const cyclic = [
      pkg("@x/free", "1.0.0"),
      pkg("@x/a", "1.0.0", { dependencies: { "@x/b": "1.0.0" } }),
      pkg("@x/b", "1.0.0", { peerDependencies: { "@x/c": "1.0.0" } }),
      pkg("@x/c", "1.0.0", { devDependencies: { "@x/a": "1.0.0", "@x/free": "1.0.0" } }),
    ];
    expect(() => publishOrder(cyclic)).toThrow("the workspace packages depend on each other in a cycle: @x/a → @x/b → @x/c → @x/a");
  });

  it("refuses packages at different versions, naming them", () => {
    const { version, problems } = checkVersions([pkg("@x/a", "1.0.0"), pkg("@x/b", "1.1.0"), pkg("@x/c", "1.0.0")]);
    expect(version).toBeUndefined();
    expect(problems).toEqual(["the public packages must share one version, but they have 2: 1.0.0 (@x/a, @x/c); 1.1.0 (@x/b)"]);
  });

  it("refuses an internal dependency that is a range or another version, in any dependency field", () => {
    const { problems } = checkVersions([
      pkg("@x/core", "2.0.0"),
      pkg("@x/h1", "2.0.0", { peerDependencies: { "@x/core": "^2.0.0" } }),
      pkg("@x/h2", "2.0.0", { devDependencies: { "@x/core": "1.9.0" } }),
      pkg("@x/h3", "2.0.0", { dependencies: { "@x/core": "2.0.0", other: "^1.0.0" } }),
    ]);
    expect(problems).toEqual([
      '@x/h1 peerDependencies names @x/core@"^2.0.0", not the release version "2.0.0"',
      '@x/h2 devDependencies names @x/core@"1.9.0", not the release version "2.0.0"',
    ]);
  });

  it("skips private packages, but refuses a public package that needs one at install time", () => {
    const packages = [
      pkg("@x/core", "1.0.0", { dependencies: { "@x/internal": "0.0.1" } }),
      pkg("@x/tool", "1.0.0", { devDependencies: { "@x/internal": "0.0.1" } }),
      pkg("@x/internal", "0.0.1", { private: true }),
    ];
    expect(publicPackages(packages).map((p) => p.name)).toEqual(["@x/core", "@x/tool"]);
    expect(checkVersions(packages).problems).toEqual(["@x/core lists the private workspace package @x/internal in dependencies; users could not install it"]);
  });

  it("expands workspace patterns in their order, skipping folders without a package.json", () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "nf-ws-"));
    try {
      for (const d of ["lib", "plugins/zeta", "plugins/alpha", "plugins/empty", "handlers/one"]) mkdirSync(path.join(root, d), { recursive: true });
      for (const d of ["lib", "plugins/zeta", "plugins/alpha", "handlers/one"]) writeFileSync(path.join(root, d, "package.json"), "{}");
      expect(workspaceDirs(root, ["lib", "plugins/*", "missing/*", "handlers/*"])).toEqual(["lib", "plugins/alpha", "plugins/zeta", "handlers/one"]);
      expect(() => workspaceDirs(root, undefined)).toThrow('has no "workspaces" array');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("reads the command line, refusing what it does not know", () => {
    expect(parseArgs([])).toEqual({ publish: false, registry: undefined, tag: "latest", otp: undefined, skipBuild: false, skipTests: false, help: false });
    expect(parseArgs(["--publish", "--registry", "http://127.0.0.1:4873", "--tag=next", "--otp", "123456", "--skip-build", "--skip-tests"])).toEqual({
      publish: true,
      registry: "http://127.0.0.1:4873",
      tag: "next",
      otp: "123456",
      skipBuild: true,
      skipTests: true,
      help: false,
    });
    expect(() => parseArgs(["--publsh"])).toThrow("unknown option --publsh");
    expect(() => parseArgs(["--registry"])).toThrow("--registry needs a value");
    expect(() => parseArgs(["--registry", "--publish"])).toThrow("--registry needs a value");
    expect(() => parseArgs(["--registry", "registry.npmjs.org"])).toThrow("--registry registry.npmjs.org is not a URL");
    expect(() => parseArgs(["--registry", "file:///tmp/x"])).toThrow("must be an http or https URL");
    expect(() => parseArgs(["--tag", "1.2.0"])).toThrow("--tag 1.2.0 is not a dist-tag");
    expect(() => parseArgs(["--publish=yes"])).toThrow("--publish takes no value");
  });

  it("passes the dry run, registry, tag, access and one-time password to npm publish", () => {
    expect(publishArgs("core", parseArgs([]))).toEqual(["publish", "--workspace", "core", "--tag", "latest", "--access", "public", "--dry-run"]);
    expect(publishArgs("handlers/http", parseArgs(["--publish", "--registry", "https://r.example/", "--tag", "next", "--otp", "42"]))).toEqual([
      "publish", "--workspace", "handlers/http", "--tag", "next", "--access", "public", "--registry", "https://r.example/", "--otp", "42",
    ]);
  });

  it("reads npm view: the version printed, npm's E404, or a registry it could not ask", () => {
    expect(classifyView({ status: 0, stdout: "1.2.0\n", stderr: "" }, "1.2.0")).toEqual({ state: "published" });
    expect(classifyView({ status: 1, stdout: "", stderr: "npm error code E404\nnpm error 404 No match found for version 1.2.0\n" }, "1.2.0")).toEqual({ state: "absent" });
    expect(classifyView({ status: 0, stdout: "", stderr: "" }, "1.2.0")).toEqual({ state: "absent" });
    expect(
      classifyView({ status: 1, stdout: "", stderr: "npm error code ECONNREFUSED\nnpm error syscall connect\nnpm error FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9\n" }, "1.2.0"),
    ).toEqual({ state: "unknown", reason: "FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9" });
  });
});

describe("npm run release, a dry run over this repository", () => {
  it("lists every package in dependency order and dry-runs npm publish for each, uploading nothing", async () => {
    // Port 9 (discard) refuses connections: even a mistake could not reach a real registry.
    const { code, output } = await releaseIn(repo, ["--skip-tests", "--skip-build", "--registry", "http://127.0.0.1:9"]);
    expect(code, output).toBe(0);
    expect(output).toContain("DRY RUN");
    const pub = publishOrder(publicPackages(readWorkspacePackages(repo)));
    const listed = [...output.matchAll(/^\s+\d+\. (\S+)@\S+ \(/gm)].map((m) => m[1]);
    expect(listed).toEqual(pub.map((p) => p.name));
    expect(listed.slice(0, 3)).toEqual(["@nodefabric/schemas", "@nodefabric/sdk", "@nodefabric/core"]);
    for (const p of pub) {
      expect(output).toContain(`$ npm publish --workspace ${p.dir} --tag latest --access public --dry-run --registry http://127.0.0.1:9`);
      expect(output).toContain(`+ ${p.name}@${p.version}`);
    }
    const published = [...output.matchAll(/^\+ (\S+)@/gm)].map((m) => m[1]);
    expect(published).toEqual(listed);
    expect(output).toContain("(dry-run)");
    // npm rewrites a manifest it finds fault with, and can drop fields (bins) doing so.
    expect(output).not.toMatch(/auto-corrected/);
    expect(output).toMatch(/^release: dry run succeeded for /m);
    // One `npm publish --dry-run` process per package (21 of them), each a few seconds on a loaded 2-core machine: the
    // bound is for a release that hangs, not a measure of speed.
  }, 600_000);

  it("refuses a bad option with exit code 2 and the usage", async () => {
    const { code, output } = await releaseIn(repo, ["--registry", "not a url"]);
    expect(code).toBe(2);
    expect(output).toContain("release: --registry not a url is not a URL");
    expect(output).toContain("Usage: npm run release");
  });
});

describe("npm run release of a small workspace, to a real local registry", () => {
  let root: string;
  let registry: LocalRegistry;
  // Names under @nodefabric/ live only on the local registry (see e2e/local-registry.ts), never proxied.
  const A = "@nodefabric/release-test-a";
  const B = "@nodefabric/release-test-b";

  const write = (rel: string, value: unknown) => {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), typeof value === "string" ? value : JSON.stringify(value, null, 2) + "\n");
  };
  /** The throwaway workspace at `version`: b depends on a, listed first so the order has to be worked out. */
  const workspace = (version: string, bScripts: Record<string, string> = {}) => {
    write("package.json", {
      name: "release-test-root",
      private: true,
      workspaces: ["packages/*"],
      scripts: { build: "node -e \"require('fs').writeFileSync('built.txt', 'yes')\"", test: 'node -e "process.exit(0)"' },
    });
    write("packages/b/package.json", { name: B, version, dependencies: { [A]: version }, scripts: bScripts, files: ["index.js"] });
    write("packages/a/package.json", { name: A, version, files: ["index.js"] });
    write("packages/internal/package.json", { name: "release-test-internal", version: "0.0.0", private: true });
    for (const d of ["a", "b"]) write(`packages/${d}/index.js`, "export {};\n");
  };
  const view = async (spec: string) => (await runCommand("npm", ["view", spec, "version"], root, registry.env)).output.trim();

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), "nf-release-"));
    cpSync(path.join(repo, "scripts/release.mjs"), path.join(root, "scripts/release.mjs"));
    cpSync(path.join(repo, "scripts/release-lib.mjs"), path.join(root, "scripts/release-lib.mjs"));
    registry = await startLocalRegistry(path.join(root, ".registry"));
  }, 60_000);

  afterAll(async () => {
    await registry?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("builds, tests and publishes in dependency order; run again, it skips what is published", async () => {
    workspace("1.0.0");
    const first = await releaseIn(root, ["--publish", "--registry", registry.url], registry.env);
    expect(first.code, first.output).toBe(0);
    expect(first.output).toContain("skip release-test-internal (packages/internal): private");
    expect(first.output).toContain("$ npm run build");
    expect(first.output).toContain("$ npm test");
    expect(first.output.indexOf(`+ ${A}@1.0.0`)).toBeGreaterThan(-1);
    expect(first.output.indexOf(`+ ${A}@1.0.0`)).toBeLessThan(first.output.indexOf(`+ ${B}@1.0.0`));
    expect(first.output).toContain(`release: published ${A}@1.0.0, ${B}@1.0.0`);
    expect(await view(`${A}@1.0.0`)).toBe("1.0.0");
    expect(await view(`${B}@1.0.0`)).toBe("1.0.0");

    const again = await releaseIn(root, ["--publish", "--skip-build", "--skip-tests", "--registry", registry.url], registry.env);
    expect(again.code, again.output).toBe(0);
    expect(again.output).toContain(`skip ${A}@1.0.0: already on the registry`);
    expect(again.output).toContain(`skip ${B}@1.0.0: already on the registry`);
    expect(again.output).not.toContain("$ npm publish");
    expect(again.output).toContain(`release: published nothing; already on the registry: ${A}@1.0.0, ${B}@1.0.0`);
  }, 180_000);

  it("stops at a failed publish, naming it and what is left; the next run publishes only the rest", async () => {
    workspace("1.1.0", { prepublishOnly: 'node -e "process.exit(7)"' });
    const failed = await releaseIn(root, ["--publish", "--skip-build", "--skip-tests", "--registry", registry.url, "--tag", "next"], registry.env);
    expect(failed.code, failed.output).toBe(1);
    expect(failed.output).toContain(`release: publishing ${B}@1.1.0 (packages/b) failed with exit code 7; published: ${A}@1.1.0; not published: ${B}@1.1.0.`);
    expect(await view(`${A}@1.1.0`)).toBe("1.1.0");
    expect((await runCommand("npm", ["view", `${B}@1.1.0`, "version"], root, registry.env)).output).toContain("E404");

    workspace("1.1.0");
    const resumed = await releaseIn(root, ["--publish", "--skip-build", "--skip-tests", "--registry", registry.url, "--tag", "next"], registry.env);
    expect(resumed.code, resumed.output).toBe(0);
    expect(resumed.output).toContain(`skip ${A}@1.1.0: already on the registry`);
    expect(resumed.output).toContain(`release: published ${B}@1.1.0; already on the registry: ${A}@1.1.0`);
    expect(await view(`${B}@1.1.0`)).toBe("1.1.0");
    // --tag next: latest stays on 1.0.0.
    expect(await view(B)).toBe("1.0.0");
    expect(await view(`${B}@next`)).toBe("1.1.0");
  }, 180_000);

  it("a dry run against the registry skips published versions and uploads nothing", async () => {
    workspace("1.2.0");
    write("packages/a/package.json", { name: A, version: "1.1.0", files: ["index.js"] });
    const mixed = await releaseIn(root, ["--skip-build", "--skip-tests", "--registry", registry.url], registry.env);
    expect(mixed.code, mixed.output).toBe(2);
    expect(mixed.output).toContain(`the public packages must share one version, but they have 2: 1.1.0 (${A}); 1.2.0 (${B})`);
    expect(mixed.output).not.toContain("$ npm publish");

    workspace("1.1.0");
    const dry = await releaseIn(root, ["--skip-build", "--skip-tests", "--registry", registry.url], registry.env);
    expect(dry.code, dry.output).toBe(0);
    expect(dry.output).toContain(`skip ${A}@1.1.0: already on the registry`);

    workspace("1.2.0");
    const fresh = await releaseIn(root, ["--skip-build", "--skip-tests", "--registry", registry.url], registry.env);
    expect(fresh.code, fresh.output).toBe(0);
    expect(fresh.output).toContain(`release: dry run succeeded for ${A}@1.2.0, ${B}@1.2.0`);
    expect((await runCommand("npm", ["view", `${A}@1.2.0`, "version"], root, registry.env)).output).toContain("E404");
  }, 180_000);

  it("stops before publishing when the build fails, or when --publish cannot ask the registry", async () => {
    workspace("1.3.0");
    write("package.json", { name: "release-test-root", private: true, workspaces: ["packages/*"], scripts: { build: 'node -e "process.exit(3)"' } });
    const broken = await releaseIn(root, ["--publish", "--skip-tests", "--registry", registry.url], registry.env);
    expect(broken.code, broken.output).toBe(1);
    expect(broken.output).toContain("release: npm run build failed; nothing was published");

    workspace("1.3.0");
    write("packages/b/package.json", { name: B, version: "1.3.0", dependencies: { [A]: "1.3.0", "release-test-c": "1.3.0" } });
    write("packages/c/package.json", { name: "release-test-c", version: "1.3.0", peerDependencies: { [B]: "1.3.0" } });
    const cyclic = await releaseIn(root, ["--skip-build", "--skip-tests", "--registry", registry.url], registry.env);
    expect(cyclic.code, cyclic.output).toBe(2);
    expect(cyclic.output).toContain(`cycle: ${B} → release-test-c → ${B}`);
    rmSync(path.join(root, "packages/c"), { recursive: true });

    workspace("1.3.0");
    const unreachable = await releaseIn(root, ["--publish", "--skip-build", "--skip-tests", "--registry", "http://127.0.0.1:9"], { ...registry.env, npm_config_fetch_retries: "0" });
    expect(unreachable.code, unreachable.output).toBe(1);
    expect(unreachable.output).toContain(`release: cannot tell whether ${A}@1.3.0 is already on the registry (`);
    expect(unreachable.output).toContain("ECONNREFUSED");
    expect(unreachable.output).not.toContain("$ npm publish");
    expect((await runCommand("npm", ["view", `${A}@1.3.0`, "version"], root, registry.env)).output).toContain("E404");
  }, 180_000);
});
