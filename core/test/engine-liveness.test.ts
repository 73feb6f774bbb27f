/**
 * What the coordinator keeps per composite in memory (when each last made progress, when its token was minted) stays
 * bounded by the composites live in the last lease, even when entries are never removed one by one: a child that
 * ends after its parent, or a composite that ended on another coordinator.
 */
import { afterEach, describe, expect, it } from "vitest";
import { EngineCore } from "../src/engine/engine-core.js";
import { openSqliteRunStore } from "../src/store/sqlite-run-store.js";
import { clock } from "../src/clock.js";

const silent = { info() {}, warn() {}, error() {}, debug() {}, trace() {}, fatal() {}, child() { return silent; } };

describe("the engine's per-composite liveness maps", () => {
  const stores: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
  });

  it("sweep entries older than a composite lease (progress) or a token lifetime (mints) once they have grown", async () => {
    const store = openSqliteRunStore({ path: ":memory:" });
    stores.push(store);
    const core = new EngineCore({ store, log: silent, instanceId: "coord-test", compositeLeaseMs: 1_000 } as never);
    const t0 = clock.now();
    // 5,000 composites noted long ago and never ended here (they ended on another coordinator).
    for (let i = 0; i < 5_000; i++) {
      core.noteProgress(`nr_old_${i}`, t0 - 60_000);
      core.noteTokenMinted(`nr_old_${i}`, t0 - 24 * 3_600_000);
    }
    // Live ones, noted now: they stay.
    for (let i = 0; i < 100; i++) {
      core.noteProgress(`nr_live_${i}`, t0);
      core.noteTokenMinted(`nr_live_${i}`, t0);
    }
    expect(core.progress.size + core.tokenMintedAt.size).toBeLessThan(2_100);
    for (let i = 0; i < 100; i++) {
      expect(core.progress.get(`nr_live_${i}`)).toBe(t0);
      expect(core.tokenMintedAt.get(`nr_live_${i}`)).toBe(t0);
    }
  });
});
