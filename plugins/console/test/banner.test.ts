/**
 * `fabric dev` with the console, as a user runs it (the built CLI as a child process): the start banner names the
 * console's URL, and that URL serves the page.
 */
import { describe, it, expect, afterAll } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startFabricProcess, type FabricProcess } from "../../../test/e2e/fabric-cli.js";
import { call } from "../../../core/test/support/gateway-http.js";

const repo = fileURLToPath(new URL("../../..", import.meta.url));
const pluginDir = fileURLToPath(new URL("..", import.meta.url));

describe("fabric dev with the console plugin", () => {
  let fabric: FabricProcess | undefined;
  afterAll(async () => {
    await fabric?.stop();
  });

  it("prints the console's URL in its banner, and serves the page there", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-console-banner-"));
    fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", dataDir, "--plugin", pluginDir], { cwd: repo });
    const gateway = fabric.urls["run-gateway"]!;
    let line: RegExpExecArray | null = null;
    for (let i = 0; i < 100 && !line; i++) {
      line = /^console: (http:\/\/\S+)$/m.exec(fabric.output());
      if (!line) await new Promise((r) => setTimeout(r, 50));
    }
    expect(line?.[1]).toBe(`${gateway}/console/`);
    // `fabric dev` also adds the MCP and A2A servers, installed in this repository.
    expect(fabric.output()).toMatch(/^plugins: @nodefabric\/plugin-console@0\.1\.0, @nodefabric\/plugin-mcp@0\.1\.0, @nodefabric\/plugin-a2a@0\.1\.0$/m);
    const page = await call("GET", line![1]!);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<div id="app"></div>');
  });

  it("is served by default: `fabric dev` in an empty folder, naming no plugin, finds it beside core", async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), "nf-console-default-"));
    const dev = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", path.join(empty, ".fabric")], { cwd: empty });
    try {
      const gateway = dev.urls["run-gateway"]!;
      let line: RegExpExecArray | null = null;
      for (let i = 0; i < 100 && !line; i++) {
        line = /^console: (http:\/\/\S+)$/m.exec(dev.output());
        if (!line) await new Promise((r) => setTimeout(r, 50));
      }
      expect(line?.[1]).toBe(`${gateway}/console/`);
      const page = await call("GET", line![1]!);
      expect(page.status).toBe(200);
      expect(page.text).toContain('<div id="app"></div>');
    } finally {
      await dev.stop();
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });
});

