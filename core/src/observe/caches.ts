/**
 * What the process holds in memory: every cache, map and queue of the long-running services says here how many
 * entries it holds (and how many bytes, where that is cheap to know) and what bounds it. The telemetry plugin reads
 * this at scrape time (`nodefabric_cache_entries{cache}`, `nodefabric_cache_bytes{cache}`,
 * `nodefabric_cache_max_entries{cache}`); docs/memory.md lists every cache.
 *
 * The list lives on `globalThis` under a registered symbol, so a handler package that imports nothing of core can
 * add its own module-level caches with the same few lines (handlers/llm, handlers/mcp do). Owners are held weakly:
 * a service that stopped and was collected drops out of the list by itself.
 */

/** How much one cache holds now. */
export interface CacheSize {
  entries: number;
  /** Approximate bytes of what it holds (the length of the JSON text kept, or of the values' text), where cheap. */
  bytes?: number;
}

/** What bounds a cache (undefined: bounded by something else, said in docs/memory.md). */
export interface CacheBound {
  max_entries?: number;
  max_bytes?: number;
}

/** One cache as an observer reads it: its name, the sum over every live instance of it in this process. */
export interface CacheReport extends CacheSize, CacheBound {
  cache: string;
}

interface Tracked {
  name: string;
  ref: WeakRef<object>;
  measure: (owner: object) => CacheSize;
  bound?: CacheBound;
}

interface Registry {
  tracked: Set<Tracked>;
  finalizer: FinalizationRegistry<Tracked>;
}

const KEY = Symbol.for("nodefabric.caches");

function registry(): Registry {
  const g = globalThis as { [KEY]?: Registry };
  if (!g[KEY]) {
    const tracked = new Set<Tracked>();
    g[KEY] = { tracked, finalizer: new FinalizationRegistry((t) => tracked.delete(t)) };
  }
  return g[KEY];
}

/**
 * Adds a cache to what the process reports. `measure` is given the owner back (so it need not hold it): write it as
 * `(o) => ({ entries: o.map.size })`, never closing over the owner. Returns the function that removes it.
 */
export function trackCache<T extends object>(name: string, owner: T, measure: (owner: T) => CacheSize, bound?: CacheBound): () => void {
  const r = registry();
  const t: Tracked = { name, ref: new WeakRef(owner), measure: measure as (o: object) => CacheSize, bound };
  r.tracked.add(t);
  r.finalizer.register(owner, t, t);
  return () => {
    r.tracked.delete(t);
    r.finalizer.unregister(t);
  };
}

/** Every tracked cache now, one report per name (instances of one cache summed, bounds too), sorted by name. */
export function cacheSizes(): CacheReport[] {
  const r = registry();
  const byName = new Map<string, CacheReport>();
  for (const t of r.tracked) {
    const owner = t.ref.deref();
    if (!owner) {
      r.tracked.delete(t);
      continue;
    }
    let size: CacheSize;
    try {
      size = t.measure(owner);
    } catch {
      continue;
    }
    let out = byName.get(t.name);
    if (!out) byName.set(t.name, (out = { cache: t.name, entries: 0 }));
    out.entries += size.entries;
    if (size.bytes !== undefined) out.bytes = (out.bytes ?? 0) + size.bytes;
    if (t.bound?.max_entries !== undefined) out.max_entries = (out.max_entries ?? 0) + t.bound.max_entries;
    if (t.bound?.max_bytes !== undefined) out.max_bytes = (out.max_bytes ?? 0) + t.bound.max_bytes;
  }
  return [...byName.values()].sort((a, b) => a.cache.localeCompare(b.cache));
}

/** The sum of `size(v)` over a map's values or a set's members (O(n): for scrape time, on bounded collections). */
export function sumOf<V>(values: Iterable<V>, size: (v: V) => number): number {
  let n = 0;
  for (const v of values) n += size(v);
  return n;
}
