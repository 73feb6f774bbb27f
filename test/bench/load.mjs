/**
 * A closed-loop load generator: `clients` workers each send one request, wait for its answer, and send the next.
 */
import { Pool } from "undici";

/** Sends `total` requests from `clients` concurrent loops; returns throughput and latency percentiles. */
export async function closedLoop({ url, path, method = "POST", body, headers = {}, total, clients, check }) {
  const u = new URL(url);
  const pool = new Pool(u.origin, { connections: clients, pipelining: 1 });
  const latencies = new Float64Array(total);
  let next = 0;
  let failures = 0;
  const payload = typeof body === "function" ? null : body === undefined ? undefined : JSON.stringify(body);
  const started = performance.now();
  async function worker() {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      const t0 = performance.now();
      const res = await pool.request({
        method,
        path,
        headers: { "content-type": "application/json", ...headers },
        body: payload === null ? JSON.stringify(body(i)) : payload,
      });
      const text = await res.body.text();
      latencies[i] = performance.now() - t0;
      if (res.statusCode !== 200 || (check && !check(JSON.parse(text)))) failures++;
    }
  }
  await Promise.all(Array.from({ length: clients }, worker));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  const sorted = Array.from(latencies).sort((a, b) => a - b);
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  return {
    requests: total,
    failures,
    per_second: Math.round(total / seconds),
    p50_ms: +pct(50).toFixed(2),
    p99_ms: +pct(99).toFixed(2),
    seconds: +seconds.toFixed(3),
  };
}

/** The median of numbers. */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
