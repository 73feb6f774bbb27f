import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { command, packWorkspace, repo, type PackedWorkspace } from "./packed-workspace.js";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "./fabric-cli.js";
import { call, eventually } from "../run-client.js";

// What a handler author does, start to finish, outside this repository: scaffold a package with the published
// scaffolder, install it against the published @nodefabric/core, test it, build it, pack it, install the tarball next
// to an executor, and run its node through the gateway, with the upstream API served by a local HTTP server.
// Every command of the README's "Write a handler in five minutes" is one of these.

interface Upstream {
  url: string;
  seen: Array<{ method: string; url: string; body: string }>;
  close(): Promise<void>;
}

/** A local stand-in for the upstream API a generated handler calls. */
async function startUpstream(answer: (req: IncomingMessage, body: string) => { status: number; body?: unknown }): Promise<Upstream> {
  const seen: Upstream["seen"] = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", body });
      const a = answer(req, body);
      res.writeHead(a.status, a.body === undefined ? {} : { "content-type": "application/json" });
      res.end(a.body === undefined ? undefined : JSON.stringify(a.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen, close: () => new Promise((r) => server.close(() => r())) };
}

interface Journey {
  name: string;
  scaffoldArgs: string[];
  /** The executor secret that points the generated handlers at the upstream. */
  baseUrlSetting: string;
  upstreamPath: string;
  answer: (req: IncomingMessage, body: string) => { status: number; body?: unknown };
  run: { node_type_id: string; input: Record<string, unknown> };
  expectOutputs: Record<string, unknown>;
  /** The node types the executor must register. */
  nodeTypes: string[];
}

const READING = { temp_c: 21.5, observed_at: "2026-11-22T10:00:00Z" };
const weatherAnswer = (req: IncomingMessage) => {
  const city = new URL(req.url ?? "/", "http://x").searchParams.get("city");
  return { status: 200, body: { ...READING, temp_c: city === "Lisbon" ? 24 : 11 } };
};

const JOURNEYS: Journey[] = [
  {
    name: "fabric-weather",
    scaffoldArgs: ["--template", "atomic"],
    baseUrlSetting: "WEATHER_BASE_URL",
    upstreamPath: "/v1",
    answer: weatherAnswer,
    run: { node_type_id: "weather.current-weather", input: { city: "Oslo" } },
    expectOutputs: { city: "Oslo", temperature_c: 11, observed_at: READING.observed_at },
    nodeTypes: ["weather.current-weather"],
  },
  {
    name: "fabric-trips",
    scaffoldArgs: ["--template", "composite"],
    baseUrlSetting: "TRIPS_BASE_URL",
    upstreamPath: "/v1",
    answer: weatherAnswer,
    run: { node_type_id: "trips.warmest-city", input: { cities: ["Oslo", "Lisbon"] } },
    expectOutputs: { city: "Lisbon", temperature_c: 24 },
    nodeTypes: ["trips.warmest-city", "trips.current-weather"],
  },
  {
    name: "fabric-items",
    scaffoldArgs: ["--template", "http"],
    baseUrlSetting: "ITEMS_BASE_URL",
    upstreamPath: "/api",
    answer: (req) => (req.url?.startsWith("/api/items/item-42") ? { status: 200, body: { id: "item-42", name: "Blue mug", price: 12.5 } } : { status: 404, body: { error: "no such item" } }),
    run: { node_type_id: "items.getItem", input: { itemId: "item-42" } },
    expectOutputs: { id: "item-42", name: "Blue mug", price: 12.5 },
    nodeTypes: ["items.getItem"],
  },
  {
    name: "petshop",
    scaffoldArgs: ["--from-openapi", path.join(repo, "templates/create-fabric-handler/test/fixtures/petstore.yaml")],
    baseUrlSetting: "PETSHOP_BASE_URL",
    upstreamPath: "/v2",
    answer: (req) => (req.method === "GET" && req.url === "/v2/pets/7" ? { status: 200, body: { id: 7, name: "Biscuit", species: "dog" } } : { status: 404, body: { title: "not found" } }),
    run: { node_type_id: "petshop.getPet", input: { petId: 7 } },
    expectOutputs: { id: 7, name: "Biscuit", species: "dog" },
    nodeTypes: ["petshop.listPets", "petshop.createPet", "petshop.getPet", "petshop.deletePet"],
  },
];

describe("a handler package, from npm create to a run through the gateway", () => {
  let work: string;
  let packed: PackedWorkspace;
  const fabrics: FabricProcess[] = [];
  const upstreams: Upstream[] = [];

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), "nf-handler-pkgs-"));
    packed = await packWorkspace(work);
  }, 120_000);
  afterAll(async () => {
    await Promise.all(fabrics.map((f) => f.stop()));
    await Promise.all(upstreams.map((u) => u.close()));
    rmSync(work, { recursive: true, force: true });
  });

  for (const j of JOURNEYS) {
    it(`${j.scaffoldArgs.join(" ")}: scaffolds, installs, tests, builds, packs, and runs ${j.run.node_type_id} in a fabric`, async () => {
      const npm = (args: string[], cwd: string) => command("npm", args, { cwd, env: packed.env, timeoutMs: 300_000 });

      // npm create fabric-handler <name> -- …, with the scaffolder and @nodefabric/core as published tarballs.
      const created = await npm(
        ["exec", "--yes", `--package=${packed.specs["create-fabric-handler"]}`, "--", "create-fabric-handler", j.name, ...j.scaffoldArgs, "--yes", "--core", packed.specs["@nodefabric/core"], "--schemas", packed.specs["@nodefabric/schemas"]],
        work,
      );
      const pkgDir = path.join(work, j.name);
      expect(created.output).toContain("npm install");
      const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
      expect(manifest).toMatchObject({ name: j.name, nodefabric: { handlers: ["./dist/index.js"] }, keywords: expect.arrayContaining(["nodefabric-handler"]) });
      expect(manifest.peerDependencies["@nodefabric/core"]).toBeDefined();
      expect(manifest.devDependencies["@nodefabric/core"]).toBeDefined();

      // As generated: install, test, build.
      await npm(["install"], pkgDir);
      const tested = await npm(["test"], pkgDir);
      // eslint-disable-next-line no-control-regex
      expect(tested.output.replace(/\u001b\[[0-9;]*m/g, "")).toMatch(/Tests\s+\d+ passed/);
      await npm(["run", "build"], pkgDir);

      // Publish-equivalent: pack it, and install the tarball next to an executor.
      const packedPkg = (await npm(["pack", "--pack-destination", work], pkgDir)).output.trim().split("\n").at(-1)!.trim();
      const deploy = path.join(work, `${j.name}-deploy`);
      mkdirSync(deploy);
      writeFileSync(
        path.join(deploy, "package.json"),
        JSON.stringify({
          name: `${j.name}-deploy`,
          private: true,
          type: "module",
          dependencies: { "@nodefabric/core": packed.specs["@nodefabric/core"], [j.name]: `file:${path.join(work, packedPkg)}` },
          overrides: { "@nodefabric/schemas": packed.specs["@nodefabric/schemas"] },
        }),
      );
      await npm(["install"], deploy);

      // The installed fabric, discovering the installed package; the upstream is a local server.
      const upstream = await startUpstream(j.answer);
      upstreams.push(upstream);
      const base = await freePortBase();
      const fabric = await startFabricProcess(["dev", "--discover", ".", "--port-base", String(base), "--data-dir", path.join(deploy, ".fabric")], {
        cwd: deploy,
        cli: path.join(deploy, "node_modules/@nodefabric/core/bin/fabric.js"),
        env: { ...packed.env, [`FABRIC_SECRET_${j.baseUrlSetting}`]: `${upstream.url}${j.upstreamPath}` },
      });
      fabrics.push(fabric);
      const registry = fabric.urls["node-registry"]!;
      for (const id of j.nodeTypes) {
        await eventually(async () => ((await call("GET", `${registry}/v1/executors?node_type_id=${id}`)).body.length > 0 ? true : undefined), 20_000, `an executor serving ${id}`);
      }

      const r = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: j.run.node_type_id, version: "1.0.0" }, input: j.run.input }, { prefer: "wait=30" });
      expect(r.status).toBe(200);
      expect(r.body.state, JSON.stringify(r.body.extensions)).toBe("completed");
      expect(r.body.extensions["nodefabric.outputs"]).toMatchObject(j.expectOutputs);
      expect(upstream.seen.length).toBeGreaterThan(0);

      // And as the README shows it: `npx fabric run`, against the same gateway.
      const viaCli = await runFabric(
        ["run", `${j.run.node_type_id}@1.0.0`, "--input", JSON.stringify(j.run.input), "--no-follow", "--gateway", fabric.urls["run-gateway"]!],
        { cwd: deploy, cli: path.join(deploy, "node_modules/@nodefabric/core/bin/fabric.js") },
      );
      expect(viaCli.code, viaCli.stderr).toBe(0);
      await fabric.stop();
    }, 600_000);
  }
});
