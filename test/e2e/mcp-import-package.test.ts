/**
 * `npm create fabric-handler -- --from-mcp <url>`, as a user runs it: the release published to a local registry,
 * the reference MCP server from npm (server-everything) on loopback, then in an empty folder `npm create`,
 * `npm install`, and the generated package's own `npm test`, which passes as generated with the server stopped
 * (it replays recorded exchanges against a stand-in MCP server on loopback).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLocalRegistry, repo, type LocalRegistry } from "./local-registry.mjs";
import { sh } from "./shell.js";

const SERVER_EVERYTHING = path.join(repo, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

let work: string;
let registry: LocalRegistry;
let everything: ChildProcess;
let url: string;

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-package-"));
  registry = await startLocalRegistry(path.join(work, "registry"));
  const released = await sh(`node scripts/release.mjs --publish --registry ${registry.url} --skip-build --skip-tests`, { cwd: repo, env: registry.env, timeoutMs: 300_000 });
  expect(released.output).toMatch(/@nodefabric\/handler-mcp/);
  const port = await freePort();
  everything = spawn(process.execPath, [SERVER_EVERYTHING, "streamableHttp"], { env: { PATH: process.env.PATH ?? "", PORT: String(port) }, stdio: ["ignore", "ignore", "pipe"] });
  await new Promise<void>((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`server-everything did not start: ${log}`)), 20_000);
    everything.stderr!.on("data", (d) => {
      log += d;
      if (/listening on port/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  url = `http://127.0.0.1:${port}/mcp`;
}, 400_000);

afterAll(async () => {
  everything?.kill("SIGKILL");
  await registry?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("npm create fabric-handler -- --from-mcp", () => {
  it("makes a package whose npm test passes as generated, with the server stopped", async () => {
    const author = path.join(work, "author");
    mkdirSync(author);
    const env = { ...registry.env, npm_config_yes: "true" };
    const created = await sh(`npm create fabric-handler@latest my-everything -- --from-mcp ${url} --yes`, { cwd: author, env, timeoutMs: 300_000 });
    expect(created.output).toContain("my-everything.echo@1.0.0");
    const dir = path.join(author, "my-everything");
    const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
    expect(manifest.dependencies).toHaveProperty("@nodefabric/handler-mcp");
    expect(JSON.stringify(manifest)).not.toContain("@nodefabric/core");
    await sh("npm install", { cwd: dir, env, timeoutMs: 400_000 });

    // The real server is not needed, and must not be called: stop it.
    everything.kill("SIGKILL");
    const tested = await sh("npm test", { cwd: dir, env, timeoutMs: 300_000 });
    // eslint-disable-next-line no-control-regex
    const output = tested.output.replace(/\u001b\[[0-9;]*m/g, "");
    const tools = JSON.parse(readFileSync(path.join(dir, "node-types/index.json"), "utf8")).node_types.length as number;
    expect(output).toMatch(new RegExp(`Tests\\s+${tools + 2} passed`));
    const typed = await sh("npm run typecheck && npm run build", { cwd: dir, env, timeoutMs: 300_000 });
    expect(typed.code).toBe(0);
  }, 900_000);
});
