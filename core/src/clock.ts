/**
 * The one clock of the fabric. Everything that reads time goes through it, so tests can move it.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** RFC 3339 UTC timestamp. */
  isoNow(): string;
}

/** The last timestamp formatted, and its millisecond: a run writes a dozen within one, and formatting is not free. */
let isoMs = Number.NaN;
let iso = "";

const systemClock: Clock = {
  now: () => Date.now(),
  isoNow: () => {
    const ms = Date.now();
    if (ms !== isoMs) {
      iso = new Date(ms).toISOString();
      isoMs = ms;
    }
    return iso;
  },
};

let current: Clock = systemClock;

/** The clock in force. */
export const clock: Clock = {
  now: () => current.now(),
  isoNow: () => current.isoNow(),
};

/** Replaces the clock (tests); call with no argument to restore the system clock. */
export function setClock(next?: Clock): void {
  current = next ?? systemClock;
}
