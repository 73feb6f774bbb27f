/**
 * The executor's memory of finished executions, keyed by `Idempotency-Key`: a repeated delivery gets the first
 * result instead of running the handler again. Bounded (LRU) and forgetful (TTL), since it only has to cover
 * the coordinator's retry window, not history.
 */
import type { AtomicExecuteResult } from "@nodefabric/schemas";
import { clock } from "../../clock.js";

interface Entry {
  /** What the first request asked for; the same key with anything else is a conflict. */
  fingerprint: string;
  result: Promise<AtomicExecuteResult>;
  /** Set once the result is known; entries still running are never evicted. */
  expiresAt?: number;
}

/** LRU + TTL cache of execution results, holding running executions too so duplicates share one promise. */
export class ResultCache {
  private readonly entries = new Map<string, Entry>();
  private settled = 0;

  constructor(
    private readonly maxSize: number,
    private readonly ttlMs: number,
  ) {}

  /** The entry for a key, if one is running or finished within the TTL. */
  get(key: string): { fingerprint: string; result: Promise<AtomicExecuteResult> } | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= clock.now()) {
      this.entries.delete(key);
      this.settled--;
      return undefined;
    }
    // Re-insert so Map order is least recently used first.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry;
  }

  /** Remembers a running execution; it becomes evictable once settled, and is dropped if it throws. */
  put(key: string, fingerprint: string, result: Promise<AtomicExecuteResult>): void {
    if (this.maxSize <= 0) return;
    const entry: Entry = { fingerprint, result };
    const previous = this.entries.get(key);
    if (previous?.expiresAt !== undefined) this.settled--;
    this.entries.set(key, entry);
    result.then(
      () => {
        if (this.entries.get(key) !== entry) return;
        entry.expiresAt = clock.now() + this.ttlMs;
        this.settled++;
        this.evict();
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
  }

  get size(): number {
    return this.entries.size;
  }

  private evict(): void {
    if (this.settled <= this.maxSize) return;
    for (const [key, entry] of this.entries) {
      if (this.settled <= this.maxSize) break;
      if (entry.expiresAt === undefined) continue;
      this.entries.delete(key);
      this.settled--;
    }
  }
}
