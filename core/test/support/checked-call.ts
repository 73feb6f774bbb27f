/**
 * A JSON call to a service under test that also checks the contract on every answer: a non-2xx must be an
 * ErrorEnvelope.
 */
import { expect } from "vitest";
import { request } from "undici";
import { validatorFor } from "@nodefabric/schemas";

const isEnvelope = validatorFor("error_envelope");

export interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Sends `body` (a string is sent as is) and parses the answer; fails the test when an error is not an envelope. */
export async function checkedCall(base: string, method: string, urlPath: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res> {
  const raw = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  const h = raw !== undefined && !("content-type" in headers) ? { "content-type": "application/json", ...headers } : headers;
  const res = await request(base + urlPath, { method: method as "GET", body: raw, headers: h });
  const text = await res.body.text();
  const parsed = text ? JSON.parse(text) : undefined;
  if (res.statusCode >= 400) expect(isEnvelope(parsed), `${method} ${urlPath} answered ${res.statusCode} without an ErrorEnvelope: ${text}`).toBe(true);
  return { status: res.statusCode, headers: res.headers, body: parsed };
}
