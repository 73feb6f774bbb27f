import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdirSync, mkdtempSync, symlinkSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

const fixtures = fileURLToPath(new URL("../../core/test/fixtures/handler-packages/", import.meta.url));

/** A folder whose node_modules holds one good handler package and two broken ones, as a user's install might. */
function projectWithBrokenHandlers(): string {
  const root = mkdtempSync(path.join(os.tmpdir(), "nf-e2e-discovery-"));
  const packages: Record<string, string> = { "@fixture/good-handlers": "good", "@fixture/throws-on-import": "throws-on-import", "@fixture/bad-schema": "bad-schema" };
  for (const [name, fixture] of Object.entries(packages)) {
    const dest = path.join(root, "node_modules", name);
    mkdirSync(path.dirname(dest), { recursive: true });
    symlinkSync(path.join(fixtures, fixture), dest, "dir");
  }
  return root;
}

/** A port that refuses connections: an executor that went away without unregistering. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

describe("fabric node-types ls reports what no executor serves and what executors could not load", () => {
  let fabric: FabricProcess;
  let project: string;
  let keyFile: string;
  let readToken: string;
  let adminToken: string;
  let deadEndpoint: string;
  let hungEndpoint: string;
  const hungSockets = new Set<net.Socket>();
  // Accepts connections and never answers: an executor stuck in a loop.
  const hung = net.createServer((socket) => {
    hungSockets.add(socket);
    socket.on("close", () => hungSockets.delete(socket));
  });
  const url = (name: string) => fabric.urls[name];

  async function mint(scope: string, ...flags: string[]): Promise<string> {
    const r = await runFabric(["token", "mint", "--aud", "node-registry", "--scope", scope, ...flags, "--key", keyFile], { cwd: project });
    expect(r.stderr).toBe("");
    return r.stdout.trim();
  }

  beforeAll(async () => {
    project = projectWithBrokenHandlers();
    const dataDir = path.join(project, ".fabric");
    keyFile = path.join(dataDir, "keys", "signing-key.json");
    fabric = await startFabricProcess(["dev", "--auth", "--port-base", "0", "--data-dir", dataDir, "--discover", project], { cwd: project });
    readToken = await mint("node-types:read");
    // Entering executors in the directory takes executors:register, a scope for service identities.
    adminToken = await mint("node-types:read node-types:write executors:register", "--allow-service-scopes");
    const admin = { authorization: `Bearer ${adminToken}` };
    await eventually(async () => {
      const r = await call("GET", `${url("node-registry")}/v1/executors?node_type_id=fixture.greet`, undefined, admin);
      return r.status === 200 && r.body.length > 0 ? true : undefined;
    }, 15_000, "the atomic executor registered");

    // Published by hand, with no executor: a node type that nothing serves.
    const weather = { node_type_id: "weather.current", version: "1.2.0", kind: "atomic", description: "Current weather for a city" };
    expect((await call("POST", `${url("node-registry")}/v1/node-types`, { node_type: weather }, admin)).status).toBe(200);
    // Served only by executors that are gone or hang: the directory keeps their entries.
    const forecast = { node_type_id: "weather.forecast", version: "1.0.0", kind: "atomic" };
    expect((await call("POST", `${url("node-registry")}/v1/node-types`, { node_type: forecast }, admin)).status).toBe(200);
    await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
    hungEndpoint = `http://127.0.0.1:${(hung.address() as net.AddressInfo).port}`;
    deadEndpoint = `http://127.0.0.1:${await closedPort()}`;
    for (const [id, endpoint] of [["ghost-dead", deadEndpoint], ["ghost-hung", hungEndpoint]]) {
      const put = await call("PUT", `${url("node-registry")}/v1/executors/${id}`, { endpoint, kind: "atomic", node_types: [{ node_type_id: "weather.forecast", version: "1.0.0" }] }, admin);
      expect(put.status).toBe(200);
    }
  }, 60_000);

  afterAll(async () => {
    await fabric?.stop();
    for (const socket of hungSockets) socket.destroy();
    await new Promise((resolve) => hung.close(resolve));
  });

  it("the executor starts without the broken packages and says why in its health", async () => {
    const health = await call("GET", `${url("atomic-executor")}/v1/health`);
    expect(health.status).toBe(200);
    expect(health.body.status).toBe("degraded");
    const check = health.body.checks.find((c: { name: string }) => c.name === "handlers");
    expect(check.status).toBe("degraded");
    expect(check.details.failed.map((f: { package: string }) => f.package)).toEqual(["@fixture/bad-schema", "@fixture/throws-on-import"]);
    expect(fabric.output()).toContain("handler package @fixture/throws-on-import could not be loaded and is not served: cannot import");
  });

  it("prints the table with a SERVED column, then one warning per problem on stderr, and exits 0", async () => {
    const started = Date.now();
    const ls = await runFabric(["node-types", "ls", "--registry", url("node-registry")], { env: { FABRIC_TOKEN: readToken } });
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^NODE TYPE\s+VERSION\s+KIND\s+DESCRIPTION\s+SERVED\n/);
    expect(ls.stdout).toMatch(/\nfixture\.greet\s+1\.0\.0\s+atomic\s+yes\n/);
    expect(ls.stdout).toMatch(/\nweather\.current\s+1\.2\.0\s+atomic\s+Current weather for a city\s+no\n/);
    expect(ls.stdout).toMatch(/\nweather\.forecast\s+1\.0\.0\s+atomic\s+unreachable\n/);
    expect(ls.stdout).not.toContain("fixture.badschema");

    const lines = ls.stderr.trimEnd().split("\n");
    expect(lines.every((l) => l.startsWith("! ")), ls.stderr).toBe(true);
    expect(lines).toContain("! no executor serves: weather.current@1.2.0");
    // Health names a package's file from node_modules/ on, never by its absolute path.
    expect(ls.stderr).not.toContain(project);
    const importLine = `could not load @fixture/throws-on-import: cannot import node_modules/@fixture/throws-on-import/index.js: WEATHER_API_KEY is not set`;
    // Both executors of `fabric dev` load the same packages, so each reports the failure.
    for (const executor of ["atomic-executor", "composite-executor"]) {
      expect(lines).toContain(`! ${url(executor)} ${importLine}`);
      expect(lines.some((l) => l.startsWith(`! ${url(executor)} could not load @fixture/bad-schema: node type fixture.badschema@1.0.0: its input_schema does not compile`))).toBe(true);
    }
    expect(lines.find((l) => l.startsWith(`! ${deadEndpoint} `))).toMatch(new RegExp(`^! ${deadEndpoint} cannot be reached \\(executor ghost-dead\\): upstream_unavailable: `));
    expect(lines).toContain(`! ${hungEndpoint} cannot be reached (executor ghost-hung): no answer within 1000 ms`);
    expect(lines).toHaveLength(7);
  });

  it("keeps --json output a plain NodeType array, with the same warnings on stderr", async () => {
    const ls = await runFabric(["node-types", "ls", "weather", "--json", "--registry", url("node-registry")], { env: { FABRIC_TOKEN: readToken } });
    expect(ls.code).toBe(0);
    const items = JSON.parse(ls.stdout);
    expect(items.map((t: { node_type_id: string }) => t.node_type_id).sort()).toEqual(["weather.current", "weather.forecast"]);
    expect(ls.stderr).toContain("! no executor serves: weather.current@1.2.0\n");
    expect(ls.stderr).toContain(`! ${url("atomic-executor")} could not load @fixture/throws-on-import: `);
  });

  it("names only the unserved node types that the listing shows", async () => {
    const ls = await runFabric(["node-types", "ls", "fixture", "--registry", url("node-registry")], { env: { FABRIC_TOKEN: readToken } });
    expect(ls.code).toBe(0);
    expect(ls.stderr).not.toContain("no executor serves");
    expect(ls.stderr).toContain("could not load @fixture/throws-on-import");
  });

  it("without a token the listing is refused, and nothing else is asked", async () => {
    const ls = await runFabric(["node-types", "ls", "--registry", url("node-registry")], { env: { FABRIC_TOKEN: "" } });
    expect(ls.code).toBe(1);
    expect(ls.stderr).toMatch(/^fabric: unauthenticated: [^\n]*\n$/);
  });

  it("a listing that matches nothing still shows the executors' load failures", async () => {
    const ls = await runFabric(["node-types", "ls", "no-such-thing", "--registry", url("node-registry")], { env: { FABRIC_TOKEN: readToken } });
    expect(ls.code).toBe(0);
    expect(ls.stdout).toBe('no node types match "no-such-thing"\n');
    expect(ls.stderr).toContain(`! ${url("atomic-executor")} could not load @fixture/throws-on-import: `);
  });
});
