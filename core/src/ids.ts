/**
 * Server-made ids: a prefix, then a sortable unique part (48-bit time + 80 random bits, Crockford base32, like ULID).
 */
import { randomFillSync } from "node:crypto";
import { clock } from "./clock.js";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";
let lastTime = -1;
let lastRandom: Uint8Array = new Uint8Array(10);

/** Random bytes drawn from the system in blocks, 10 at a time: one system call per 409 ids instead of one per id. */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;

function randomTen(): Uint8Array {
  if (poolAt + 10 > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const out = new Uint8Array(10);
  out.set(pool.subarray(poolAt, poolAt + 10));
  poolAt += 10;
  return out;
}

/** `count` base32 digits of `value` (an integer below 2^53), most significant first. */
function digits(value: number, count: number): string {
  let out = "";
  for (let i = 0; i < count; i++) {
    out = ALPHABET[value % 32] + out;
    value = Math.floor(value / 32);
  }
  return out;
}

/** 40 bits of `bytes`, from `at`, as a number. */
function forty(bytes: Uint8Array, at: number): number {
  return bytes[at] * 2 ** 32 + ((bytes[at + 1] << 24) >>> 0) + (bytes[at + 2] << 16) + (bytes[at + 3] << 8) + bytes[at + 4];
}

/**
 * The unique part of an id: the time (48 bits, as 10 digits: 50 bits with two leading zeros) and the random part
 * (80 bits, as 16 digits, in two halves of 40 bits that each make 8 digits exactly).
 */
export function encodeIdParts(time: number, random: Uint8Array): string {
  return digits(time, 10) + digits(forty(random, 0), 8) + digits(forty(random, 5), 8);
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
    rnd = randomTen();
  }
  lastTime = t;
  lastRandom = rnd;
  return `${prefix}_${encodeIdParts(t, rnd)}`;
}
