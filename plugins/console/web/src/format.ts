/** How the console writes times and durations. */

/** A duration in ms as "850 ms", "12.3 s", "4 min 05 s", "2 h 03 min". */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(2) : s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.floor(s % 60)).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

/** Milliseconds since the epoch of an RFC 3339 time, or undefined. */
export function timeOf(iso: string | undefined): number | undefined {
  if (!iso) return undefined;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? undefined : t;
}

/** From start to end, or to now while it has not ended. */
export function elapsed(startIso: string | undefined, endIso: string | undefined, now = Date.now()): number | undefined {
  const start = timeOf(startIso);
  if (start === undefined) return undefined;
  return (timeOf(endIso) ?? now) - start;
}

/** A time as the user's local date and time, to the second. */
export function formatTime(iso: string | undefined): string {
  const t = timeOf(iso);
  if (t === undefined) return "";
  const d = new Date(t);
  const today = new Date();
  const time = d.toLocaleTimeString(undefined, { hour12: false });
  return d.toDateString() === today.toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
}

/** A value of a datetime-local input (local time) as RFC 3339 in UTC, or undefined when empty or invalid. */
export function localInputToIso(value: string | undefined | null): string | undefined {
  if (!value) return undefined;
  const t = new Date(value).getTime();
  return Number.isNaN(t) ? undefined : new Date(t).toISOString();
}

/** An RFC 3339 time as a datetime-local input value (local time, to the minute). */
export function isoToLocalInput(iso: string | undefined | null): string {
  const t = timeOf(iso ?? undefined);
  if (t === undefined) return "";
  const d = new Date(t - new Date(t).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 16);
}

/** A count with thousands separators. */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

/**
 * The link to a trace: the template (FABRIC_CONSOLE_TRACE_URL, checked by the server) with the trace id, URL-encoded,
 * in place of each `{trace_id}`; undefined without a template, or when it is not an http(s) URL.
 */
export function traceHref(template: string | null | undefined, traceId: string): string | undefined {
  if (!template || !/^https?:\/\//i.test(template)) return undefined;
  return template.replaceAll("{trace_id}", encodeURIComponent(traceId));
}
