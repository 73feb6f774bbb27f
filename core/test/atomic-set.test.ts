// Issue 11, part 2 (Scale): a handler package generated from a large API declares its node types with
// defineAtomicSet (NodeTypes as JSON files, one shared handler); the executor serves them without reading the files
// at load, reads each on first use, and skips (and reports) one node type that cannot load while its package serves
// the rest. Registration publishes in batches, reading the files batch by batch.
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { setTimeout as delay } from "node:timers/promises";
import type { FastifyInstance } from "fastify";
import type { NodeType } from "@nodefabric/schemas";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic, defineAtomicSet, isAtomicDefinition, isAtomicSet } from "@nodefabric/core/sdk";
import { runHandler } from "@nodefabric/core/testing";
import { HandlerLoadError, handlersFromDefinitions, loadHandlers, withDefinitions, type LoadedHandlers, type NodeTypeStream } from "../src/services/atomic-executor/handler-loader.js";
import { buildAtomicExecutor } from "../src/services/atomic-executor/index.js";
import { RegistryRegistration } from "../src/services/atomic-executor/registry-registration.js";
import { buildNodeRegistry } from "../src/services/node-registry/index.js";
import { RegistryClient } from "../src/clients/registry-client.js";
import { servingReport } from "../src/cli/serving-report.js";
import { checkedCall as call } from "./support/checked-call.js";

const isResult = validatorFor("atomic_execute_result");
const isHealth = validatorFor("health");

const tmp = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix));

/** A pet store operation as an importer makes it: its path in an extension the shared handler reads. */
function operation(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    node_type_id: `petstore.${name}`,
    version: "1.0.0",
    kind: "atomic",
    description: `The ${name} operation`,
    input_schema: { type: "object", properties: { limit: { type: "integer", minimum: 1 } }, additionalProperties: false },
    output_schema: { type: "object", properties: { operation: { type: "string" } }, required: ["operation"] },
    extensions: { "acme.path": `/${name}` },
    ...extra,
  };
}

/** A member of a set's directory: its NodeType (or raw file text), under `file`. */
interface Member {
  id: string;
  version?: string;
  file?: string;
  content: Record<string, unknown> | string;
}

/** Writes index.json listing `members`, and (unless `files: false`) their files. Returns the directory. */
function setDirectory(dir: string, members: Member[], options: { files?: boolean } = {}): string {
  fs.mkdirSync(dir, { recursive: true });
  const entries = members.map((m) => ({ node_type_id: m.id, version: m.version ?? "1.0.0", file: m.file ?? `${m.id}.json` }));
  fs.writeFileSync(path.join(dir, "index.json"), JSON.stringify({ node_types: entries }));
  if (options.files !== false) writeMembers(dir, members);
  return dir;
}

function writeMembers(dir: string, members: Member[]): void {
  for (const m of members) {
    const file = path.join(dir, m.file ?? `${m.id}.json`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, typeof m.content === "string" ? m.content : JSON.stringify(m.content));
  }
}

/** The module of a generated package: one set whose handler answers which operation it ran (from ctx.nodeType). */
const SET_MODULE = `import { defineAtomicSet } from "@nodefabric/core/sdk";
export const operations = defineAtomicSet({
  directory: new URL("./node-types/", import.meta.url),
  handler: (inputs, ctx) => ({ operation: ctx.nodeType.node_type_id, path: ctx.nodeType.extensions["acme.path"], inputs }),
});
export default operations;
`;

/** A handler package in a fresh folder whose only module exports a set of `members`. */
function setPackage(name: string, members: Member[], options: { files?: boolean } = {}): string {
  const dir = tmp("nf-set-");
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name, version: "2.0.0", type: "module", nodefabric: { handlers: ["./index.js"] } }));
  fs.writeFileSync(path.join(dir, "index.js"), SET_MODULE);
  setDirectory(path.join(dir, "node-types"), members, options);
  return dir;
}

const members = (...names: string[]): Member[] => names.map((n) => ({ id: `petstore.${n}`, content: operation(n) }));

/** A loader logger that keeps every line. */
function recordingLogger() {
  const lines: Array<{ level: "info" | "warn"; obj: Record<string, unknown>; msg?: string }> = [];
  return {
    lines,
    logger: {
      info: (obj: object, msg?: string) => void lines.push({ level: "info", obj: obj as Record<string, unknown>, msg }),
      warn: (obj: object, msg?: string) => void lines.push({ level: "warn", obj: obj as Record<string, unknown>, msg }),
    },
  };
}

async function listening(app: FastifyInstance): Promise<string> {
  await app.listen({ host: "127.0.0.1", port: 0 });
  return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
}

let nextRun = 0;
function execute(base: string, nodeTypeId: string, inputs: Record<string, unknown> = {}, version = "1.0.0") {
  const n = ++nextRun;
  return call(base, "POST", "/v1/atomic-node-runs:execute", { run_id: `r_set${n}`, node_run_id: `nr_set${n}`, node_type_ref: { node_type_id: nodeTypeId, version }, inputs });
}

async function handlersCheck(base: string) {
  const res = await call(base, "GET", "/v1/health");
  expect(isHealth(res.body)).toBe(true);
  return (res.body.checks as Array<{ name: string; status: string; message?: string; details: Record<string, any> }>).find((c) => c.name === "handlers")!;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await delay(25);
  }
}

describe("defineAtomicSet", () => {
  it("reads only index.json, and a member's file each time it is asked for (the set keeps none)", () => {
    const dir = setDirectory(tmp("nf-dir-"), members("listPets", "getPet"), { files: false });
    const set = defineAtomicSet({ directory: pathToFileURL(`${dir}/`), handler: () => ({ operation: "x" }) });
    expect(isAtomicSet(set)).toBe(true);
    expect(Object.isFrozen(set)).toBe(true);
    expect(set.directory).toBe(dir);
    expect(set.entries).toEqual([
      { node_type_id: "petstore.listPets", version: "1.0.0", file: "petstore.listPets.json" },
      { node_type_id: "petstore.getPet", version: "1.0.0", file: "petstore.getPet.json" },
    ]);
    // The files did not exist when the set was made; they are read now.
    writeMembers(dir, members("listPets", "getPet"));
    expect(set.load("petstore.getPet", "1.0.0")).toEqual(operation("getPet"));
    writeMembers(dir, [{ id: "petstore.getPet", content: operation("getPet", { description: "changed" }) }]);
    expect(set.load("petstore.getPet", "1.0.0").description).toBe("changed");
    expect(() => set.load("petstore.nope", "1.0.0")).toThrow(TypeError);
    expect(() => set.load("petstore.nope", "1.0.0")).toThrow(`defineAtomicSet: petstore.nope@1.0.0 is not in the set of ${dir} (see its index.json)`);
  });

  it("takes the directory as a file URL or a path, and a kind left out of a file is atomic", () => {
    const { kind: _kind, ...noKind } = operation("listPets");
    const dir = setDirectory(tmp("nf-dir-"), [{ id: "petstore.listPets", content: noKind }]);
    const set = defineAtomicSet({ directory: dir, handler: () => ({ operation: "x" }) });
    expect(set.load("petstore.listPets", "1.0.0").kind).toBe("atomic");
    expect(defineAtomicSet({ directory: pathToFileURL(dir).href, handler: () => ({}) }).entries).toHaveLength(1);
  });

  it("get() makes an ordinary atomic definition of a member; without a version only when the id has one", () => {
    const dir = setDirectory(tmp("nf-dir-"), [...members("listPets"), { id: "petstore.getPet", content: operation("getPet") }, { id: "petstore.getPet", version: "2.0.0", file: "v2/getPet.json", content: { ...operation("getPet"), version: "2.0.0" } }]);
    const handler = () => ({ operation: "x" });
    const set = defineAtomicSet({ directory: dir, handler });
    const def = set.get("petstore.listPets");
    expect(isAtomicDefinition(def)).toBe(true);
    expect(Object.isFrozen(def)).toBe(true);
    expect(def.handler).toBe(handler);
    expect(def.nodeType).toEqual(operation("listPets"));
    expect(set.get("petstore.getPet", "2.0.0").nodeType.version).toBe("2.0.0");
    expect(() => set.get("petstore.getPet")).toThrow("defineAtomicSet: petstore.getPet has versions 1.0.0, 2.0.0 in the set; pass the version to get()");
    expect(() => set.get("petstore.nope")).toThrow(/petstore\.nope is not in the set/);
  });

  it("refuses a missing or malformed index with a TypeError that says what is wrong", () => {
    const handler = () => ({});
    const dirWith = (index: unknown) => {
      const dir = tmp("nf-dir-");
      fs.writeFileSync(path.join(dir, "index.json"), typeof index === "string" ? index : JSON.stringify(index));
      return dir;
    };
    const empty = tmp("nf-dir-");
    const cases: Array<[unknown, RegExp]> = [
      [{ handler }, /directory is required/],
      [{ directory: new URL("https://example.com/types/"), handler }, /must be a file: URL or a path/],
      [{ directory: empty, handler }, new RegExp(`${path.join(empty, "index.json").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} does not exist`)],
      [{ directory: dirWith("{"), handler }, /index\.json is not valid JSON/],
      [{ directory: dirWith([]), handler }, /must be an object \{ "node_types": \[/],
      [{ directory: dirWith({ node_types: [{ node_type_id: "a.b", version: "1.0.0" }] }), handler }, /node_types\[0\]\.file of a\.b@1\.0\.0 must be a non-empty string/],
      [{ directory: dirWith({ node_types: [{ version: "1.0.0", file: "x.json" }] }), handler }, /node_types\[0\]\.node_type_id must be a non-empty string/],
      [{ directory: dirWith({ node_types: [{ node_type_id: "a.b", version: "1.0.0", file: "../x.json" }] }), handler }, /must be a path inside the set's directory, not "\.\.\/x\.json"/],
      [{ directory: dirWith({ node_types: [{ node_type_id: "a.b", version: "1", file: "a.json" }, { node_type_id: "a.b", version: "1", file: "b.json" }] }), handler }, /node_types\[1\]: a\.b@1 is listed twice/],
      [{ directory: dirWith({ node_types: [] }), handler: "no" }, /handler must be a function/],
    ];
    for (const [spec, message] of cases) {
      let thrown: unknown;
      try {
        defineAtomicSet(spec as never);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, String(message)).toBeInstanceOf(TypeError);
      expect((thrown as Error).message, String(message)).toMatch(message);
    }
  });

  it("load() names the file of a member that is missing, not JSON, or another node type", () => {
    const dir = setDirectory(tmp("nf-dir-"), [
      { id: "petstore.a", content: "{ not json" },
      { id: "petstore.b", content: operation("other") },
      { id: "petstore.c", content: operation("c", { node_type_id: "petstore.c", kind: "composite" }) },
    ]);
    fs.writeFileSync(path.join(dir, "index.json"), JSON.stringify({ node_types: [...JSON.parse(fs.readFileSync(path.join(dir, "index.json"), "utf8")).node_types, { node_type_id: "petstore.d", version: "1.0.0", file: "gone.json" }] }));
    const set = defineAtomicSet({ directory: dir, handler: () => ({}) });
    expect(() => set.load("petstore.a", "1.0.0")).toThrow(/^the NodeType file of petstore\.a@1\.0\.0 \(petstore\.a\.json\) is not valid JSON: /);
    expect(() => set.load("petstore.b", "1.0.0")).toThrow("the NodeType file of petstore.b@1.0.0 (petstore.b.json) holds petstore.other@1.0.0; its node_type_id and version must be the ones index.json lists");
    expect(() => set.load("petstore.c", "1.0.0")).toThrow(/has kind "composite"; a set holds atomic node types/);
    expect(() => set.load("petstore.d", "1.0.0")).toThrow("the NodeType file of petstore.d@1.0.0 (gone.json) does not exist");
  });

  it("runHandler runs a member through a real executor: its schemas apply, and the handler sees it as ctx.nodeType", async () => {
    const dir = setDirectory(tmp("nf-dir-"), members("listPets", "getPet"));
    const operations = defineAtomicSet({ directory: dir, handler: (_inputs, ctx) => ({ operation: ctx.nodeType.node_type_id, path: ctx.nodeType.extensions?.["acme.path"] as string }) });
    const ok = await runHandler(operations.get("petstore.listPets"), { limit: 5 });
    expect(isResult(ok)).toBe(true);
    expect(ok).toMatchObject({ state: "completed", outputs: { operation: "petstore.listPets", path: "/listPets" } });
    const bad = await runHandler(operations.get("petstore.getPet"), { limit: 0 });
    expect(bad.error?.code).toBe("invalid_inputs");
  });
});

describe("an executor serving a set", () => {
  let dir: string;
  let handlers: LoadedHandlers;
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    // The NodeType files are written only after the package has loaded: loading must not read them.
    dir = setPackage("@acme/petstore", members("listPets", "getPet", "addPet"), { files: false });
    handlers = await loadHandlers({ handlers: [dir], logger: recordingLogger().logger });
    writeMembers(path.join(dir, "node-types"), members("listPets", "getPet", "addPet"));
    app = await buildAtomicExecutor({ logger: false, handlers });
    base = await listening(app);
  });
  afterAll(async () => {
    await app?.close();
  });

  it("serves the set's node types without reading their files at load", async () => {
    expect(handlers.failed).toEqual([]);
    expect(handlers.definitions).toEqual([]);
    expect(handlers.served.map((s) => `${s.node_type_id}@${s.version}`)).toEqual(["petstore.listPets@1.0.0", "petstore.getPet@1.0.0", "petstore.addPet@1.0.0"]);
    expect(handlers.served[0]!.source).toEqual({ package: "@acme/petstore", version: "2.0.0", path: path.join(fs.realpathSync(dir), "index.js") });
    const check = await handlersCheck(base);
    expect(check.status).toBe("ok");
    expect(check.details.count).toBe(3);
    expect(check.details.node_types).toContainEqual({ node_type_id: "petstore.getPet", version: "1.0.0", package: "@acme/petstore", package_version: "2.0.0" });
  });

  it("executes a member over HTTP: the shared handler sees the member as ctx.nodeType, and the member's schemas apply", async () => {
    const ok = await execute(base, "petstore.getPet", { limit: 3 });
    expect(ok.status).toBe(200);
    expect(isResult(ok.body)).toBe(true);
    expect(ok.body).toMatchObject({ state: "completed", outputs: { operation: "petstore.getPet", path: "/getPet", inputs: { limit: 3 } } });
    const invalid = await execute(base, "petstore.addPet", { limit: "three" });
    expect(invalid.body).toMatchObject({ state: "failed", error: { code: "invalid_inputs", retryable: false } });
    const other = await execute(base, "petstore.getPet", {}, "9.9.9");
    expect(other.status).toBe(404);
    expect(other.body.error).toMatchObject({ code: "unknown_node_type", details: { available_versions: ["1.0.0"] } });
  });

  it("keeps at most setCacheSize members loaded, reading a dropped one again on its next use", async () => {
    const h = await loadHandlers({ handlers: [dir], logger: recordingLogger().logger, setCacheSize: 2 });
    const first = h.find("petstore.listPets", "1.0.0")!;
    expect(h.find("petstore.listPets", "1.0.0")).toBe(first);
    expect(Object.isFrozen(first.definition.nodeType)).toBe(true);
    h.find("petstore.getPet", "1.0.0");
    h.find("petstore.addPet", "1.0.0");
    const again = h.find("petstore.listPets", "1.0.0")!;
    expect(again).not.toBe(first);
    expect(again.definition.nodeType).toEqual(first.definition.nodeType);
  });
});

describe("one node type that cannot load never stops its package", () => {
  const broken: Member[] = [
    { id: "petstore.good", content: operation("good") },
    { id: "petstore.notJson", content: "{ nope" },
    { id: "petstore.badType", content: operation("badType", { node_type_id: "petstore.badType", input_schema: { type: "objekt" } }) },
    { id: "petstore.badPattern", content: operation("badPattern", { node_type_id: "petstore.badPattern", input_schema: { type: "object", properties: { id: { type: "string", pattern: "([a-z]" } } } }) },
    { id: "petstore.badRef", content: operation("badRef", { node_type_id: "petstore.badRef", output_schema: { $ref: "#/$defs/Missing" } }) },
    { id: "petstore.notANodeType", content: operation("notANodeType", { node_type_id: "petstore.notANodeType", constraints: { gates: { side_effect_class: "sometimes" } } }) },
    { id: "petstore.otherId", content: operation("somethingElse") },
    { id: "petstore.missing", file: "missing.json", content: "" },
    // Both schemas pass the cheap check, but they share an $id, which one Ajv instance cannot compile twice.
    {
      id: "petstore.sameId",
      content: operation("sameId", {
        node_type_id: "petstore.sameId",
        input_schema: { $id: "https://acme.example/pet.json", type: "object" },
        output_schema: { $id: "https://acme.example/pet.json", type: "object" },
      }),
    },
  ];
  let app: FastifyInstance;
  let base: string;
  let handlers: LoadedHandlers;

  beforeAll(async () => {
    const dir = setPackage("@acme/half-good", broken);
    fs.rmSync(path.join(dir, "node-types", "missing.json"));
    handlers = await loadHandlers({ discover: [dir], logger: recordingLogger().logger });
    app = await buildAtomicExecutor({ logger: false, handlers });
    base = await listening(app);
  });
  afterAll(async () => {
    await app?.close();
  });

  it("a set member whose file is broken answers 404 unknown_node_type with the reason, and its siblings run", async () => {
    expect(handlers.failed).toEqual([]);
    const expected: Array<[string, RegExp]> = [
      ["petstore.notJson", /^this executor does not serve petstore\.notJson@1\.0\.0: node type petstore\.notJson@1\.0\.0: its NodeType file petstore\.notJson\.json is not valid JSON: /],
      ["petstore.badType", /: its input_schema does not compile: schema is invalid: data\/type must be .* \(in petstore\.badType\.json\)$/],
      ["petstore.badPattern", /: its input_schema does not compile: pattern "\(\[a-z\]" at \/properties\/id\/pattern is not a valid regular expression with the u flag/],
      ["petstore.badRef", /: its output_schema does not compile: \$ref "#\/\$defs\/Missing" at \/\$ref does not resolve/],
      ["petstore.notANodeType", /: its NodeType file petstore\.notANodeType\.json is not a valid NodeType: \/constraints\/gates\/side_effect_class must be one of/],
      ["petstore.otherId", /holds petstore\.somethingElse@1\.0\.0; its node_type_id and version must be the ones index\.json lists/],
      ["petstore.missing", /its NodeType file missing\.json does not exist$/],
    ];
    for (const [id, message] of expected) {
      const res = await execute(base, id);
      expect(res.status, id).toBe(404);
      expect(res.body.error.code).toBe("unknown_node_type");
      expect(res.body.error.message, id).toMatch(message);
      expect(res.body.error.message).not.toContain(os.tmpdir());
    }
    const good = await execute(base, "petstore.good", { limit: 1 });
    expect(good.body).toMatchObject({ state: "completed", outputs: { operation: "petstore.good" } });
  });

  it("lists each of them in the handlers health check, with its node type, and serves the rest", async () => {
    const check = await handlersCheck(base);
    expect(check.status).toBe("degraded");
    expect(check.message).toMatch(/^7 node type\(s\) could not be loaded and are not served: petstore\.notJson@1\.0\.0 \(@acme\/half-good\), /);
    expect(check.details.failed).toHaveLength(7);
    expect(check.details.failed[0]).toMatchObject({ package: "@acme/half-good", version: "2.0.0", node_type_id: "petstore.notJson", node_type_version: "1.0.0" });
    expect(check.details.node_types.map((r: { node_type_id: string }) => r.node_type_id).sort()).toEqual(["petstore.good", "petstore.sameId"]);
    expect(JSON.stringify(check)).not.toContain(os.tmpdir());
  });

  it("a schema that passes the check but does not compile fails each execution, not retryable, and is listed", async () => {
    for (let i = 0; i < 2; i++) {
      const res = await execute(base, "petstore.sameId", {});
      expect(res.status).toBe(200);
      expect(isResult(res.body)).toBe(true);
      expect(res.body.state).toBe("failed");
      expect(res.body.error).toMatchObject({ code: "handler_error", retryable: false, details: { node_type_id: "petstore.sameId", version: "1.0.0", reason: "schema_does_not_compile" } });
      expect(res.body.error.message).toMatch(/^petstore\.sameId@1\.0\.0 cannot run on this executor: its output_schema does not compile: schema with key or id "https:\/\/acme\.example\/pet\.json" already exists/);
    }
    const failed = (await handlersCheck(base)).details.failed as Array<{ node_type_id?: string; reason: string }>;
    expect(failed.filter((f) => f.node_type_id === "petstore.sameId")).toHaveLength(1);
  });

  it("validators of a schema that does not compile fail with that reason instead of throwing", () => {
    const def = defineAtomic({
      nodeType: { node_type_id: "mem.sameId", version: "1.0.0", input_schema: { $id: "https://acme.example/x.json" }, output_schema: { $id: "https://acme.example/x.json" } },
      handler: () => ({}),
    });
    const h = handlersFromDefinitions([def]);
    expect(h.failed).toEqual([]);
    const loaded = h.find("mem.sameId", "1.0.0")!;
    expect(loaded.validateOutputs({})).toBe(false);
    expect(loaded.validateOutputs.errors).toEqual([expect.objectContaining({ message: expect.stringMatching(/^cannot be checked: node type mem\.sameId@1\.0\.0: its output_schema does not compile: /) })]);
    expect(loaded.schemaProblem?.()).toMatch(/^its output_schema does not compile: schema with key or id/);
    expect(h.failed).toEqual([expect.objectContaining({ node_type_id: "mem.sameId", node_type_version: "1.0.0", reason: expect.stringMatching(/^node type mem\.sameId@1\.0\.0: its output_schema/) })]);
  });

  it("a plain package with one bad node type serves the others, whether named or discovered", async () => {
    const dir = tmp("nf-plain-");
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "@acme/plain", version: "1.0.0", type: "module", nodefabric: { handlers: ["./index.js"] } }));
    fs.writeFileSync(
      path.join(dir, "index.js"),
      `import { defineAtomic } from "@nodefabric/core/sdk";
export const good = defineAtomic({ nodeType: { node_type_id: "plain.good", version: "1.0.0" }, handler: () => ({ ok: true }) });
export const bad = defineAtomic({ nodeType: { node_type_id: "plain.bad", version: "1.0.0", input_schema: { type: "object", patternProperties: { "[": {} } } }, handler: () => ({}) });
export const invalid = defineAtomic({ nodeType: { node_type_id: "plain bad id", version: "1.0.0" }, handler: () => ({}) });
`,
    );
    const project = tmp("nf-project-");
    fs.mkdirSync(path.join(project, "node_modules", "@acme"), { recursive: true });
    fs.symlinkSync(dir, path.join(project, "node_modules", "@acme", "plain"), "dir");
    for (const options of [{ handlers: [dir] }, { discover: [project] }]) {
      const h = await loadHandlers({ ...options, logger: recordingLogger().logger });
      expect(h.definitions.map((d) => d.definition.nodeType.node_type_id)).toEqual(["plain.good"]);
      expect(h.failed.map((f) => [f.package, f.node_type_id])).toEqual([
        ["@acme/plain", "plain.bad"],
        ["@acme/plain", "plain bad id"],
      ]);
      expect(h.failed[0]!.reason).toMatch(/^node type plain\.bad@1\.0\.0: its input_schema does not compile: pattern "\[" at \/patternProperties\/\[ /);
      expect(h.failed[1]!.reason).toMatch(/^node type plain bad id@1\.0\.0 is not a valid NodeType: \/node_type_id must match pattern/);
      const served = await buildAtomicExecutor({ logger: false, handlers: h });
      try {
        const res = await served.inject({ method: "POST", url: "/v1/atomic-node-runs:execute", payload: { run_id: "r", node_run_id: "nr", node_type_ref: { node_type_id: "plain.good", version: "1.0.0" }, inputs: {} } });
        expect(res.json()).toMatchObject({ state: "completed", outputs: { ok: true } });
      } finally {
        await served.close();
      }
    }
  });
});

describe("loading a large package", () => {
  it("logs one line with the count before, and one with the time after", async () => {
    const many = Array.from({ length: 150 }, (_, i) => ({ id: `big.op${i}`, content: operation(`op${i}`, { node_type_id: `big.op${i}` }) }));
    const dir = setPackage("@acme/big", many, { files: false });
    const { lines, logger } = recordingLogger();
    const h = await loadHandlers({ handlers: [dir], logger });
    expect(h.served).toHaveLength(150);
    const progress = lines.filter((l) => l.obj.progress === true).map((l) => l.msg);
    expect(progress).toHaveLength(2);
    expect(progress[0]).toBe("loading 150 node types from @acme/big …");
    expect(progress[1]).toMatch(/^loaded 150 node types from @acme\/big in \d+ ms$/);
    // One line for the set, not one per node type.
    expect(lines.filter((l) => l.msg === "handler set loaded")).toEqual([expect.objectContaining({ obj: expect.objectContaining({ node_types: 150, package: "@acme/big" }) })]);
  });
});

describe("sets in memory", () => {
  it("handlersFromDefinitions serves a set, and withDefinitions keeps a loaded set while adding definitions", async () => {
    const dir = setDirectory(tmp("nf-dir-"), members("listPets", "getPet"));
    const set = defineAtomicSet({ directory: dir, handler: (_i, ctx) => ({ operation: ctx.nodeType.node_type_id }) });
    const h = handlersFromDefinitions([set, defineAtomic({ nodeType: { node_type_id: "mem.one", version: "1.0.0" }, handler: () => ({}) })]);
    expect(h.served.map((s) => s.node_type_id)).toEqual(["mem.one", "petstore.listPets", "petstore.getPet"]);
    expect(h.find("petstore.getPet", "1.0.0")!.definition.nodeType.description).toBe("The getPet operation");

    const pkg = setPackage("@acme/petstore", members("listPets"));
    const loaded = await loadHandlers({ handlers: [pkg], logger: recordingLogger().logger });
    const extra = defineAtomic({ nodeType: { node_type_id: "mem.two", version: "1.0.0" }, handler: () => ({}) });
    const merged = withDefinitions(loaded, [extra]);
    expect(merged.served.map((s) => s.node_type_id).sort()).toEqual(["mem.two", "petstore.listPets"]);
    expect(merged.find("petstore.listPets", "1.0.0")).toBeDefined();
    const clash = defineAtomic({ nodeType: { node_type_id: "petstore.listPets", version: "1.0.0" }, handler: () => ({}) });
    expect(() => withDefinitions(loaded, [clash])).toThrow(HandlerLoadError);
    expect(() => withDefinitions(loaded, [clash])).toThrow(/node type petstore\.listPets@1\.0\.0 is defined twice/);
  });
});

/** A fastify-like logger that keeps info and error lines (what registration writes). */
function registrationLogger() {
  const info: string[] = [];
  const errors: string[] = [];
  const logger = {
    info: (_obj: object, msg?: string) => void info.push(msg ?? ""),
    warn: () => undefined,
    error: (_obj: object, msg?: string) => void errors.push(msg ?? ""),
    debug: () => undefined,
    trace: () => undefined,
    fatal: () => undefined,
    child: () => logger,
    level: "info",
    silent: () => undefined,
  };
  return { info, errors, logger: logger as never };
}

describe("registration in batches", () => {
  const opened: FastifyInstance[] = [];
  afterAll(async () => {
    for (const a of opened.reverse()) await a.close();
  });

  async function registry(options: { batch?: boolean; maxBodyBytes?: number } = {}) {
    const batches: Array<{ items: number; pulledBefore: number }> = [];
    let pulled = 0;
    const app = await buildNodeRegistry({
      logger: false,
      dbPath: path.join(tmp("nf-reg-"), "registry.db"),
      ...(options.maxBodyBytes ? { limits: { maxBodyBytes: options.maxBodyBytes } } : {}),
    });
    app.addHook("preHandler", async (req, reply) => {
      if (req.method === "POST" && req.url === "/v1/node-types:batch") {
        if (options.batch === false) return reply.code(405).send({ error: { code: "method_not_allowed", message: "POST is not allowed on /v1/node-types:batch" } });
        batches.push({ items: (req.body as { node_types: unknown[] }).node_types.length, pulledBefore: pulled });
      }
    });
    const base = await listening(app);
    opened.push(app);
    /** NodeTypes as a stream that counts how many were read. */
    const stream = (nodeTypes: NodeType[]): NodeTypeStream => ({
      count: nodeTypes.length,
      *[Symbol.iterator]() {
        for (const nt of nodeTypes) {
          pulled++;
          yield nt;
        }
      },
    });
    return { app, base, batches, stream };
  }

  const types = (n: number) => Array.from({ length: n }, (_, i) => operation(`op${i}`, { node_type_id: `scale.op${i}` }) as unknown as NodeType);

  async function register(base: string, nodeTypes: NodeType[] | NodeTypeStream, options: { batchSize?: number; batchBytes?: number } = {}) {
    const log = registrationLogger();
    const reg = new RegistryRegistration({ registryUrl: base, kind: "atomic", nodeTypes, logger: log.logger, executorInstanceId: "scale-1", initialRetryDelayMs: 10, ...options });
    reg.start({ host: "127.0.0.1", port: 9 });
    await reg.settled();
    await reg.stop();
    return { reg, ...log };
  }

  it("publishes in batches, reading the node types batch by batch, logs progress, then registers the executor", async () => {
    const r = await registry();
    const { reg, info } = await register(r.base, r.stream(types(7)), { batchSize: 3 });
    expect(reg.check()).toMatchObject({ status: "ok", details: { node_types: 7, published: 7 } });
    expect(r.batches.map((b) => b.items)).toEqual([3, 3, 1]);
    // When a batch is sent, only that batch (and one node type that waits for the next) has been read.
    r.batches.forEach((b, i) => expect(b.pulledBefore).toBeLessThanOrEqual((i + 1) * 3 + 1));
    expect(info.filter((m) => m.startsWith("published "))).toEqual(["published 3 of 7 node types", "published 6 of 7 node types", "published 7 of 7 node types"]);
    const listed = await call(r.base, "GET", "/v1/node-types?q=scale.");
    expect(listed.body).toHaveLength(7);
    const executors = await call(r.base, "GET", "/v1/executors");
    expect(executors.body[0].node_types).toHaveLength(7);
  });

  it("keeps a batch under batchBytes", async () => {
    const r = await registry();
    await register(r.base, types(6), { batchSize: 200, batchBytes: 1200 });
    expect(r.batches.length).toBeGreaterThan(1);
    expect(r.batches.reduce((n, b) => n + b.items, 0)).toBe(6);
  });

  it("halves a batch the registry finds too large (413)", async () => {
    const r = await registry({ maxBodyBytes: 2048 });
    const { reg } = await register(r.base, types(8), { batchSize: 8, batchBytes: 1024 * 1024 });
    expect(reg.check()).toMatchObject({ status: "ok", details: { published: 8 } });
    // The 413s never reach a handler; what did is what fit.
    expect(r.batches.reduce((n, b) => n + b.items, 0)).toBe(8);
    expect(Math.max(...r.batches.map((b) => b.items))).toBeLessThan(8);
  });

  it("reports a node type the registry refuses, leaves it out of the registration, and registers the others", async () => {
    const r = await registry();
    const all = types(5);
    expect((await call(r.base, "POST", "/v1/node-types", { node_type: { ...all[2], description: "someone else's" } })).status).toBe(200);
    const badSchema = { ...all[4]!, input_schema: { type: "objekt" } } as unknown as NodeType;
    const { reg, errors } = await register(r.base, [...all.slice(0, 4), badSchema], { batchSize: 10 });
    const check = reg.check();
    expect(check.status).toBe("degraded");
    expect(check.message).toMatch(/^registered, but the registry refused 2 node type\(s\), which are not registered: /);
    expect(check.details!.problems).toEqual([
      expect.stringMatching(/^scale\.op4@1\.0\.0: invalid_request: \/input_schema is not a compilable JSON Schema/),
      expect.stringMatching(/^scale\.op2@1\.0\.0: node_type_version_conflict: published already with different content/),
    ]);
    expect(errors).toHaveLength(2);
    const executors = await call(r.base, "GET", "/v1/executors");
    expect(executors.body[0].node_types.map((t: { node_type_id: string }) => t.node_type_id).sort()).toEqual(["scale.op0", "scale.op1", "scale.op3"]);
    expect((await call(r.base, "GET", "/v1/node-types/scale.op3")).status).toBe(200);
  });

  it("publishes one by one to a registry without the batch endpoint", async () => {
    const r = await registry({ batch: false });
    const { reg, info } = await register(r.base, types(4), { batchSize: 2 });
    expect(reg.check()).toMatchObject({ status: "ok", details: { published: 4 } });
    expect(info).toContain("the node registry has no POST /v1/node-types:batch; publishing node types one by one");
    expect((await call(r.base, "GET", "/v1/node-types?q=scale.")).body).toHaveLength(4);
  });

  it("an executor serving a set publishes its members from their files and registers them", async () => {
    const r = await registry();
    const dir = setPackage("@acme/petstore", [...members("listPets", "getPet"), { id: "petstore.broken", content: "{" }]);
    const handlers = await loadHandlers({ handlers: [dir], logger: recordingLogger().logger });
    const app = await buildAtomicExecutor({ logger: false, handlers, registryUrl: r.base, executorInstanceId: "set-exec" });
    opened.push(app);
    const base = await listening(app);
    const registration = await until("registration", async () => {
      const res = await call(base, "GET", "/v1/health");
      const c = (res.body.checks as Array<{ name: string; status: string; details: Record<string, unknown> }>).find((x) => x.name === "registry_registration")!;
      return c.status === "ok" ? c : undefined;
    });
    expect(registration.details).toMatchObject({ node_types: 3, published: 2 });
    expect((await call(r.base, "GET", "/v1/node-types/petstore.getPet")).body).toEqual(operation("getPet"));
    const me = (await call(r.base, "GET", "/v1/executors")).body.find((e: { executor_instance_id: string }) => e.executor_instance_id === "set-exec");
    expect(me.node_types.map((t: { node_type_id: string }) => t.node_type_id)).toEqual(["petstore.listPets", "petstore.getPet"]);
    // The broken member was found while publishing, and is reported.
    const check = await handlersCheck(base);
    expect(check.details.failed).toEqual([expect.objectContaining({ node_type_id: "petstore.broken", reason: expect.stringMatching(/is not valid JSON/) })]);
    expect(check.details.count).toBe(2);
    // What `fabric node-types ls` tells about it.
    const client = new RegistryClient(r.base);
    try {
      const report = await servingReport(client, await client.listAll());
      expect(report.warnings).toEqual([
        expect.stringMatching(
          new RegExp(`^! ${base.replace(/[.]/g, "\\.")} could not load @acme/petstore: node type petstore\\.broken@1\\.0\\.0: its NodeType file petstore\\.broken\\.json is not valid JSON: .* \\(its other node types are served\\)$`),
        ),
      ]);
      expect(report.servedState(operation("getPet") as unknown as NodeType)).toBe("yes");
    } finally {
      await client.close();
    }
  });
});
