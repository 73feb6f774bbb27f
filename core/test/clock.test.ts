/**
 * The system clock's timestamps: RFC 3339 UTC with milliseconds, always the current millisecond's (one formatted
 * string is reused within a millisecond, never across two), and a clock set for a test replaces it and goes back.
 */
import { describe, it, expect, afterEach } from "vitest";
import { clock, setClock } from "../src/clock.js";

describe("clock.isoNow", () => {
  afterEach(() => setClock());

  it("is the current millisecond in RFC 3339 UTC, however often it is asked", async () => {
    const seen = new Set<string>();
    // Until six different milliseconds were seen: on a busy machine 30 ms of wall time may hold only a few time slices.
    const end = Date.now() + 5_000;
    while (seen.size <= 5 && Date.now() < end) {
      const before = Date.now();
      const iso = clock.isoNow();
      const after = Date.now();
      expect(iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const ms = Date.parse(iso);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThanOrEqual(after);
      seen.add(iso);
    }
    expect(seen.size).toBeGreaterThan(5);
  });

  it("follows a clock set for a test, and the system clock again once it is restored", () => {
    setClock({ now: () => 0, isoNow: () => "1970-01-01T00:00:00.000Z" });
    expect(clock.isoNow()).toBe("1970-01-01T00:00:00.000Z");
    setClock();
    expect(Math.abs(Date.parse(clock.isoNow()) - Date.now())).toBeLessThan(50);
  });
});
