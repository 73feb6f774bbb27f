/**
 * `npm create fabric-handler -- --from-mcp <url|command>`: a package made from the reference MCP server from npm
 * (server-everything), over Streamable HTTP and as a stdio command, whose own tests (replaying recorded exchanges
 * against a stand-in server on loopback) and typecheck pass as generated, offline.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCreateCommand } from "../src/create-command.js";
import { renderMcpPackage } from "../src/mcp-package.js";
import { linkGeneratedPackage } from "./generated-package-runner.js";

const SERVER_EVERYTHING = fileURLToPath(new URL("../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url));

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

let child: ChildProcess;
let url: string;
const root = mkdtempSync(path.join(os.tmpdir(), "cfh-mcp-"));

beforeAll(async () => {
  const port = await freePort();
  child = spawn(process.execPath, [SERVER_EVERYTHING, "streamableHttp"], { env: { PATH: process.env.PATH ?? "", PORT: String(port) }, stdio: ["ignore", "ignore", "pipe"] });
  await new Promise<void>((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`server-everything did not start: ${log}`)), 15_000);
    child.stderr!.on("data", (d) => {
      log += d;
      if (/listening on port/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  url = `http://127.0.0.1:${port}/mcp`;
}, 30_000);
afterAll(() => {
  child?.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

describe("a package made from an MCP server over Streamable HTTP", () => {
  it("holds one node type per tool as data, and its own tests pass as generated", async () => {
    const made = await renderMcpPackage({ packageName: "everything-tools", source: url });
    const paths = made.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(["package.json", "src/index.ts", "node-types/index.json", "test/exchanges.json", "test/handler.test.ts", "README.md", "tsconfig.json"]));
    expect(made.nodeTypeIds).toEqual(expect.arrayContaining(["everything-tools.echo", "everything-tools.get-sum"]));
    const manifest = JSON.parse(made.files.find((f) => f.path === "package.json")!.content);
    expect(manifest.dependencies).toEqual({ "@nodefabric/handler-mcp": "^0.1.0" });
    expect(manifest.devDependencies["@modelcontextprotocol/server"]).toBe("^2.4.0");
    expect(manifest.files).toContain("node-types");
    const echo = JSON.parse(made.files.find((f) => f.path === "node-types/echo.json")!.content);
    expect(echo.extensions["nodefabric.mcp"]).toMatchObject({ url, tool: "echo" });
    expect(echo.extensions["nodefabric.implementation"]).toBeUndefined();

    const pkg = linkGeneratedPackage(made.files);
    try {
      const tested = await pkg.test();
      expect(tested.code, tested.output).toBe(0);
      // One replay per tool, and the two checks of what the server may do wrong (a changed tool, a tool error).
      expect(tested.output).toMatch(new RegExp(`Tests\\s+${made.nodeTypeIds.length + 2} passed`));
      // Its typecheck and build run in test/e2e/mcp-import-package.test.ts, after a real npm install.
    } finally {
      pkg.remove();
    }
  }, 120_000);
});

describe("a package made from a stdio command", () => {
  it("starts the server itself, names no command in its node types, and passes its tests offline", async () => {
    const made = await renderMcpPackage({ packageName: "@acme/everything-stdio", source: `"${process.execPath}" ${SERVER_EVERYTHING} stdio`, include: ["echo", "get-sum"] });
    expect(made.nodeTypeIds).toEqual(["everything-stdio.echo", "everything-stdio.get-sum"]);
    const index = made.files.find((f) => f.path === "src/index.ts")!.content;
    expect(index).toContain("new StdioServerPool");
    expect(index).toContain(JSON.stringify(SERVER_EVERYTHING));
    for (const f of made.files.filter((f) => f.path.startsWith("node-types/") && f.path !== "node-types/index.json")) {
      const t = JSON.parse(f.content);
      expect(t.extensions["nodefabric.mcp"].server).toBe("everything-stdio");
      expect(f.content).not.toContain(SERVER_EVERYTHING);
    }
    const pkg = linkGeneratedPackage(made.files);
    try {
      const tested = await pkg.test();
      expect(tested.code, tested.output).toBe(0);
    } finally {
      pkg.remove();
    }
  }, 120_000);
});

describe("create-fabric-handler --from-mcp", () => {
  it("writes the package and says what to do next", async () => {
    const cwd = mkdtempSync(path.join(root, "cli-"));
    let stdout = "";
    let stderr = "";
    const code = await runCreateCommand(["ev-tools", "--from-mcp", url, "--include", "echo", "--yes"], {
      cwd,
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
      interactive: false,
    });
    expect(code, stderr).toBe(0);
    expect(stdout).toContain("Created ev-tools");
    expect(stdout).toContain("ev-tools.echo@1.0.0");
    expect(readdirSync(path.join(cwd, "ev-tools", "node-types")).sort()).toEqual(["echo.json", "index.json"]);
    expect(JSON.parse(readFileSync(path.join(cwd, "ev-tools", "package.json"), "utf8")).dependencies).toEqual({ "@nodefabric/handler-mcp": "^0.1.0" });
  }, 60_000);

  it("refuses --from-mcp with --from-openapi or a template, and a server that cannot be reached, changing nothing", async () => {
    const cwd = mkdtempSync(path.join(root, "cli-"));
    const run = async (argv: string[]) => {
      let stderr = "";
      const code = await runCreateCommand(argv, { cwd, stdout: { write: () => true }, stderr: { write: (t: string) => (stderr += t) }, interactive: false });
      return { code, stderr };
    };
    expect((await run(["x", "--from-mcp", url, "--from-openapi", "a.yaml"])).code).toBe(2);
    expect((await run(["x", "--from-mcp", url, "--template", "atomic"])).code).toBe(2);
    const port = await freePort();
    const gone = await run(["x", "--from-mcp", `http://127.0.0.1:${port}/mcp`, "--yes"]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/could not connect to the MCP server/);
    expect(readdirSync(cwd)).toEqual([]);
  }, 60_000);
});
