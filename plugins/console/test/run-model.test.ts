/**
 * The run page's model, without a browser: a snapshot of NodeRuns and the event stream read from the start overlap,
 * and the tree must come out the same whatever the overlap (states only move forward, repeats change nothing); a
 * NodeRun with many children shows groups by node type and state, and a NodeRun deep in a group can be revealed.
 */
import { describe, it, expect } from "vitest";
import type { NodeRun, RunEvent } from "@nodefabric/schemas";
import { RunModel } from "../web/src/run-model.js";
import { DIRECT_CHILDREN, groupKey, keysToReveal, treeRows } from "../web/src/tree-rows.js";

const T = (s: number) => new Date(Date.UTC(2026, 10, 25, 12, 0, s)).toISOString();
const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
const FAN = { node_type_id: "console.fanout", version: "1.0.0" };

/** The events of a fan-out of `n` children, every fifth failing, as the coordinator sends them. */
function fanoutEvents(n: number): RunEvent[] {
  const ev: RunEvent[] = [];
  const add = (type: RunEvent["type"], node_run_id: string | undefined, data: Record<string, unknown>, s: number) =>
    ev.push({ run_id: "run_1", seq: ev.length, type, time: T(s), ...(node_run_id ? { node_run_id } : {}), data });
  add("run_started", undefined, { root_node_run_id: "nr_root" }, 0);
  add("node_run_created", "nr_root", { node_type_ref: FAN, kind: "composite" }, 0);
  add("node_run_started", "nr_root", { attempt: 1 }, 1);
  for (let i = 0; i < n; i++) add("node_run_created", `nr_${i}`, { node_type_ref: ECHO, kind: "atomic", parent_node_run_id: "nr_root" }, 2);
  for (let i = 0; i < n; i++) add("node_run_started", `nr_${i}`, { attempt: 1 }, 3);
  for (let i = 0; i < n; i++) {
    const failed = i % 5 === 4;
    if (i === 0) add("node_run_retrying", `nr_${i}`, { attempt: 2, delay_ms: 100 }, 4);
    add("node_run_completed", `nr_${i}`, failed ? { state: "failed", error: { code: "boom", message: `child ${i}` } } : { state: "completed" }, 5);
  }
  add("node_run_completed", "nr_root", { state: "completed" }, 6);
  add("run_completed", undefined, { state: "completed" }, 6);
  return ev;
}

/** The NodeRuns as GET /v1/runs/{id}/node-runs would have answered after the first `upTo` events. */
function snapshotAt(events: RunEvent[], upTo: number): NodeRun[] {
  const m = new RunModel();
  m.applyAll(events.slice(0, upTo));
  return [...m.nodes.values()].map((n) => ({
    node_run_id: n.id,
    run_id: "run_1",
    node_type_ref: { node_type_id: n.nodeTypeId, version: n.version },
    state: n.state,
    ...(n.parentId ? { parent_node_run_id: n.parentId } : {}),
    extensions: { "nodefabric.attempt": n.attempt, ...(n.error ? { "nodefabric.error": n.error } : {}) },
  }));
}

const summary = (m: RunModel) => [...m.nodes.values()].map((n) => `${n.id}:${n.state}:${n.attempt}:${n.children.length}`).sort();

describe("the run model", () => {
  it("comes out the same from the stream alone and from any snapshot followed by the whole stream", () => {
    const events = fanoutEvents(30);
    const streamOnly = new RunModel();
    streamOnly.applyAll(events);
    for (const cut of [0, 5, 40, 70, events.length]) {
      const m = new RunModel();
      m.setRun({ run_id: "run_1", state: "running", root_node_run_id: "nr_root", started_at: T(0) });
      m.loadSnapshot(snapshotAt(events, cut).reverse());
      m.applyAll(events);
      m.applyAll(events.slice(10, 20));
      expect(summary(m), `snapshot after ${cut} events`).toEqual(summary(streamOnly));
      expect(m.run?.state).toBe("completed");
    }
    expect(streamOnly.counts()).toEqual({ queued: 0, assigned: 0, running: 0, completed: 25, failed: 6, canceled: 0 });
    expect(streamOnly.nodes.get("nr_0")!.attempt).toBe(2);
    expect(streamOnly.nodes.get("nr_4")!.error).toEqual({ code: "boom", message: "child 4" });
    expect(streamOnly.firstFailed()?.state).toBe("failed");
  });

  it("never moves a state back: an old event over a newer snapshot changes nothing", () => {
    const events = fanoutEvents(3);
    const m = new RunModel();
    m.loadSnapshot(snapshotAt(events, events.length));
    expect(m.nodes.get("nr_1")!.state).toBe("completed");
    m.applyAll(events.filter((e) => e.type === "node_run_started"));
    expect(m.nodes.get("nr_1")!.state).toBe("completed");
  });
});

describe("the tree's rows", () => {
  const open = { opened: new Set<string>(), closed: new Set<string>() };

  it("shows few children one by one, and many as collapsed groups by node type and state with counts", () => {
    const few = new RunModel();
    few.applyAll(fanoutEvents(DIRECT_CHILDREN));
    expect(treeRows(few, open).map((r) => r.kind)).toEqual(["node", ...Array(DIRECT_CHILDREN).fill("node")]);

    const many = new RunModel();
    many.applyAll(fanoutEvents(10_000));
    const rows = treeRows(many, open);
    expect(rows.map((r) => (r.kind === "group" ? `${r.nodeTypeId}:${r.state}:${r.count}` : r.node.id))).toEqual(["nr_root", "demo.echo:failed:2000", "demo.echo:completed:8000"]);

    const opened = { opened: new Set([groupKey("nr_root", "demo.echo", "failed")]), closed: new Set<string>() };
    expect(treeRows(many, opened)).toHaveLength(3 + 2000);
  });

  it("opens the way to a NodeRun inside a group", () => {
    const m = new RunModel();
    m.applyAll(fanoutEvents(100));
    const keys = keysToReveal(m, "nr_9");
    expect(keys).toEqual(["nr_root", groupKey("nr_root", "demo.echo", "failed")]);
    const rows = treeRows(m, { opened: new Set(keys), closed: new Set() });
    expect(rows.some((r) => r.kind === "node" && r.node.id === "nr_9")).toBe(true);
  });
});

describe("RunModel: streamed text", () => {
  it("gathers a NodeRun's node_run_output_delta text as it arrives, and starts again on a new attempt", () => {
    const ev: RunEvent[] = [];
    const add = (type: RunEvent["type"], data: Record<string, unknown>) => ev.push({ run_id: "run_1", seq: ev.length, type, time: T(ev.length), node_run_id: "nr_chat", data });
    add("node_run_created", { node_type_ref: { node_type_id: "llm.chat", version: "1.0.0" }, kind: "atomic" });
    add("node_run_started", { attempt: 1 });
    add("node_run_output_delta", { text: "Half an", index: 0, offset: 0, attempt: 1 });
    add("node_run_retrying", { attempt: 2 });
    add("node_run_output_delta", { text: "The whole ", index: 0, offset: 0, attempt: 2, restarted: true });
    const m = new RunModel();
    m.applyAll(ev.slice(0, 3));
    expect(m.nodes.get("nr_chat")!.streamed).toEqual({ text: "Half an", attempt: 1, truncated: false });
    m.applyAll(ev);
    add("node_run_output_delta", { text: "answer.", index: 1, offset: 10, attempt: 2, truncated: true });
    m.applyAll(ev); // the earlier ones again change nothing
    expect(m.nodes.get("nr_chat")!.streamed).toEqual({ text: "The whole answer.", attempt: 2, truncated: true });
  });
});
