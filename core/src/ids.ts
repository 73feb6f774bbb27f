/**
 * Server-made ids: a prefix, then a sortable unique part (48-bit time + 80 random bits, Crockford base32, like ULID).
 */
import { randomBytes } from "node:crypto";
import { clock } from "./clock.js";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
let lastTime = -1;
let lastRandom: Uint8Array = new Uint8Array(10);

function encode(bytes: Uint8Array, bits: number): string {
  let out = "";
  let value = 0n;
  for (const b of bytes) value = (value << 8n) | BigInt(b);
  for (let shift = bits - 5; shift > -5; shift -= 5) {
    const idx = shift >= 0 ? Number((value >> BigInt(shift)) & 31n) : Number((value << BigInt(-shift)) & 31n);
    out += ALPHABET[idx];
  }
  return out;
}

/** A new id such as `run_01jd…`: sortable by creation time, unique within and across processes. */
export function newId(prefix: "run" | "nr" | "cs" | "apr" | "ev" | string): string {
  const t = clock.now();
  let rnd: Uint8Array;
  if (t === lastTime) {
    // Same millisecond: increment the random part so ids stay monotonic.
    rnd = lastRandom.slice();
    for (let i = rnd.length - 1; i >= 0; i--) {
      if (rnd[i] !== 255) { rnd[i]++; break; }
      rnd[i] = 0;
    }
  } else {
    rnd = randomBytes(10);
  }
  lastTime = t;
  lastRandom = rnd;
  const time = new Uint8Array(6);
  let v = t;
  for (let i = 5; i >= 0; i--) { time[i] = v % 256; v = Math.floor(v / 256); }
  return `${prefix}_${encode(time, 50)}${encode(rnd, 80)}`;
}
