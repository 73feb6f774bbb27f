/**
 * Progress of an upstream MCP tool: server-everything (from npm, over Streamable HTTP on loopback) sends
 * notifications/progress while its trigger-long-running-operation runs; each becomes a node_run_progress event of
 * the run (progress, total, message), as an event stream shows it.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { validatorFor } from "@nodefabric/schemas";
import { call, mcpBacked, openFabric, outputsOf, startServerEverything, type ChildServer, type Json, type TestFabric } from "./mcp-fixtures.js";

const isEvent = validatorFor("run_event");
let f: TestFabric;
let everything: ChildServer;

beforeAll(async () => {
  [f, everything] = await Promise.all([openFabric(), startServerEverything()]);
}, 60_000);
afterAll(async () => {
  await f?.close();
  await everything?.stop();
});

async function eventsOf(runId: string): Promise<Json[]> {
  const res = await fetch(`${f.gateway}/v1/runs/${runId}/events?follow=false`);
  expect(res.status).toBe(200);
  return (await res.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

describe("upstream progress notifications", () => {
  for (const protocol of ["auto", "legacy"] as const) {
    it(`become node_run_progress events of the run (${protocol})`, async () => {
      const id = `everything.long-${protocol}`;
      await f.publish(mcpBacked(id, { url: everything.url, tool: "trigger-long-running-operation", protocol }, { constraints: { gates: { side_effect_class: "read" } } }));
      const run = await f.run(id, { duration: 1.6, steps: 4 });
      expect(run.state, JSON.stringify(run.extensions)).toBe("completed");
      expect(JSON.stringify(outputsOf(run))).toContain("Long running operation completed");
      const events = await eventsOf(run.run_id);
      for (const e of events) expect(isEvent(e), JSON.stringify(isEvent.errors)).toBe(true);
      const progress = events.filter((e) => e.type === "node_run_progress");
      expect(progress.map((e) => e.data)).toEqual([1, 2, 3, 4].map((i) => ({ progress: i, total: 4, attempt: 1 })));
      expect(new Set(progress.map((e) => e.node_run_id))).toEqual(new Set([run.root_node_run_id]));
      const completed = events.find((e) => e.type === "node_run_completed");
      expect(progress.every((e) => e.seq < completed.seq)).toBe(true);
    }, 30_000);
  }

  it("reach a follower of the run's event stream while the call runs", async () => {
    await f.publish(mcpBacked("everything.long-live", { url: everything.url, tool: "trigger-long-running-operation" }));
    const started = await f.start("everything.long-live", { duration: 2, steps: 4 });
    const res = await fetch(`${f.gateway}/v1/runs/${started.run_id}/events?follow=true`);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let firstProgressBeforeEnd = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      const types = lines.filter(Boolean).map((l) => JSON.parse(l).type as string);
      if (types.includes("node_run_progress") && !firstProgressBeforeEnd) {
        // Seen live: the run has not ended yet.
        firstProgressBeforeEnd = (await call("GET", `${f.gateway}/v1/runs/${started.run_id}`)).body.state === "running";
      }
    }
    expect(firstProgressBeforeEnd).toBe(true);
  }, 30_000);
});
