import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { buildNodeRegistry } from "../../core/src/services/node-registry/index.js";

// The docs page in a real browser (Debian's chromium, as the console's tests use): it renders the registry's
// operations from assets the service serves itself, under its Content-Security-Policy. The policy allows nothing from
// another origin, so a page that needed the network would show a violation here.
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** The page's DOM after its scripts ran, and what the browser logged (console messages and CSP reports). */
function render(url: string): Promise<{ dom: string; log: string }> {
  return new Promise((resolve, reject) => {
    const profile = mkdtempSync(path.join(os.tmpdir(), "nf-docs-chromium-"));
    const args = ["--headless", "--no-sandbox", "--disable-gpu", `--user-data-dir=${profile}`, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", url];
    const child = spawn(CHROMIUM, args, { stdio: ["ignore", "pipe", "pipe"] });
    let dom = "";
    let log = "";
    child.stdout.on("data", (b: Buffer) => (dom += b.toString()));
    child.stderr.on("data", (b: Buffer) => (log += b.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", () => {
      clearTimeout(timer);
      resolve({ dom, log });
    });
  });
}

describe("the docs page in a browser", () => {
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    app = await buildNodeRegistry({ logger: false, dbPath: ":memory:" });
    await app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await app?.close();
  });

  it("renders every operation offline, with no script the policy refuses", async () => {
    const { dom, log } = await render(`${base}/docs`);
    expect(dom).toContain("NodeFabric node-registry");
    for (const p of ["/v1/node-types", "/v1/node-types/{node_type_id}", "/v1/executors", "/v1/health"]) expect(dom).toContain(`data-path="${p}"`);
    const console = log.split("\n").filter((l) => l.includes(":CONSOLE"));
    // Swagger UI's bundle tries one inline style at load; anything else the policy refuses would be a regression.
    const refused = console.filter((l) => /Content Security Policy|Refused to|Failed to load/i.test(l) && !/Applying inline style violates/.test(l));
    expect(refused).toEqual([]);
  }, 90_000);
});
