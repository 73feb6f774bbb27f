import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

// docs/plugins.md: a plugin package named with --plugin adds a gateway route, a `fabric` subcommand and the run store
// of memtest:// URLs; the built CLI runs as a child process, as a user runs it.
const repo = fileURLToPath(new URL("../..", import.meta.url));
const fixtures = path.join(repo, "core/test/fixtures/plugin-packages");
const memtest = path.join(fixtures, "memtest");
const tmp = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix));

describe("fabric dev --plugin, with the plugin's run store", () => {
  let fabric: FabricProcess;

  beforeAll(async () => {
    fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", tmp("nf-plugin-dev-"), "--plugin", memtest, "--store", "memtest://e2e"], { cwd: repo });
  });
  afterAll(async () => {
    await fabric?.stop();
  });

  it("lists the plugin and the store in its banner", async () => {
    await eventually(async () => (/^store: memtest:\/\/e2e$/m.test(fabric.output()) ? true : undefined), 5_000, "the banner");
    // `fabric dev` adds the console, the MCP server and the A2A server, installed in this repository, to the plugins it
    // was given.
    expect(fabric.output()).toMatch(/^plugins: memtest@1\.2\.3, @nodefabric\/plugin-console@0\.1\.0, @nodefabric\/plugin-mcp@0\.1\.0, @nodefabric\/plugin-a2a@0\.1\.0$/m);
  });

  it("serves the plugin's gateway route, and a run completes through the plugin's run store", async () => {
    const gateway = fabric.urls["run-gateway"]!;
    const before = await call("GET", `${gateway}/memtest/seen`);
    expect(before.status).toBe(200);
    expect(before.body).toEqual({ store: "memtest", opened: 1, given: { url: "memtest://e2e", service: "run-coordinator" }, runs: [] });
    await eventually(async () => {
      const r = await call("GET", `${fabric.urls["node-registry"]}/v1/executors?node_type_id=demo.echo`);
      return r.status === 200 && r.body.length > 0 ? true : undefined;
    });
    const run = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input: { a: 1 } }, { prefer: "wait=10" });
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({ state: "completed", extensions: { "nodefabric.outputs": { echo: { a: 1 } } } });
    const after = await call("GET", `${gateway}/memtest/seen`);
    expect(after.body.runs).toEqual([run.body.run_id]);
    // The SQLite run store of the data dir was never opened.
    expect(fs.existsSync(path.join(fabric.output().match(/^data: (\S+)/m)![1]!, "run-coordinator.db"))).toBe(false);
  });
});

describe("fabric start, with plugins from FABRIC_PLUGINS and the store from FABRIC_STORE_URL", () => {
  it("adds the plugin's route to the gateway started on its own, and the coordinator on its own opens the plugin's store", async () => {
    const env = { FABRIC_PLUGINS: memtest, FABRIC_STORE_URL: "memtest://split" };
    const dataDir = tmp("nf-plugin-start-");
    const gateway = await startFabricProcess(["start", "run-gateway", "--auth", "disabled", "--port-base", "0", "--data-dir", dataDir], { cwd: repo, env, expect: 1 });
    const coordinator = await startFabricProcess(["start", "run-coordinator", "--auth", "disabled", "--port-base", "0", "--data-dir", dataDir], { cwd: repo, env, expect: 1 });
    try {
      // The gateway has no run store: the plugin's route answers, and no store was opened in its process.
      const seen = await call("GET", `${gateway.urls["run-gateway"]}/memtest/seen`);
      expect(seen.body).toEqual({ store: "memtest", opened: 0, runs: [] });
      expect(coordinator.output()).toMatch(/^store: memtest:\/\/split$/m);
      expect(fs.existsSync(path.join(dataDir, "run-coordinator.db"))).toBe(false);
      expect((await call("GET", `${coordinator.urls["run-coordinator"]}/v1/health`)).body.status).toBe("ok");
    } finally {
      await gateway.stop();
      await coordinator.stop();
    }
  });
});

describe("fabric <plugin subcommand>", () => {
  it("runs a command a plugin named with --plugin adds", async () => {
    const r = await runFabric(["memtest-hello", "you", "--plugin", memtest], { cwd: repo });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("hello you from memtest\n");
    expect(r.code).toBe(0);
  });

  it("refuses a plugin command named like one of fabric's own, with exit 2", async () => {
    const r = await runFabric(["memtest-hello", "--plugin", memtest, "--plugin", path.join(fixtures, "command-clash")], { cwd: repo });
    expect(r.stderr).toBe("fabric: plugin command-clash adds the command `dev`, which fabric already has\n");
    expect(r.code).toBe(2);
  });

  it("finds a plugin by discovery, skipping a broken one with a warning", async () => {
    const project = tmp("nf-plugin-project-");
    for (const [name, dir] of [["@fixture/plugin-memtest", "memtest"], ["@fixture/plugin-throws", "throws-on-import"]]) {
      fs.mkdirSync(path.dirname(path.join(project, "node_modules", name)), { recursive: true });
      fs.symlinkSync(path.join(fixtures, dir!), path.join(project, "node_modules", name), "dir");
    }
    const r = await runFabric(["memtest-hello"], { cwd: project });
    expect(r.stdout).toBe("hello world from memtest\n");
    expect(r.stderr).toMatch(/^nodefabric: plugin package @fixture\/plugin-throws \(.*\) skipped: importing .*index\.js failed: the plugin fixture refuses to load$/m);
    expect(r.code).toBe(0);
  });
});

describe("a plugin that cannot be used stops `fabric dev` with exit 2, naming it and the reason", () => {
  const cases: Array<[string, string[], RegExp]> = [
    ["a package that cannot be found", ["--plugin", "@fixture/nowhere"], /^fabric: plugin @fixture\/nowhere cannot be found from .*; install it there/m],
    ["a path that does not exist", ["--plugin", "./no/such/plugin"], /^fabric: plugin \.\/no\/such\/plugin: the path does not exist/m],
    ["a module that fails to import", ["--plugin", path.join(fixtures, "throws-on-import")], /^fabric: plugin .*throws-on-import: importing .* failed: the plugin fixture refuses to load$/m],
    ["no definePlugin default export", ["--plugin", path.join(fixtures, "not-a-plugin")], /^fabric: plugin .*not-a-plugin: .* does not default-export a plugin made with definePlugin/m],
    ["a bad shape", ["--plugin", path.join(fixtures, "bad-shape")], /^fabric: plugin .*bad-shape: its definition is not valid: `services\[0\]\.service` is "no-such-service"/m],
    ["two plugins on one store scheme", ["--plugin", memtest, "--plugin", path.join(fixtures, "memtest-clash")], /^fabric: plugins memtest \(@fixture\/plugin-memtest\) and memtest-clash \(@fixture\/plugin-memtest-clash\) both serve the store scheme memtest:\/\//m],
    ["a store URL no plugin serves", ["--plugin", memtest, "--store", "postgres://db/x"], /^fabric: no plugin serves the store scheme postgres:\/\/ of postgres:\/\/db\/x; schemes available: memtest:\/\/ \(memtest \(@fixture\/plugin-memtest\)\)$/m],
  ];
  for (const [what, args, message] of cases) {
    it(what, async () => {
      const r = await runFabric(["dev", "--port-base", "0", "--data-dir", tmp("nf-plugin-bad-"), ...args], { cwd: repo, env: { FABRIC_LOG_LEVEL: "warn" } });
      expect(r.stderr).toMatch(message);
      expect(r.stdout).not.toMatch(/run-gateway\s+http/);
      expect(r.code).toBe(2);
    });
  }
});
