/**
 * ctx.reportOutputDelta's stream to the coordinator: coalesced, one delta in flight at a time so they arrive in
 * order, numbered (index, offset, attempt), a failed sending tried again as it was, bounded (the last delta says
 * `truncated`), and what waits sent at the end.
 */
import { describe, it, expect } from "vitest";
import { OutputDeltaStream, OUTPUT_DELTA_MAX_CHARS, OUTPUT_DELTA_MAX_EVENTS, type OutputDelta } from "../src/runtime/output-deltas.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("OutputDeltaStream", () => {
  it("coalesces writes into ordered, numbered deltas whose text is all that was written", async () => {
    const got: OutputDelta[] = [];
    let inFlight = 0;
    const s = new OutputDeltaStream(async (d) => {
      expect(++inFlight).toBe(1);
      await sleep(5);
      got.push(d);
      inFlight--;
    }, 3);
    const pieces = Array.from({ length: 300 }, (_, i) => `t${i} `);
    for (const [i, p] of pieces.entries()) {
      s.write(p);
      if (i % 30 === 0) await sleep(20);
    }
    await s.close(10_000);
    expect(got.map((d) => d.text).join("")).toBe(pieces.join(""));
    expect(got.length).toBeLessThan(pieces.length / 3);
    let offset = 0;
    got.forEach((d, i) => {
      expect(d).toMatchObject({ index: i, offset, attempt: 3 });
      offset += d.text.length;
    });
    s.write("after the end");
    await sleep(150);
    expect(got.map((d) => d.text).join("")).toBe(pieces.join(""));
  });

  it("sends a delta that failed again as it was, same index and text", async () => {
    const tries: OutputDelta[] = [];
    let fail = true;
    const s = new OutputDeltaStream(async (d) => {
      tries.push({ ...d });
      if (fail) {
        fail = false;
        throw new Error("connection reset");
      }
    }, 1);
    s.write("first");
    await sleep(20);
    s.write(" second");
    await s.close(10_000);
    expect(tries[0]).toEqual({ text: "first", index: 0, offset: 0, attempt: 1 });
    expect(tries[1]).toEqual(tries[0]);
    expect(tries.slice(2).map((d) => [d.index, d.offset, d.text])).toEqual([[1, 5, " second"]]);
  });

  it("stops at its bounds: characters and deltas, the last one saying truncated", async () => {
    const got: OutputDelta[] = [];
    const s = new OutputDeltaStream(async (d) => void got.push(d), 1);
    for (let i = 0; i < 40; i++) s.write("x".repeat(10_000));
    await s.close(10_000);
    expect(got.map((d) => d.text).join("").length).toBe(OUTPUT_DELTA_MAX_CHARS);
    expect(got.at(-1)!.truncated).toBe(true);
    expect(got.slice(0, -1).some((d) => d.truncated)).toBe(false);

    const many: OutputDelta[] = [];
    // Each write waits past the interval, so each is its own delta.
    const t = new OutputDeltaStream(async (d) => void many.push(d), 1);
    (t as unknown as { lastSent: number }).lastSent = 0;
    for (let i = 0; i < OUTPUT_DELTA_MAX_EVENTS + 5; i++) {
      t.write("y");
      await (t as unknown as { inFlight?: Promise<void> }).inFlight;
      (t as unknown as { lastSent: number }).lastSent = 0;
    }
    await t.close(10_000);
    expect(many).toHaveLength(OUTPUT_DELTA_MAX_EVENTS);
    expect(many.at(-1)!.truncated).toBe(true);
  });
});
