// The scale check of issue 11 as a test: test/bench/atomic-set-scale.mjs generates a package of 1,000 node types in
// one defineAtomicSet (a few KB each), serves it from an Atomic Executor registering with a Node Registry, and
// measures. The bounds here are generous (the targets are healthy under 5 s and under 300 MB); run the script by hand
// for the figures.
import { describe, it, expect } from "vitest";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";

const SCRIPT = fileURLToPath(new URL("../bench/atomic-set-scale.mjs", import.meta.url));

describe("a package of 1,000 generated node types", () => {
  it("is healthy in seconds, registered in batches, and served in bounded memory", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [SCRIPT, "--count", "1000", "--executions", "300", "--json"], { timeout: 170_000, maxBuffer: 1024 * 1024 });
    const r = JSON.parse(stdout.trim().split("\n").at(-1)!);
    expect(r.node_types).toBe(1000);
    expect(r.avg_node_type_bytes).toBeGreaterThan(2000);
    expect(r.progress[0]).toBe("loading 1,000 node types from @acme/scale-api …");
    expect(r.healthy_ms).toBeLessThan(10_000);
    expect(r.registered_ms).toBeLessThan(60_000);
    expect(r.rss_peak_mb).toBeLessThan(450);
    expect(r.execution_failures).toBe(0);
    // A member's first execution reads its file and compiles its schemas; later ones do neither.
    expect(r.warm_execution_p50_ms).toBeLessThan(r.first_execution_p50_ms);
  }, 180_000);
});
