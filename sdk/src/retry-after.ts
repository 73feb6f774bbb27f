/**
 * `Retry-After` (RFC 9110 §10.2.3): how long an upstream asked to wait, for the `details.retry_after_ms` of a
 * retryable HandlerError. The coordinator waits at least that long before the next attempt, within the node type's
 * retry policy (never longer than its `max_interval_ms`).
 */

/** The delay a `Retry-After` value asks for, in ms: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | null | undefined, now: number = Date.now()): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}
