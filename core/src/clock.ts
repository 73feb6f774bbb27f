/**
 * The one clock of the fabric. Everything that reads time goes through it, so tests can move it.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** RFC 3339 UTC timestamp. */
  isoNow(): string;
}

const systemClock: Clock = {
  now: () => Date.now(),
  isoNow: () => new Date().toISOString(),
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
