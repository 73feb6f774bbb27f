import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startLocalRegistry, repo, type LocalRegistry } from "./local-registry.mjs";
import { sh, shBackground, type BackgroundCommand } from "./shell.js";
import { freePortBase } from "./fabric-cli.js";
import { readmeCommand } from "../readme-blocks.js";
import { call, eventually } from "../run-client.js";
import { localBetterSqlitePrebuild } from "./sqlite-prebuild.js";
import { nodeHasSqlite } from "../../core/src/store/sqlite-driver.js";

// The release, as a user meets it. Every public package of this repository is published, by the release script, to
// a real npm registry (Verdaccio on loopback, with its own storage). Then, with npm pointed at that registry and
// nothing else from this repository, the README's commands for published packages run as written, in empty folders
// outside the repository: scaffold with `npm create fabric-handler@latest`, install, test, build and publish the handler
// package, install it next to `@nodefabric/core` in another folder, start `fabric dev` there and run the node type.
// The upstream API the handlers call is a local HTTP server.

interface Upstream {
  url: string;
  seen: Array<{ method: string; url: string }>;
  close(): Promise<void>;
}

async function startUpstream(answer: (req: IncomingMessage) => { status: number; body?: unknown }): Promise<Upstream> {
  const seen: Upstream["seen"] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "" });
      const a = answer(req);
      res.writeHead(a.status, a.body === undefined ? {} : { "content-type": "application/json" });
      res.end(a.body === undefined ? undefined : JSON.stringify(a.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen, close: () => new Promise((r) => server.close(() => r())) };
}

const README_NAME = "my-api";

/** The README's commands for published packages, as written there for `my-api`. */
const README_COMMANDS = {
  create: readmeCommand("npm create fabric-handler@latest my-api -- --template atomic"),
  build: readmeCommand("cd my-api && npm install && npm test && npm run build && npm publish"),
  // Node 20 has no node:sqlite: there the README installs better-sqlite3 beside the fabric.
  install: nodeHasSqlite()
    ? readmeCommand("npm install @nodefabric/core my-api")
    : readmeCommand("npm install @nodefabric/core better-sqlite3 my-api && npm install-scripts approve better-sqlite3"),
  dev: readmeCommand("npx fabric dev --discover ."),
  run: readmeCommand(`npx fabric run my-api.current-weather --input '{"city":"Oslo"}'`),
  npxDev: nodeHasSqlite() ? readmeCommand("npx @nodefabric/core dev") : readmeCommand("npx --allow-scripts=better-sqlite3 -p @nodefabric/core -p better-sqlite3 fabric dev"),
};

/** The same commands for the package `name` scaffolded with `scaffold` instead of `my-api --template atomic`. */
function commandsFor(name: string, scaffold: string) {
  const swap = (c: string) => c.replaceAll(README_NAME, name);
  return {
    create: swap(README_COMMANDS.create).replace("--template atomic", scaffold),
    build: swap(README_COMMANDS.build),
    install: swap(README_COMMANDS.install),
    dev: README_COMMANDS.dev,
  };
}

interface Journey {
  name: string;
  scaffold: string;
  baseUrlSetting: string;
  upstreamPath: string;
  answer: (req: IncomingMessage) => { status: number; body?: unknown };
  /** The `npx fabric run …` line; the README's own for my-api. */
  run: string;
  expectOutputs: Record<string, unknown>;
  nodeTypes: string[];
}

const READING = { temp_c: 21.5, observed_at: "2026-11-22T10:00:00Z" };
const weatherAnswer = (req: IncomingMessage) => {
  const city = new URL(req.url ?? "/", "http://x").searchParams.get("city");
  return { status: 200, body: { ...READING, temp_c: city === "Lisbon" ? 24 : 11 } };
};

const JOURNEYS: Journey[] = [
  {
    name: README_NAME,
    scaffold: "--template atomic",
    baseUrlSetting: "MY_API_BASE_URL",
    upstreamPath: "/v1",
    answer: weatherAnswer,
    run: README_COMMANDS.run,
    expectOutputs: { city: "Oslo", temperature_c: 11, observed_at: READING.observed_at },
    nodeTypes: [`${README_NAME}.current-weather`],
  },
  {
    name: "my-trips",
    scaffold: "--template composite",
    baseUrlSetting: "MY_TRIPS_BASE_URL",
    upstreamPath: "/v1",
    answer: weatherAnswer,
    run: `npx fabric run my-trips.warmest-city --input '{"cities":["Oslo","Lisbon"]}'`,
    expectOutputs: { city: "Lisbon", temperature_c: 24 },
    nodeTypes: ["my-trips.warmest-city", "my-trips.current-weather"],
  },
  {
    name: "my-items",
    scaffold: "--template http",
    baseUrlSetting: "MY_ITEMS_BASE_URL",
    upstreamPath: "/api",
    answer: (req) => (req.url?.startsWith("/api/items/item-42") ? { status: 200, body: { id: "item-42", name: "Blue mug", price: 12.5 } } : { status: 404, body: { error: "no such item" } }),
    run: `npx fabric run my-items.getItem --input '{"itemId":"item-42"}'`,
    expectOutputs: { id: "item-42", name: "Blue mug", price: 12.5 },
    nodeTypes: ["my-items.getItem"],
  },
  {
    name: "my-petshop",
    scaffold: `--from-openapi ${path.join(repo, "templates/create-fabric-handler/test/fixtures/petstore.yaml")}`,
    baseUrlSetting: "MY_PETSHOP_BASE_URL",
    upstreamPath: "/v2",
    answer: (req) => (req.method === "GET" && req.url === "/v2/pets/7" ? { status: 200, body: { id: 7, name: "Biscuit", species: "dog" } } : { status: 404, body: { title: "not found" } }),
    run: `npx fabric run my-petshop.getPet --input '{"petId":7}'`,
    expectOutputs: { id: 7, name: "Biscuit", species: "dog" },
    nodeTypes: ["my-petshop.listPets", "my-petshop.createPet", "my-petshop.getPet", "my-petshop.deletePet"],
  },
];

describe("the release: published to a registry, then the README's commands from empty folders", () => {
  let work: string;
  let registry: LocalRegistry;
  /** The user's environment: npm knows only the local registry. */
  let env: NodeJS.ProcessEnv;
  /** For the commands that install the fabric: on Node 20, this repository's better-sqlite3 build as a prebuild. */
  let fabricInstallEnv: NodeJS.ProcessEnv;
  const background: BackgroundCommand[] = [];
  const upstreams: Upstream[] = [];

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), "nf-release-"));
    registry = await startLocalRegistry(path.join(work, "registry"));
    env = registry.env;
    fabricInstallEnv = { ...env, ...(await localBetterSqlitePrebuild(path.join(work, "prebuilds"))) };
    // The release flow, as a maintainer runs it (built and tested already by `npm test`).
    const released = await sh(`node scripts/release.mjs --publish --registry ${registry.url} --skip-build --skip-tests`, { cwd: repo, env: registry.env, timeoutMs: 300_000 });
    expect(released.output).toMatch(/create-fabric-handler/);
  }, 400_000);

  afterAll(async () => {
    await Promise.all(background.map((b) => b.stop()));
    await Promise.all(upstreams.map((u) => u.close()));
    await registry?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("publishes every public package at one version, each installable by name", async () => {
    const pkgs = ["@nodefabric/schemas", "@nodefabric/sdk", "@nodefabric/core", "@nodefabric/handler-demo", "@nodefabric/handler-examples", "@nodefabric/handler-http", "create-fabric-handler"];
    const version = JSON.parse(readFileSync(path.join(repo, "core/package.json"), "utf8")).version as string;
    for (const name of pkgs) {
      const res = await fetch(`${registry.url}/${name.replace("/", "%2f")}`);
      expect(res.status, name).toBe(200);
      const doc = (await res.json()) as { "dist-tags": Record<string, string> };
      expect(doc["dist-tags"].latest, name).toBe(version);
    }
  });

  it("`npx @nodefabric/core dev` starts a fabric in an empty folder", async () => {
    const dir = path.join(work, "npx-dev");
    mkdirSync(dir);
    const line = README_COMMANDS.npxDev;
    const base = await freePortBase();
    const fabric = await shBackground(line, { cwd: dir, env: { ...fabricInstallEnv, FABRIC_PORT_BASE: String(base), npm_config_yes: "true" }, timeoutMs: 400_000 });
    background.push(fabric);
    const health = await call("GET", `${fabric.urls["run-gateway"]}/v1/health`);
    expect(health.status).toBe(200);
    await fabric.stop();
  }, 500_000);

  for (const j of JOURNEYS) {
    it(`${j.scaffold.split(" ").slice(0, 1).join(" ")} ${j.name}: npm create, install, test, build, publish; then install by name, fabric dev, fabric run`, async () => {
      const cmds = commandsFor(j.name, j.scaffold);
      const author = path.join(work, `${j.name}-author`);
      const operator = path.join(work, `${j.name}-operator`);
      mkdirSync(author);
      mkdirSync(operator);

      const created = await sh(cmds.create, { cwd: author, env: { ...env, npm_config_yes: "true" } });
      expect(created.output).toContain("npm install");
      const manifest = JSON.parse(readFileSync(path.join(author, j.name, "package.json"), "utf8"));
      expect(manifest).toMatchObject({ name: j.name, nodefabric: { handlers: ["./dist/index.js"] }, keywords: expect.arrayContaining(["nodefabric-handler"]) });
      // A handler package needs the light SDK only: no fabric, no SQLite.
      expect(manifest.peerDependencies).toHaveProperty("@nodefabric/sdk");
      expect(manifest.devDependencies).toHaveProperty("@nodefabric/sdk");
      expect(JSON.stringify(manifest)).not.toContain("@nodefabric/core");

      const built = await sh(cmds.build, { cwd: author, env, timeoutMs: 400_000 });
      // eslint-disable-next-line no-control-regex
      expect(built.output.replace(/\u001b\[[0-9;]*m/g, "")).toMatch(/Tests\s+\d+ passed/);
      expect(built.output).not.toMatch(/better-sqlite3|node-gyp|gyp info|EBADENGINE/);
      expect((await fetch(`${registry.url}/${j.name}`)).status).toBe(200);

      const installed = await sh(cmds.install, { cwd: operator, env: fabricInstallEnv, timeoutMs: 400_000 });
      if (!nodeHasSqlite()) expect(readFileSync(path.join(operator, "package.json"), "utf8")).toMatch(/"allowScripts":\s*\{\s*"better-sqlite3@[^"]+":\s*true/);
      expect(installed.output).not.toMatch(/gyp info|CXX\(target\)/);
      // `engines` of every package installed is met by this Node (core pins what would need Node 22).
      expect(installed.output).not.toMatch(/EBADENGINE/);

      const upstream = await startUpstream(j.answer);
      upstreams.push(upstream);
      const base = String(await freePortBase());
      const fabric = await shBackground(cmds.dev, { cwd: operator, env: { ...env, FABRIC_PORT_BASE: base, [`FABRIC_SECRET_${j.baseUrlSetting}`]: `${upstream.url}${j.upstreamPath}` } });
      background.push(fabric);
      const registryUrl = fabric.urls["node-registry"]!;
      for (const id of j.nodeTypes) {
        await eventually(async () => ((await call("GET", `${registryUrl}/v1/executors?node_type_id=${id}`)).body.length > 0 ? true : undefined), 20_000, `an executor serving ${id}`);
      }

      const ran = await sh(j.run, { cwd: operator, env: { ...env, FABRIC_PORT_BASE: base }, timeoutMs: 60_000 });
      expect(ran.output).toMatch(/completed/);
      const runs = await call("GET", `${fabric.urls["run-gateway"]}/v1/runs?state=completed`);
      // This fabric is new: the run `fabric run` started is its only one.
      expect(runs.body, JSON.stringify(runs.body)).toHaveLength(1);
      const run = runs.body[0] as { extensions: Record<string, unknown> };
      expect(run!.extensions["nodefabric.outputs"]).toMatchObject(j.expectOutputs);
      expect(upstream.seen.length).toBeGreaterThan(0);
      await fabric.stop();
    }, 900_000);
  }
});
