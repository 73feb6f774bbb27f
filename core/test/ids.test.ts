/**
 * Server-made ids: the ULID-like encoding (checked against a plain big-integer encoding of the same bits, the one
 * ids were made with before), sortable by time, monotonic within a millisecond, and unique.
 */
import { describe, it, expect, afterEach } from "vitest";
import { randomBytes } from "node:crypto";
import { encodeIdParts, newId } from "../src/ids.js";
import { setClock } from "../src/clock.js";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/** The reference: the bytes as one big integer, cut into 5-bit digits from the top (`bits` rounded up to fives). */
function reference(bytes: Uint8Array, bits: number): string {
  let value = 0n;
  for (const b of bytes) value = (value << 8n) | BigInt(b);
  let out = "";
  for (let shift = bits - 5; shift > -5; shift -= 5) out += ALPHABET[Number(shift >= 0 ? (value >> BigInt(shift)) & 31n : (value << BigInt(-shift)) & 31n)];
  return out;
}

function timeBytes(t: number): Uint8Array {
  const b = new Uint8Array(6);
  for (let i = 5, v = t; i >= 0; i--, v = Math.floor(v / 256)) b[i] = v % 256;
  return b;
}

describe("ids", () => {
  afterEach(() => setClock());

  it("encodes time and randomness exactly as the big-integer reference does", () => {
    const times = [0, 1, 31, 32, 2 ** 32 - 1, 2 ** 32, 1795790308891, 2 ** 48 - 1];
    const randoms = [new Uint8Array(10), new Uint8Array(10).fill(255), Uint8Array.from([0x80, 0, 0, 0, 1, 0xff, 0, 0x7f, 0, 2]), ...Array.from({ length: 200 }, () => new Uint8Array(randomBytes(10)))];
    for (const t of times) for (const r of randoms) expect(encodeIdParts(t, r)).toBe(reference(timeBytes(t), 50) + reference(r, 80));
  });

  it("sorts by time, stays monotonic within a millisecond, and never repeats", () => {
    let now = 1795790308891;
    setClock({ now: () => now, isoNow: () => new Date(now).toISOString() });
    const ids: string[] = [];
    for (let i = 0; i < 5000; i++) {
      if (i % 1000 === 0) now += 1;
      ids.push(newId("nr"));
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    for (const id of ids) expect(id).toMatch(/^nr_[0-9a-hjkmnp-tv-z]{26}$/);
  });
});
