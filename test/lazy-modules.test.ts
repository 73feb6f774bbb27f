/**
 * What a fabric does not load until it needs it (docs/performance.md, "Where the CPU goes"): the OpenTelemetry SDK and
 * exporters (only when tracing is on), the docs page (@fastify/swagger-ui and its static file server, at the page's
 * first request), Cedar (only for a policy file; the built-in policy allows everything without it) and the A2A SDK
 * (at the A2A server's first request). A fabric is started in a child process whose module loads are recorded
 * (test/fixtures/lazy-modules/), so no other test's imports count.
 */
import { describe, it, expect } from "vitest";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const fixtures = fileURLToPath(new URL("./fixtures/lazy-modules/", import.meta.url));

describe("modules loaded on demand", () => {
  it("a fabric without tracing, a policy file, a docs request or an A2A request loads no OpenTelemetry SDK, docs page, Cedar or A2A SDK, and each loads when needed", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-lazy-"));
    const log = path.join(dir, "loads.log");
    writeFileSync(log, "");
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("OTEL_") && k !== "FABRIC_METRICS_PORT"));
    try {
      const { stdout } = await promisify(execFile)(process.execPath, ["--import", path.join(fixtures, "register.mjs"), path.join(fixtures, "child.mjs")], {
        env: { ...env, LOAD_LOG: log },
        timeout: 90_000,
      });
      const out = JSON.parse(stdout.trim().split("\n").at(-1)!);
      // The fabric works as before: a run completes, the telemetry plugin's metrics answer, the docs page is served.
      expect(out.run).toEqual({ status: 200, state: "completed" });
      expect(out.metrics).toBe(200);
      expect(out.docs).toEqual({ status: 200, html: true });
      expect(out.started).toEqual([]);
      expect(out.afterDocs).toEqual(["swagger-ui"]);
      expect(out.afterPolicyFile).toEqual(["swagger-ui", "cedar"]);
      // The A2A server loads its SDK on its first request, not when the fabric starts.
      expect(out.card).toBe(200);
      expect(out.afterCard).toEqual(["swagger-ui", "cedar", "a2a-sdk"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
