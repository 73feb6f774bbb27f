/**
 * The executor's memory of finished executions, keyed by `Idempotency-Key`: a repeated delivery gets the first
 * result instead of running the handler again. Bounded in entries and in bytes (the oldest settled results go
 * first) and forgetful (TTL), since it only has to cover the coordinator's retry window, not history
 * (docs/memory.md). A coordinator in the same process says when it has recorded an answer (`forget`), after which
 * no delivery of its key can come: an executor called only in process then holds the executions in flight and the
 * answers not yet recorded, not 10,000 finished ones.
 */
import type { AtomicExecuteResult } from "@nodefabric/schemas";
import { clock } from "../../clock.js";
import { trackCache } from "../../observe/caches.js";

/** Settled results remembered at most, by default. */
export const RESULT_CACHE_MAX_ENTRIES = 10_000;
/** Bytes of settled results remembered at most (the length of their JSON text), by default: 64 MiB. */
export const RESULT_CACHE_MAX_BYTES = 64 << 20;
/** How long a settled result is remembered, by default: 10 min. */
export const RESULT_CACHE_TTL_MS = 600_000;

/** What one entry costs besides its result's text: the key, the fingerprint, the Map slot and the objects. */
const ENTRY_OVERHEAD = 200;

interface Entry {
  /** What the first request asked for; the same key with anything else is a conflict. */
  fingerprint: string;
  result: Promise<AtomicExecuteResult>;
  /** Set once the result is known; entries still running are never evicted. */
  expiresAt?: number;
  /** The approximate bytes it holds, once settled. */
  bytes: number;
}

/** LRU + TTL cache of execution results, holding running executions too so duplicates share one promise. */
export class ResultCache {
  private readonly entries = new Map<string, Entry>();
  private settled = 0;
  private bytes = 0;

  constructor(
    private readonly maxSize: number = RESULT_CACHE_MAX_ENTRIES,
    private readonly ttlMs: number = RESULT_CACHE_TTL_MS,
    private readonly maxBytes: number = RESULT_CACHE_MAX_BYTES,
  ) {
    trackCache("executor.result_cache", this, (c) => ({ entries: c.entries.size, bytes: c.bytes }), { max_entries: maxSize, max_bytes: maxBytes });
  }

  /** The entry for a key, if one is running or finished within the TTL. */
  get(key: string): { fingerprint: string; result: Promise<AtomicExecuteResult> } | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= clock.now()) {
      this.drop(key, entry);
      return undefined;
    }
    // Re-insert so Map order is least recently used first.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry;
  }

  /** Remembers a running execution; it becomes evictable once settled, and is dropped if it throws. */
  put(key: string, fingerprint: string, result: Promise<AtomicExecuteResult>): void {
    if (this.maxSize <= 0 || this.maxBytes <= 0) return;
    const entry: Entry = { fingerprint, result, bytes: 0 };
    const previous = this.entries.get(key);
    if (previous) this.drop(key, previous);
    this.entries.set(key, entry);
    result.then(
      (value) => {
        if (this.entries.get(key) !== entry) return;
        const bytes = ENTRY_OVERHEAD + key.length + fingerprint.length + textLength(value);
        // A result bigger than the whole budget is not remembered: a repeat runs the handler again.
        if (bytes > this.maxBytes) {
          this.entries.delete(key);
          return;
        }
        entry.expiresAt = clock.now() + this.ttlMs;
        entry.bytes = bytes;
        this.settled++;
        this.bytes += bytes;
        this.evict();
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
  }

  /** Drops the result kept for `key`: nobody will ask for it again. */
  forget(key: string): void {
    const entry = this.entries.get(key);
    if (entry) this.drop(key, entry);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Approximate bytes of the settled results held. */
  get heldBytes(): number {
    return this.bytes;
  }

  private drop(key: string, entry: Entry): void {
    this.entries.delete(key);
    if (entry.expiresAt !== undefined) {
      this.settled--;
      this.bytes -= entry.bytes;
    }
  }

  /**
   * Drops what expired at the head (the least recently used end) and then the oldest settled results until both
   * bounds hold. Running entries stay: a duplicate delivery must still share their promise.
   */
  private evict(): void {
    const now = clock.now();
    for (const [key, entry] of this.entries) {
      const over = this.settled > this.maxSize || this.bytes > this.maxBytes;
      if (entry.expiresAt === undefined) {
        if (over) continue;
        break;
      }
      if (!over && entry.expiresAt > now) break;
      this.drop(key, entry);
    }
  }
}

/** The length of a result's JSON text (what it would cost sent again), 0 when it cannot be serialised. */
function textLength(value: unknown): number {
  try {
    return JSON.stringify(value)?.length ?? 0;
  } catch {
    return 0;
  }
}
