/**
 * The MCP server's progress notifications carry the text a NodeRun writes (node_run_output_delta events): each
 * notification's message is what came since the last one, so a client that joins them reads the whole text, however
 * the notifications were rate limited, and a lifecycle message in between takes none of it away.
 */
import { describe, it, expect } from "vitest";
import type { RunEvent } from "@nodefabric/schemas";
import { ProgressThrottle } from "../src/tools.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("ProgressThrottle and output deltas", () => {
  it("sends the streamed text in rate-limited pieces that join into the whole", async () => {
    const sent: Array<{ progress: number; message?: string }> = [];
    const t = new ProgressThrottle((r) => sent.push(r), 30);
    let seq = 0;
    const ev = (type: RunEvent["type"], data: Record<string, unknown>): RunEvent => ({ run_id: "run_1", seq: seq++, type, time: new Date().toISOString(), node_run_id: "nr_1", data });
    t.event(ev("node_run_started", { attempt: 1 }));
    const words = Array.from({ length: 40 }, (_, i) => `word${i} `);
    for (const [i, w] of words.entries()) {
      t.event(ev("node_run_output_delta", { text: w, index: i, offset: 0, attempt: 1 }));
      if (i % 7 === 0) await sleep(10);
    }
    t.event(ev("node_run_completed", { state: "completed" }));
    await sleep(100);
    t.flush();
    const texts = sent.filter((s) => s.message?.startsWith("word")).map((s) => s.message);
    expect(texts.join("")).toBe(words.join(""));
    expect(texts.length).toBeLessThan(words.length);
    expect(sent.at(-1)!.message).toBe("NodeRun nr_1 ended completed");
    // Rising, as MCP asks.
    expect(sent.map((s) => s.progress)).toEqual([...sent.map((s) => s.progress)].sort((a, b) => a - b));
    t.stop();
  });
});
