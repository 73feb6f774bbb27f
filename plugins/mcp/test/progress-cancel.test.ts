/**
 * Progress and cancellation with the official client: run events become notifications/progress (rising, rate
 * limited), and a client's cancel cancels the run, in each era.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { connect, startMcpFabric, type Era, type McpFabric } from "./support/mcp-fabric.js";

let f: McpFabric;
beforeAll(async () => {
  f = await startMcpFabric({ mcp: { progressIntervalMs: 50 } });
}, 30_000);
afterAll(async () => {
  await f?.close();
});

interface RunRow {
  run_id: string;
  state: string;
  extensions?: Record<string, unknown>;
}

async function sleepRuns(): Promise<RunRow[]> {
  return (await (await fetch(`${f.gateway}/v1/runs?node_type_id=demo.sleep&limit=100`)).json()) as RunRow[];
}

describe.each(["2025-11-25", "2026-07-28"] as Era[])("era %s", (era) => {
  it("sends rising progress notifications while the run goes on", async () => {
    const client = await connect(f.mcpUrl, era);
    const seen: { progress: number; message?: string }[] = [];
    const result = await client.callTool({ name: "demo.sleep", arguments: { ms: 300 } }, { onprogress: (p: { progress: number; message?: string }) => seen.push(p) } as never);
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ slept_ms: 300 });
    expect(seen.length).toBeGreaterThanOrEqual(1);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.progress).toBeGreaterThan(seen[i - 1]!.progress);
    expect(seen.some((p) => /NodeRun .* (started|ended)/.test(p.message ?? ""))).toBe(true);
    await client.close();
  });

  it("a cancel from the client cancels the run", async () => {
    const client = await connect(f.mcpUrl, era);
    const before = new Set((await sleepRuns()).map((r) => r.run_id));
    const ac = new AbortController();
    const call = client.callTool({ name: "demo.sleep", arguments: { ms: 20_000 } }, { signal: ac.signal } as never);
    let started: RunRow | undefined;
    for (let i = 0; i < 100 && !started; i++) {
      await new Promise((r) => setTimeout(r, 50));
      started = (await sleepRuns()).find((r) => !before.has(r.run_id));
    }
    expect(started).toBeDefined();
    ac.abort("enough");
    await expect(call).rejects.toBeDefined();
    let state = "";
    for (let i = 0; i < 100 && state !== "canceled"; i++) {
      await new Promise((r) => setTimeout(r, 50));
      state = ((await (await fetch(`${f.gateway}/v1/runs/${started!.run_id}`)).json()) as RunRow).state;
    }
    expect(state).toBe("canceled");
    await client.close();
  });
});
