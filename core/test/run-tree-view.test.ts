/**
 * What `fabric run` shows a person on a terminal, as data: the live tree of NodeRuns, the lines recorded above it
 * (retries, progress messages, approvals, failures), and the outputs cut to a readable size. The same, drawn on a real
 * terminal by the built command, is test/cli/fabric-run-terminal.test.ts.
 */
import { describe, it, expect } from "vitest";
import type { RunEvent } from "@nodefabric/schemas";
import { RunTreeView, formatOutputs } from "../src/cli/run-tree-view.js";

describe("fabric run's live tree", () => {
  it("draws NodeRuns indented by parent, with state, duration and failure codes", () => {
    const t = (ms: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString();
    const events: RunEvent[] = [
      { run_id: "run_1", seq: 0, type: "run_started", time: t(0), data: { root_node_run_id: "nr_root" } },
      { run_id: "run_1", seq: 1, type: "node_run_created", time: t(0), node_run_id: "nr_root", data: { node_type_ref: { node_type_id: "trip.plan", version: "1.0.0" }, kind: "composite" } },
      { run_id: "run_1", seq: 2, type: "node_run_started", time: t(10), node_run_id: "nr_root" },
      { run_id: "run_1", seq: 3, type: "node_run_created", time: t(20), node_run_id: "nr_a", data: { parent_node_run_id: "nr_root", node_type_ref: { node_type_id: "weather.current", version: "1.0.0" } } },
      { run_id: "run_1", seq: 4, type: "node_run_created", time: t(20), node_run_id: "nr_b", data: { parent_node_run_id: "nr_root", node_type_ref: { node_type_id: "fx.rate", version: "2.1.0" } } },
      { run_id: "run_1", seq: 5, type: "node_run_started", time: t(30), node_run_id: "nr_a" },
      { run_id: "run_1", seq: 6, type: "node_run_completed", time: t(530), node_run_id: "nr_a", data: { state: "completed" } },
      { run_id: "run_1", seq: 7, type: "node_run_started", time: t(40), node_run_id: "nr_b" },
      { run_id: "run_1", seq: 8, type: "node_run_completed", time: t(1540), node_run_id: "nr_b", data: { state: "failed", error: { code: "upstream_error", message: "x" } } },
    ];
    const view = new RunTreeView("run_1");
    for (const e of events) view.apply(e);
    const lines = view.lines(Date.parse(t(2010)), 100, 20, false);
    expect(lines[0]).toBe("run run_1  running  2.0s");
    expect(lines[1]).toMatch(/^ {2}▶ trip\.plan@1\.0\.0\s+running {2}2\.0s$/);
    expect(lines[2]).toMatch(/^ {4}✓ weather\.current@1\.0\.0\s+completed {2}500ms$/);
    expect(lines[3]).toMatch(/^ {4}✗ fx\.rate@2\.1\.0\s+failed {2}1\.5s {2}upstream_error$/);
    expect(lines).toHaveLength(4);

    view.apply({ run_id: "run_1", seq: 9, type: "node_run_completed", time: t(1600), node_run_id: "nr_root", data: { state: "failed" } });
    view.apply({ run_id: "run_1", seq: 10, type: "run_completed", time: t(1600), data: { state: "failed" } });
    expect(view.ended).toBe(true);
    const final = view.lines(Date.parse(t(9999)), 100, 20, false);
    expect(final[0]).toBe("run run_1  failed  1.6s");
    // Too small a terminal: rows beyond the height are summarised, and no line is wider than asked.
    // A narrow terminal cuts a long run id, not the run's state.
    const long = new RunTreeView("run_0123456789abcdefghij");
    expect(long.lines(0, 30, 20, false)[0]).toBe("run run_01234567…  queued  0ms");
    const small = view.lines(Date.parse(t(9999)), 30, 3, true);
    expect(small).toHaveLength(3);
    expect(small[2]).toContain("2 more node runs");
    for (const l of view.lines(Date.parse(t(9999)), 30, 20, false)) expect(Array.from(l).length).toBeLessThanOrEqual(30);
  });
});

describe("fabric run's record above the tree", () => {
  const t = (ms: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString();
  const created = (seq: number, id: string, type: string, parent?: string): RunEvent => ({
    run_id: "run_1",
    seq,
    type: "node_run_created",
    time: t(seq),
    node_run_id: id,
    data: { node_type_ref: { node_type_id: type, version: "1.0.0" }, ...(parent ? { parent_node_run_id: parent } : {}) },
  });

  it("records retries, new progress messages, approvals and failures once each, in order", () => {
    const view = new RunTreeView("run_1");
    const events: RunEvent[] = [
      created(0, "nr_root", "trip.plan"),
      created(1, "nr_a", "weather.current", "nr_root"),
      { run_id: "run_1", seq: 2, type: "node_run_started", time: t(2), node_run_id: "nr_a" },
      { run_id: "run_1", seq: 3, type: "node_run_retrying", time: t(3), node_run_id: "nr_a", data: { attempt: 2, delay_ms: 40, error: { code: "upstream_error", message: "attempt 1 failed" } } },
      { run_id: "run_1", seq: 4, type: "node_run_retrying", time: t(4), node_run_id: "nr_a", data: { attempt: 3, reason: "lease_expired" } },
      { run_id: "run_1", seq: 5, type: "node_run_started", time: t(5), node_run_id: "nr_a" },
      { run_id: "run_1", seq: 6, type: "node_run_progress", time: t(6), node_run_id: "nr_a", data: { progress: 1, total: 3, message: "step 1 of 3" } },
      { run_id: "run_1", seq: 7, type: "node_run_progress", time: t(7), node_run_id: "nr_a", data: { progress: 2, total: 3, message: "step 1 of 3" } },
      { run_id: "run_1", seq: 8, type: "node_run_progress", time: t(8), node_run_id: "nr_a", data: { progress: 3 } },
      { run_id: "run_1", seq: 9, type: "approval_requested", time: t(9), node_run_id: "nr_root", data: { approval_id: "apr_1", message: "books a hotel" } },
      { run_id: "run_1", seq: 10, type: "approval_resolved", time: t(10), node_run_id: "nr_root", data: { approval_id: "apr_1", decision: "rejected", reason: "too dear" } },
      { run_id: "run_1", seq: 11, type: "node_run_completed", time: t(11), node_run_id: "nr_a", data: { state: "failed", error: { code: "upstream_error", message: "gave up" } } },
      { run_id: "run_1", seq: 12, type: "node_run_completed", time: t(12), node_run_id: "nr_root", data: { state: "completed" } },
    ];
    for (const e of events) view.apply(e);
    const lines = view.takeMessages(200, false);
    const time = String.raw`\d{2}:\d{2}:\d{2}`;
    expect(lines).toHaveLength(6);
    expect(lines[0]).toMatch(new RegExp(`^${time}  weather\\.current@1\\.0\\.0  retrying in 40ms \\(attempt 2\\): upstream_error: attempt 1 failed$`));
    expect(lines[1]).toMatch(/weather\.current@1\.0\.0  retrying \(attempt 3\): its executor's lease expired$/);
    expect(lines[2]).toMatch(/weather\.current@1\.0\.0  step 1 of 3 \(1\/3\)$/);
    expect(lines[3]).toMatch(/trip\.plan@1\.0\.0  awaits approval apr_1: books a hotel$/);
    expect(lines[4]).toMatch(/trip\.plan@1\.0\.0  approval rejected: too dear$/);
    expect(lines[5]).toMatch(/weather\.current@1\.0\.0  failed: upstream_error: gave up$/);
    // Taken once: the next draw records nothing new.
    expect(view.takeMessages(200, false)).toEqual([]);
    // The tree keeps the last progress note and the failure code on the row.
    view.apply({ run_id: "run_1", seq: 13, type: "run_completed", time: t(13), data: { state: "completed" } });
    expect(view.lines(Date.parse(t(20)), 200, 20, false)[2]).toMatch(/✗ weather\.current@1\.0\.0\s+failed .* upstream_error$/);
  });

  it("keeps each recorded line within the terminal's width, coloured only when asked", () => {
    const view = new RunTreeView("run_1");
    view.apply(created(0, "nr_a", "a.rather.long.node.type.name"));
    view.apply({ run_id: "run_1", seq: 1, type: "node_run_completed", time: t(1), node_run_id: "nr_a", data: { state: "failed", error: { code: "boom", message: "x".repeat(300) } } });
    const [plain] = view.takeMessages(40, false);
    expect(Array.from(plain!).length).toBe(40);
    expect(plain!.endsWith("…")).toBe(true);
    view.apply({ run_id: "run_1", seq: 2, type: "node_run_retrying", time: t(2), node_run_id: "nr_a", data: { attempt: 2 } });
    expect(view.takeMessages(80, false)).toEqual([]);
    const coloured = new RunTreeView("run_2");
    coloured.apply(created(0, "nr_b", "b.type"));
    coloured.apply({ run_id: "run_2", seq: 1, type: "node_run_retrying", time: t(1), node_run_id: "nr_b", data: { attempt: 2 } });
    // eslint-disable-next-line no-control-regex
    expect(coloured.takeMessages(80, true)[0]).toMatch(/\x1b\[33mretrying \(attempt 2\)\x1b\[0m$/);
  });

  it("shows what a handler wrote with its line breaks and escape sequences as spaces", () => {
    const view = new RunTreeView("run_1");
    view.apply(created(0, "nr_a", "x.y"));
    view.apply({ run_id: "run_1", seq: 1, type: "node_run_started", time: t(1), node_run_id: "nr_a" });
    view.apply({ run_id: "run_1", seq: 2, type: "node_run_progress", time: t(2), node_run_id: "nr_a", data: { progress: 1, message: "two\nlines \x1b[2Jcleared" } });
    const [line] = view.takeMessages(200, false);
    expect(line).toMatch(/x\.y@1\.0\.0 {2}two lines  \[2Jcleared \(1\)$/);
    // eslint-disable-next-line no-control-regex
    for (const l of view.lines(Date.parse(t(3)), 200, 20, false)) expect(l).not.toMatch(/[\n\x1b]/);
  });
});

describe("fabric run's outputs on a terminal", () => {
  it("prints small outputs whole, pretty-printed", () => {
    const outputs = { echo: { city: "Oslo", n: [1, 2] } };
    expect(formatOutputs(outputs)).toEqual({ lines: JSON.stringify(outputs, null, 2).split("\n"), truncated: false });
    expect(formatOutputs(undefined)).toEqual({ lines: ["{}"], truncated: false });
  });

  it("cuts long strings, long arrays, many keys, deep nesting and too many lines, saying how much is left out", () => {
    const long = { text: "ab".repeat(400), items: Array.from({ length: 30 }, (_, i) => i) };
    const { lines, truncated } = formatOutputs(long);
    expect(truncated).toBe(true);
    const parsed = JSON.parse(lines.join("\n"));
    expect(parsed.text).toBe(`${"ab".repeat(150)}… (500 more characters)`);
    expect(parsed.items).toEqual([...Array.from({ length: 20 }, (_, i) => i), "… 10 more items"]);

    const keys = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`k${i}`, i]));
    expect(JSON.parse(formatOutputs(keys).lines.join("\n"))["…"]).toBe("5 more keys");

    const deep = { a: { b: { c: { d: { e: { f: { g: 1 } } } } } } };
    expect(JSON.parse(formatOutputs(deep).lines.join("\n")).a.b.c.d.e.f).toBe("{… 1 key}");

    const many = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, [1, 2, 3, 4, 5]]));
    const cut = formatOutputs(many, { maxLines: 30 });
    expect(cut.truncated).toBe(true);
    expect(cut.lines).toHaveLength(30);
    expect(cut.lines[29]).toMatch(/^… \d+ more lines$/);
  });
});
