/**
 * Small HTTP helpers for tests that drive a fabric over real loopback HTTP.
 */
import { request } from "undici";

export interface JsonAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Sends a JSON request and parses the JSON answer. */
export async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<JsonAnswer> {
  const res = await request(url, {
    method: method as "GET",
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** Reads a whole NDJSON stream (it must end by itself) into objects. */
export async function readNdjson(url: string, headers: Record<string, string> = {}): Promise<{ status: number; contentType: string | undefined; lines: any[] }> {
  const res = await request(url, { headersTimeout: 30_000, bodyTimeout: 30_000, headers });
  const text = await res.body.text();
  const ct = res.headers["content-type"];
  if (res.statusCode !== 200) return { status: res.statusCode, contentType: ct as string, lines: [JSON.parse(text)] };
  return { status: res.statusCode, contentType: ct as string, lines: text.split("\n").filter(Boolean).map((l) => JSON.parse(l)) };
}

/** Follows an NDJSON stream line by line; `onLine` may return true to stop reading. */
export async function followNdjson(url: string, onLine: (obj: any) => boolean | void): Promise<any[]> {
  const res = await request(url, { headersTimeout: 30_000, bodyTimeout: 30_000 });
  const seen: any[] = [];
  let buf = "";
  for await (const chunk of res.body) {
    buf += chunk.toString();
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const obj = JSON.parse(line);
      seen.push(obj);
      if (onLine(obj) === true) {
        res.body.destroy();
        return seen;
      }
    }
  }
  return seen;
}

/** Polls until `fn` returns a value other than undefined. */
export async function eventually<T>(fn: () => Promise<T | undefined>, ms = 10_000, what = "condition"): Promise<T> {
  const end = Date.now() + ms;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > end) throw new Error(`${what} not reached in ${ms} ms${lastErr ? `: ${String(lastErr)}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
