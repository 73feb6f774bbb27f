/**
 * `fabric runs follow` for people: the text NodeRuns write (node_run_output_delta) printed as it arrives, a line for
 * each start, retry and end, a restart said as such; and the live tree of `fabric run` showing the end of the text.
 */
import { describe, it, expect } from "vitest";
import type { RunEvent } from "@nodefabric/schemas";
import { FollowPrinter } from "../src/cli/runs-follow.js";
import { RunTreeView } from "../src/cli/run-tree-view.js";

const CHAT = { node_type_id: "llm.chat", version: "1.0.0" };

function events(): RunEvent[] {
  const ev: RunEvent[] = [];
  const add = (type: RunEvent["type"], data: Record<string, unknown>, node = true) =>
    ev.push({ run_id: "run_1", seq: ev.length, type, time: new Date(Date.UTC(2026, 10, 29, 12, 0, ev.length)).toISOString(), ...(node ? { node_run_id: "nr_1" } : {}), data });
  add("run_started", { root_node_run_id: "nr_1" }, false);
  add("node_run_created", { node_type_ref: CHAT, kind: "atomic" });
  add("node_run_started", { attempt: 1 });
  add("node_run_output_delta", { text: "Half an", index: 0, offset: 0, attempt: 1 });
  add("node_run_retrying", { attempt: 2, error: { code: "upstream_unavailable", message: "midway" } });
  add("node_run_started", { attempt: 2 });
  add("node_run_output_delta", { text: "The whole\n", index: 0, offset: 0, attempt: 2, restarted: true });
  add("node_run_output_delta", { text: "answer.\u001b[2J", index: 1, offset: 10, attempt: 2 });
  add("node_run_completed", { state: "completed" });
  add("run_completed", { state: "completed" }, false);
  return ev;
}

describe("fabric runs follow", () => {
  it("prints the text as it arrives, says when the call was made again, and lets no escape sequence through", () => {
    let out = "";
    const p = new FollowPrinter({ write: (t: string) => (out += t) });
    for (const e of events()) p.apply(e);
    expect(out).toBe(
      [
        "▶ llm.chat@1.0.0 started",
        "… llm.chat@1.0.0 writes:",
        "Half an",
        "↻ llm.chat@1.0.0 retrying (attempt 2): upstream_unavailable",
        "▶ llm.chat@1.0.0 started",
        "… llm.chat@1.0.0 writes its answer again (attempt 2; the call was made again):",
        "The whole",
        "answer. [2J",
        "✓ llm.chat@1.0.0 completed",
        "",
      ].join("\n"),
    );
  });

  it("shows the end of the text being written as the NodeRun's note in the live tree", () => {
    const view = new RunTreeView("run_1");
    const all = events();
    for (const e of all.slice(0, 8)) view.apply(e);
    const lines = view.lines(Date.parse(all[7].time), 120, 20, false).join("\n");
    expect(lines).toContain("The whole answer.");
    expect(lines).not.toContain("Half an");
  });
});
