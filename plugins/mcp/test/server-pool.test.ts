/**
 * The MCP servers reused across requests (src/server-pool.ts), through the SDK's own serving entry: an instance serves
 * one exchange at a time, there are never more of an era than its exchanges in flight at once, and an instance given
 * back holds nothing of the caller it served. The last is checked field by field against a new instance, so an SDK
 * upgrade that keeps more per connection fails here rather than leaking one caller's data into another's request.
 *
 * The exchanges used (initialize, notifications, ping, server/discover) never reach the catalogue, the gateway or
 * Selection, so those are built pointing nowhere.
 */
import { describe, it, expect, beforeAll } from "vitest";
import type * as Sdk from "@modelcontextprotocol/server";
import { Catalogue, GatewayCalls, type CallerInfo } from "@nodefabric/core";
import { serverFactory, serverPool, type NodeFabricServer } from "../src/mcp-server.js";
import type { ServerPool, Exchange } from "../src/server-pool.js";
import type { ServerDeps } from "../src/server-deps.js";
import { runTasks } from "../src/tasks.js";

let sdk: typeof Sdk;
let pool: ServerPool<NodeFabricServer>;
let handler: Sdk.McpHttpHandler;

const URL_ = "http://127.0.0.1:9/mcp";
const JSON_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };
const MODERN_META = (name: string) => ({
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name, version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": { elicitation: {}, extensions: { "io.modelcontextprotocol/tasks": {} } },
});

function caller(name: string): CallerInfo {
  return { headers: {}, digest: name, mayRun: true, principal: { sub: name, scopes: new Set() } };
}

/** Serves one message as the route does, as `who`, and reads the answer to its end (so the exchange is over). */
async function serve(who: string, message: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string; exchange: Exchange }> {
  const exchange: Exchange = { caller: caller(who) };
  const web = new Request(URL_, { method: "POST", headers: { ...JSON_HEADERS, ...headers } });
  const res = await handler.fetch(web, { authInfo: { token: "", clientId: who, scopes: [], extra: exchange as never }, parsedBody: message });
  const text = await res.text();
  // The SDK closes a finished exchange's transport a moment after its answer.
  await new Promise((r) => setImmediate(r));
  return { status: res.status, text, exchange };
}

/** What an instance holds, comparable: values as they are, functions and handler tables by name only. */
function stateOf(server: NodeFabricServer): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(server)) {
    if (k === "serving") continue;
    if (typeof v === "function") out[k] = "function";
    else if (v instanceof Map) out[k] = [...v.entries()].map(([key, value]) => [key, typeof value === "function" ? "function" : value]);
    else if (v instanceof Set) out[k] = [...v];
    else out[k] = v;
  }
  return out;
}

beforeAll(async () => {
  sdk = await import("@modelcontextprotocol/server");
  const { AjvJsonSchemaValidator } = await import("@modelcontextprotocol/server/validators/ajv");
  const deps = {
    sdk,
    validator: new AjvJsonSchemaValidator(),
    catalogue: new Catalogue({ registryUrl: () => "http://127.0.0.1:9", token: async () => undefined, include: [], exclude: [], versions: {}, refreshMs: 2000 }),
    calls: new GatewayCalls(undefined as never),
    version: "0.0.0-test",
    pageSize: 100,
    mode: "tools",
    waitSeconds: 30,
    progressIntervalMs: 100,
    taskAfterSeconds: 1,
    listTtlMs: 2000,
    inflight: new Map(),
    tasks: undefined as never,
    search: undefined as never,
  } as ServerDeps;
  deps.tasks = runTasks(deps);
  pool = serverPool(deps);
  handler = sdk.createMcpHandler(serverFactory(pool), { legacy: "stateless" });
});

describe("MCP servers reused across requests", () => {
  it("serves one 2025-era request after another on one instance, and gives it back after each", async () => {
    const before = pool.size().legacy.built;
    for (const who of ["alice", "bob", "alice"]) {
      const init = await serve(who, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: { sampling: {} }, clientInfo: { name: who, version: "1" } } });
      expect(init.status).toBe(200);
      expect(init.text).toContain('"protocolVersion":"2025-11-25"');
      expect(init.exchange.ended).toBe(true);
      const note = await serve(who, { jsonrpc: "2.0", method: "notifications/initialized" }, { "mcp-protocol-version": "2025-11-25" });
      expect(note.status).toBe(202);
      expect(note.exchange.ended).toBe(true);
    }
    expect(pool.size().legacy.built - before).toBeLessThanOrEqual(1);
    expect(pool.size().legacy.idle).toBe(pool.size().legacy.built);
  });

  it("builds no more instances of an era than its exchanges in flight at once", async () => {
    const ping = (i: number) => serve(`c${i}`, { jsonrpc: "2.0", id: i, method: "ping" }, { "mcp-protocol-version": "2025-11-25" });
    const answers = await Promise.all([0, 1, 2, 3, 4].map(ping));
    for (const a of answers) expect(a.status).toBe(200);
    const { built, idle } = pool.size().legacy;
    expect(built).toBeGreaterThanOrEqual(1);
    expect(built).toBeLessThanOrEqual(5);
    expect(idle).toBe(built);
  });

  it("serves 2026-07-28 requests on instances of their own era, and gives them back", async () => {
    for (const who of ["alice", "bob"]) {
      const r = await serve(who, { jsonrpc: "2.0", id: 7, method: "server/discover", params: { _meta: MODERN_META(who) } }, { "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover" });
      expect(r.status, r.text).toBe(200);
      expect(r.text).toContain("2026-07-28");
      expect(r.exchange.ended).toBe(true);
    }
    expect(pool.size().modern.built).toBe(1);
    expect(pool.size().modern.idle).toBe(1);
  });

  it("gives back an instance holding nothing of the callers it served: field by field what a new one holds", async () => {
    // The instances that served the callers above are held, so that one exchange of another caller, with another
    // identity and other capabilities, is served by a new instance; each is then compared with it, all idle.
    // (A new instance is compared after an exchange of its own: the entry sets up what an era needs on every
    // instance it serves, the same for every caller, such as the 2026-07-28 server/discover handler.)
    const exchanges = {
      legacy: () => serve("probe", { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: { roots: {} }, clientInfo: { name: "probe", version: "9" } } }),
      modern: () => serve("probe", { jsonrpc: "2.0", id: 7, method: "server/discover", params: { _meta: { ...MODERN_META("probe"), "io.modelcontextprotocol/clientCapabilities": {} } } }, { "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover" }),
    };
    for (const era of ["legacy", "modern"] as const) {
      const used: NodeFabricServer[] = [];
      while (pool.size()[era].idle > 0) used.push(pool.acquire(era, { caller: caller("holder") }));
      expect(used.length).toBeGreaterThan(0);
      const built = pool.size()[era].built;
      expect((await exchanges[era]()).status).toBe(200);
      expect(pool.size()[era].built).toBe(built + 1);
      const fresh = pool.acquire(era, { caller: caller("holder") });
      expect(used).not.toContain(fresh);
      for (const u of used) {
        u.release();
        expect(stateOf(u)).toEqual(stateOf(fresh));
      }
      fresh.release();
    }
  });

  it("lets a late close() of a 2025-era exchange's instance reach nothing once it serves another exchange", async () => {
    // The SDK's stateless 2025 leg closes its transport, then the instance, and does both again if the request aborts
    // after its stream ended; by then the instance may serve someone else.
    const first = await serve("early", { jsonrpc: "2.0", id: 1, method: "ping" }, { "mcp-protocol-version": "2025-11-25" });
    expect(first.exchange.ended).toBe(true);
    const exchange: Exchange = { caller: caller("later") };
    const s = pool.acquire("legacy", exchange);
    await s.close();
    expect(s.serving).toBe(exchange);
    expect(exchange.ended).toBeUndefined();
    s.release();
    expect(exchange.ended).toBe(true);
  });

  it("gives back an instance the SDK never connected (a closed subscriptions/listen probe) once, not twice", async () => {
    const exchange: Exchange = { caller: caller("listener") };
    const s = pool.acquire("modern", exchange);
    const idle = pool.size().modern.idle;
    await s.close();
    await s.close();
    expect(exchange.ended).toBe(true);
    expect(pool.size().modern.idle).toBe(idle + 1);
    expect(pool.acquire("modern", { caller: caller("next") })).toBe(s);
    s.release();
  });
});
