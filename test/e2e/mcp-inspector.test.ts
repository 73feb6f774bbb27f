/**
 * The official MCP inspector's CLI (@modelcontextprotocol/inspector --cli) as a user's client of a real `fabric dev`'s
 * /mcp, in both protocol eras (`--protocol-era legacy`: 2025, initialize; `modern`: 2026-07-28, stateless): it lists
 * the node types as tools, schema for schema, and a call answers what the Run API answers for the same input.
 *
 *   npx vitest run test/e2e/mcp-inspector.test.ts
 *
 * The inspector needs Node >= 22.19: it runs on Node 24 from `.ci/node.sh 24`, installed into ~/.cache/nodefabric-e2e.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { call } from "../run-client.js";
import { runFabric } from "./fabric-cli.js";
import { INSPECTOR, ensureTool, runInspector } from "./support-mcp/tools.js";
import { repo as repoRoot, startMcpFabric, startRecordingProxy, startServerEverything, waitForNodeTypes, type McpFabric, type ReferenceServer } from "./support-mcp/servers.js";

const SLOW = 300_000;
const ERAS = ["legacy", "modern"] as const;

describe("the inspector CLI, against a reference server (server-everything over Streamable HTTP)", () => {
  let ref: ReferenceServer;
  beforeAll(async () => {
    await ensureTool(INSPECTOR);
    ref = await startServerEverything();
  }, SLOW);
  afterAll(async () => {
    await ref?.stop();
  });

  it("lists tools and calls one, answering JSON the harness reads", async () => {
    const list = await runInspector([ref.url, "--method", "tools/list"]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.json.result.tools.map((t: { name: string }) => t.name)).toContain("echo");
    const echo = await runInspector([ref.url, "--method", "tools/call", "--tool-name", "echo", "--tool-args-json", JSON.stringify({ message: "hi" })]);
    expect(echo.code, echo.stderr).toBe(0);
    expect(echo.json.result.content).toEqual([{ type: "text", text: "Echo: hi" }]);
    const missing = await runInspector([ref.url, "--method", "tools/call", "--tool-name", "no-such-tool"]);
    expect(missing.code).not.toBe(0);
    expect(missing.json.error.code).toBe("tool_not_found");
  }, SLOW);
});

describe("fabric dev's /mcp, through the official inspector CLI", () => {
  let f: McpFabric;
  beforeAll(async () => {
    await ensureTool(INSPECTOR);
    f = await startMcpFabric();
    await waitForNodeTypes(f.fabric.urls["node-registry"], ["demo.echo", "demo.fail", "test_simple_text"]);
  }, SLOW);
  afterAll(async () => {
    await f?.stop();
  });

  const nodeType = async (id: string) => {
    const r = await call("GET", `${f.fabric.urls["node-registry"]}/v1/node-types/${encodeURIComponent(id)}`);
    expect(r.status).toBe(200);
    return r.body;
  };

  /** The runs of a node type, as GET /v1/runs lists them. */
  const runsOf = async (id: string): Promise<any[]> => {
    const r = await call("GET", `${f.gateway}/v1/runs?node_type_id=${encodeURIComponent(id)}&limit=1000`);
    expect(r.status).toBe(200);
    return r.body;
  };

  it("runs the README's inspector commands as written, with this fabric's address for 8080's", async () => {
    // The README's block (under "Reach it from an agent over MCP"), line by line; test/readme.test.ts checks this file
    // holds each as written. The inspector is this harness's install of it, on Node 24, in place of npx's.
    const LIST = "npx @modelcontextprotocol/inspector --cli http://127.0.0.1:8080/mcp --transport http --method tools/list";
    const CALL = "npx @modelcontextprotocol/inspector --cli http://127.0.0.1:8080/mcp --transport http --method tools/call --tool-name demo.echo --tool-arg hello=world";
    const argsOf = (line: string) => line.replace("npx @modelcontextprotocol/inspector --cli ", "").replace("http://127.0.0.1:8080/mcp", f.mcp).split(" ");
    const list = await runInspector(argsOf(LIST));
    expect(list.code, `${list.stderr}\n${list.stdout}`).toBe(0);
    expect(list.json.result.tools.map((t: { name: string }) => t.name)).toContain("demo.echo");
    const echo = await runInspector(argsOf(CALL));
    expect(echo.code, `${echo.stderr}\n${echo.stdout}`).toBe(0);
    expect(echo.json.result.structuredContent).toEqual({ echo: { hello: "world" } });
  }, SLOW);

  for (const era of ERAS) {
    describe(`--protocol-era ${era}`, () => {
      it("speaks that era on the wire, and the fabric answers it", async () => {
        const proxy = await startRecordingProxy(f.mcp);
        try {
          const list = await runInspector([proxy.url, "--protocol-era", era, "--method", "tools/call", "--tool-name", "test_simple_text"]);
          expect(list.code, `${list.stderr}\n${list.stdout}`).toBe(0);
          expect(list.json.result.structuredContent).toEqual({ text: "This is a simple text response for testing." });
          const posts = proxy.requests.filter((r) => r.method === "POST");
          const rpc = posts.flatMap((r) => r.rpc);
          expect(rpc).toContain("tools/call");
          for (const r of posts) expect(r.status, JSON.stringify(r)).toBeLessThan(300);
          if (era === "legacy") {
            // 2025: the initialize handshake, at a dated 2025 version, then requests in the session it opened.
            expect(rpc[0]).toBe("initialize");
            expect(posts[0].bodyProtocolVersion).toMatch(/^2025-/);
          } else {
            // 2026-07-28: stateless, no initialize; every request names the version in its header.
            expect(rpc).not.toContain("initialize");
            for (const r of posts) expect(r.headers["mcp-protocol-version"], JSON.stringify(r)).toBe("2026-07-28");
          }
        } finally {
          await proxy.stop();
        }
      }, SLOW);

      it("lists the node types as tools: name, description and schemas exactly as the registry has them", async () => {
        const list = await runInspector([f.mcp, "--protocol-era", era, "--method", "tools/list"]);
        expect(list.code, `${list.stderr}\n${list.stdout}`).toBe(0);
        const tools: any[] = list.json.result.tools;
        const names = tools.map((t) => t.name);
        for (const id of ["demo.echo", "demo.sleep", "demo.fail", "test_simple_text", "json_schema_2020_12_tool"]) expect(names).toContain(id);
        // A deterministic order: the same list twice. With --strict, the inspector's schema portability check finds no
        // error-severity problem in any tool (it exits 6 if it does).
        const again = await runInspector([f.mcp, "--protocol-era", era, "--method", "tools/list", "--strict"]);
        expect(again.code, again.stderr).toBe(0);
        expect(again.stderr).toMatch(/\b0 errors\b/);
        expect(again.json.result.tools.map((t: { name: string }) => t.name)).toEqual(names);
        for (const id of ["demo.echo", "demo.fail", "json_schema_2020_12_tool"]) {
          const t = tools.find((x) => x.name === id);
          const nt = await nodeType(id);
          expect(t.description, id).toBe(nt.description);
          expect(t.inputSchema, id).toEqual(nt.input_schema);
          expect(t.outputSchema, id).toEqual(nt.output_schema);
          // demo.* are read-only by their gates.
          expect(t.annotations?.readOnlyHint, id).toBe(true);
        }
      }, SLOW);

      it("calls demo.echo: structuredContent is the run's outputs, as the Run API gives them for the same input, and the call is an ordinary run", async () => {
        const input = { greeting: "hello", n: 42, nested: { list: [1, "two", null], era } };
        const before = await runsOf("demo.echo");
        const viaMcp = await runInspector([f.mcp, "--protocol-era", era, "--method", "tools/call", "--tool-name", "demo.echo", "--tool-args-json", JSON.stringify(input)]);
        expect(viaMcp.code, `${viaMcp.stderr}\n${viaMcp.stdout}`).toBe(0);
        const result = viaMcp.json.result;
        expect(result.isError ?? false).toBe(false);

        // The call was one run of demo.echo, completed, listed by the Run API like any other.
        const after = await runsOf("demo.echo");
        const fresh = after.filter((r) => !before.some((b) => b.run_id === r.run_id));
        expect(fresh.map((r) => r.state)).toEqual(["completed"]);

        const nt = await nodeType("demo.echo");
        const viaApi = await call("POST", `${f.gateway}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.echo", version: nt.version }, input }, { prefer: "wait=20" });
        expect(viaApi.status).toBe(200);
        expect(viaApi.body.state).toBe("completed");
        const outputs = viaApi.body.extensions["nodefabric.outputs"];
        expect(outputs).toEqual({ echo: input });
        expect(result.structuredContent).toEqual(outputs);
        const mcpRun = await call("GET", `${f.gateway}/v1/runs/${fresh[0].run_id}`);
        expect(mcpRun.body.extensions["nodefabric.outputs"]).toEqual(outputs);
        // The same JSON in a text block, for clients that read text only.
        const texts = result.content.filter((c: { type: string }) => c.type === "text");
        expect(texts.length).toBeGreaterThan(0);
        expect(JSON.parse(texts[0].text)).toEqual(outputs);
      }, SLOW);

      it("calls demo.fail: a failed run is a tool error naming the error code and message", async () => {
        const viaMcp = await runInspector([
          f.mcp,
          "--protocol-era",
          era,
          "--method",
          "tools/call",
          "--tool-name",
          "demo.fail",
          "--tool-args-json",
          JSON.stringify({ code: "quota_exhausted", message: `no quota left (${era})` }),
        ]);
        const result = viaMcp.json?.result;
        expect(result, `${viaMcp.stderr}\n${viaMcp.stdout}`).toBeDefined();
        expect(result.isError).toBe(true);
        const text = result.content.map((c: { text?: string }) => c.text ?? "").join("\n");
        expect(text).toContain("quota_exhausted");
        expect(text).toContain(`no quota left (${era})`);
      }, SLOW);

      it("calls a tool with arguments its input schema refuses: a tool error, and no run of it starts", async () => {
        const before = await runsOf("demo.sleep");
        const bad = await runInspector([f.mcp, "--protocol-era", era, "--method", "tools/call", "--tool-name", "demo.sleep", "--tool-args-json", JSON.stringify({ ms: "soon" })]);
        const result = bad.json?.result;
        expect(result, `${bad.stderr}\n${bad.stdout}`).toBeDefined();
        expect(result.isError, bad.stdout).toBe(true);
        expect(result.content.map((c: { text?: string }) => c.text ?? "").join("\n")).toMatch(/ms/);
        expect((await runsOf("demo.sleep")).length).toBe(before.length);
      }, SLOW);
    });
  }
});

describe("fabric dev --auth: /mcp through the inspector CLI, with and without a token", () => {
  let f: McpFabric;
  const mint = async (scope: string) => {
    const r = await runFabric(["token", "mint", "--aud", "run-gateway", "--scope", scope, "--key", path.join(f.dataDir, "keys", "signing-key.json")]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  beforeAll(async () => {
    await ensureTool(INSPECTOR);
    f = await startMcpFabric({ handlers: ["@nodefabric/handler-demo"], args: ["--auth"] });
  }, SLOW);
  afterAll(async () => {
    await f?.stop();
  });

  for (const era of ERAS) {
    it(`--protocol-era ${era}: no token is auth_required; a runs:write token calls demo.echo; a runs:read token sees no tools`, async () => {
      // --stored-auth-only: a CI run never starts an interactive OAuth login; the 401 is reported as it is.
      const anonymous = await runInspector([f.mcp, "--protocol-era", era, "--method", "tools/list", "--stored-auth-only"]);
      expect(anonymous.code, `${anonymous.stderr}\n${anonymous.stdout}`).toBe(3);
      expect(anonymous.json?.error?.code).toBe("auth_required");

      const writer = await mint("runs:read runs:write");
      const input = { secure: true, era };
      const ok = await runInspector([f.mcp, "--protocol-era", era, "--method", "tools/call", "--tool-name", "demo.echo", "--tool-args-json", JSON.stringify(input), "--header", `Authorization: Bearer ${writer}`]);
      expect(ok.code, `${ok.stderr}\n${ok.stdout}`).toBe(0);
      expect(ok.json.result.structuredContent).toEqual({ echo: input });

      // Nothing on /mcp lets a token do what it could not do through the Run API: runs:read starts no runs.
      const reader = await mint("runs:read");
      const list = await runInspector([f.mcp, "--protocol-era", era, "--method", "tools/list", "--header", `Authorization: Bearer ${reader}`]);
      expect(list.code, `${list.stderr}\n${list.stdout}`).toBe(0);
      expect(list.json.result.tools).toEqual([]);
      const api = await call("POST", `${f.gateway}/v1/runs`, { root_node_type_ref: { node_type_id: "demo.echo", version: "1.0.0" }, input }, { authorization: `Bearer ${reader}` });
      expect(api.status).toBe(403);
    }, SLOW);
  }
});

describe("round trip: server-everything imported with `fabric node-types import --from-mcp`, served again through /mcp", () => {
  let ref: ReferenceServer;
  let f: McpFabric;
  let imported: string;
  const direct = (args: string[]) => runInspector([ref.url, ...args]);
  const via = (args: string[]) => runInspector([f.mcp, ...args]);

  beforeAll(async () => {
    await ensureTool(INSPECTOR);
    ref = await startServerEverything();
    // mcp.call reaches the server on loopback: the operator allows it, as anyone running MCP servers beside the fabric.
    f = await startMcpFabric({ handlers: ["@nodefabric/handler-mcp"], env: { FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32,::1/128" } });
    const r = await runFabric(["node-types", "import", "--from-mcp", ref.url, "--prefix", "everything", "--registry", f.fabric.urls["node-registry"]], { cwd: repoRoot });
    expect(r.code, r.stderr).toBe(0);
    imported = r.stdout;
  }, SLOW);
  afterAll(async () => {
    await f?.stop();
    await ref?.stop();
  });

  it("lists every imported tool again, with the server's description and input schema", async () => {
    const mine = await direct(["--method", "tools/list"]);
    const ours = await via(["--method", "tools/list"]);
    expect(mine.code, mine.stderr).toBe(0);
    expect(ours.code, ours.stderr).toBe(0);
    const served = new Map<string, any>(ours.json.result.tools.map((t: any) => [t.name, t]));
    const published = [...imported.matchAll(/^\s+everything\.(\S+)@1\.0\.0$/gm)].map((m) => m[1]);
    expect(published.length).toBeGreaterThan(5);
    for (const name of published) {
      const upstream = mine.json.result.tools.find((t: any) => t.name === name);
      const again = served.get(`everything.${name}`);
      expect(again, `everything.${name} is not served`).toBeDefined();
      expect(again.description, name).toBe(upstream.description);
      // The importer writes draft-07 schemas as 2020-12 (documented); the schema is otherwise the server's.
      const { $schema, ...rest } = upstream.inputSchema;
      expect($schema === undefined || /draft-07/.test($schema), name).toBe(true);
      expect(again.inputSchema, name).toEqual(rest);
      expect(again.annotations?.readOnlyHint ?? false, name).toBe(upstream.annotations?.readOnlyHint ?? false);
      expect(again.annotations?.destructiveHint ?? true, name).toBe(upstream.annotations?.destructiveHint ?? true);
    }
    // A tool left out would be named, with its reason (server-everything's task-only tool is now imported).
    for (const t of mine.json.result.tools) {
      if (!published.includes(t.name) && t.name !== "get-roots-list") expect(imported, t.name).toMatch(new RegExp(`^\\s+${t.name}: `, "m"));
    }
  }, SLOW);

  it("the imported node types equal the inspector's tools/list of the server, schema for schema, and runs give what its tools/call gives", async () => {
    const mine = await direct(["--method", "tools/list"]);
    const registry = f.fabric.urls["node-registry"];
    const types = (await call("GET", `${registry}/v1/node-types?q=everything.&limit=1000`)).body as any[];
    expect(types.length).toBeGreaterThan(5);
    for (const t of types) {
      const name = t.node_type_id.slice("everything.".length);
      const upstream = mine.json.result.tools.find((x: any) => x.name === name);
      expect(upstream, name).toBeDefined();
      expect(t.description, name).toBe(upstream.description);
      const { $schema, ...rest } = upstream.inputSchema;
      expect(t.input_schema, name).toEqual(rest);
      if (upstream.outputSchema) {
        const { $schema: _s, ...out } = upstream.outputSchema;
        expect(t.output_schema, name).toEqual(out);
      }
    }
    // A run of an imported tool gives what the inspector's tools/call gives: the content blocks, or the structured content.
    const cases = [
      ["echo", { message: "via the Run API" }],
      ["get-sum", { a: 20, b: 22 }],
      ["get-structured-content", { location: "New York" }],
    ] as const;
    for (const [tool, input] of cases) {
      const mineCall = await direct(["--method", "tools/call", "--tool-name", tool, "--tool-args-json", JSON.stringify(input)]);
      const run = await call("POST", `${f.gateway}/v1/runs`, { root_node_type_ref: { node_type_id: `everything.${tool}`, version: "1.0.0" }, input }, { prefer: "wait=20" });
      expect(run.body.state, `${tool}: ${JSON.stringify(run.body)}`).toBe("completed");
      const outputs = run.body.extensions["nodefabric.outputs"];
      const expected = mineCall.json.result;
      if (expected.structuredContent) expect(outputs, tool).toEqual(expected.structuredContent);
      else expect(outputs.content, tool).toEqual(expected.content);
    }
  }, SLOW);

  it("a tool with structured content: the call through the fabric answers what the server answers", async () => {
    const args = ["--method", "tools/call", "--tool-args-json", JSON.stringify({ location: "Chicago" })];
    const mine = await direct([...args, "--tool-name", "get-structured-content"]);
    const ours = await via([...args, "--tool-name", "everything.get-structured-content"]);
    expect(ours.code, `${ours.stderr}\n${ours.stdout}`).toBe(0);
    expect(ours.json.result.structuredContent).toEqual(mine.json.result.structuredContent);
    expect(ours.json.result.content).toEqual(mine.json.result.content);
    expect(ours.json.result.isError ?? false).toBe(false);
  }, SLOW);

  // A tool with content blocks only is served back as those blocks, with no outputSchema of mcp.call's wrapper.
  it("a content-only tool: the call through the fabric answers the server's content blocks", async () => {
    const ourList = await via(["--method", "tools/list"]);
    const theirList = await direct(["--method", "tools/list"]);
    for (const tool of ["echo", "get-sum"]) {
      const theirs = theirList.json.result.tools.find((t: { name: string }) => t.name === tool);
      const ours = ourList.json.result.tools.find((t: { name: string }) => t.name === `everything.${tool}`);
      expect(theirs.outputSchema, tool).toBeUndefined();
      expect(ours.outputSchema, tool).toBeUndefined();
    }
    for (const [tool, input] of [
      ["echo", { message: "round trip" }],
      ["get-sum", { a: 2, b: 40 }],
    ] as const) {
      const args = ["--method", "tools/call", "--tool-args-json", JSON.stringify(input)];
      const mine = await direct([...args, "--tool-name", tool]);
      const ours = await via([...args, "--tool-name", `everything.${tool}`]);
      expect(ours.code, `${ours.stderr}\n${ours.stdout}`).toBe(0);
      expect(ours.json.result.content, tool).toEqual(mine.json.result.content);
      expect(ours.json.result.structuredContent, tool).toEqual(mine.json.result.structuredContent);
    }
  }, SLOW);
});

describe("server-memory over stdio: imported, run, and served again through /mcp, against the inspector on the server itself", () => {
  const MEMORY = path.join(repoRoot, "node_modules/@modelcontextprotocol/server-memory/dist/index.js");
  let f: McpFabric;
  let dir: string;
  let imported: string;
  // The inspector starts its own server-memory (its own graph file), as a user checking the server directly would.
  const direct = (args: string[]) => runInspector(["node", MEMORY, "-e", `MEMORY_FILE_PATH=${path.join(dir, "direct.jsonl")}`, ...args]);
  const via = (args: string[]) => runInspector([f.mcp, ...args]);
  const strip = (schema: any) => {
    const { $schema, ...rest } = schema ?? {};
    return rest;
  };

  beforeAll(async () => {
    await ensureTool(INSPECTOR);
    dir = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-memory-"));
    // The operator names the stdio server in the executor's configuration; a node type never carries the command.
    const servers = path.join(dir, "servers.json");
    writeFileSync(servers, JSON.stringify({ servers: { memory: { command: process.execPath, args: [MEMORY], env: { MEMORY_FILE_PATH: path.join(dir, "fabric.jsonl") } } } }));
    f = await startMcpFabric({ handlers: ["@nodefabric/handler-mcp"], env: { FABRIC_MCP_SERVERS: servers } });
    const r = await runFabric(["node-types", "import", "--from-mcp", `${process.execPath} ${MEMORY}`, "--prefix", "memory", "--server-name", "memory", "--registry", f.fabric.urls["node-registry"]], {
      cwd: repoRoot,
      env: { MEMORY_FILE_PATH: path.join(dir, "import.jsonl") },
    });
    expect(r.code, r.stderr).toBe(0);
    imported = r.stdout;
  }, SLOW);
  afterAll(async () => {
    await f?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the imported node types equal the inspector's tools/list of the server, schema for schema", async () => {
    const mine = await direct(["--method", "tools/list"]);
    expect(mine.code, mine.stderr).toBe(0);
    const tools: any[] = mine.json.result.tools;
    expect(tools.length).toBeGreaterThan(5);
    const types = (await call("GET", `${f.fabric.urls["node-registry"]}/v1/node-types?q=memory.&limit=1000`)).body as any[];
    expect(types.map((t) => t.node_type_id).sort(), imported).toEqual(tools.map((t) => `memory.${t.name}`).sort());
    for (const t of tools) {
      const nt = types.find((x) => x.node_type_id === `memory.${t.name}`);
      expect(nt.description, t.name).toBe(t.description);
      expect(nt.input_schema, t.name).toEqual(strip(t.inputSchema));
      expect(nt.output_schema, t.name).toEqual(strip(t.outputSchema));
    }
  }, SLOW);

  it("through /mcp the inspector sees the same tools, and the same graph after the same calls", async () => {
    const mine = await direct(["--method", "tools/list"]);
    const ours = await via(["--method", "tools/list"]);
    expect(ours.code, ours.stderr).toBe(0);
    for (const t of mine.json.result.tools) {
      const again = ours.json.result.tools.find((x: any) => x.name === `memory.${t.name}`);
      expect(again, t.name).toBeDefined();
      expect(again.description, t.name).toBe(t.description);
      expect(again.inputSchema, t.name).toEqual(strip(t.inputSchema));
      expect(again.outputSchema, t.name).toEqual(strip(t.outputSchema));
    }
    const entities = { entities: [{ name: "Ada Lovelace", entityType: "person", observations: ["wrote the first program", "Analytical Engine"] }] };
    const relations = { relations: [{ from: "Ada Lovelace", to: "Analytical Engine", relationType: "programmed" }] };
    const steps: [string, object][] = [
      ["create_entities", entities],
      ["create_entities", { entities: [{ name: "Analytical Engine", entityType: "machine", observations: ["designed by Babbage"] }] }],
      ["create_relations", relations],
      ["read_graph", {}],
      ["search_nodes", { query: "Ada" }],
    ];
    for (const [tool, input] of steps) {
      const a = await direct(["--method", "tools/call", "--tool-name", tool, "--tool-args-json", JSON.stringify(input)]);
      const b = await via(["--method", "tools/call", "--tool-name", `memory.${tool}`, "--tool-args-json", JSON.stringify(input)]);
      expect(b.code, `${tool}: ${b.stderr}\n${b.stdout}`).toBe(0);
      expect(b.json.result.isError ?? false, tool).toBe(a.json.result.isError ?? false);
      expect(b.json.result.structuredContent, tool).toEqual(a.json.result.structuredContent);
      // The text block is the same JSON (the fabric writes it compact; the server pretty-prints it): notes G1.
      expect(JSON.parse(b.json.result.content[0].text), tool).toEqual(b.json.result.structuredContent);
    }
    // The fabric's calls went to the operator's server-memory: its own graph file holds what they wrote.
    expect(readFileSync(path.join(dir, "fabric.jsonl"), "utf8")).toContain("Ada Lovelace");
  }, SLOW);
});
