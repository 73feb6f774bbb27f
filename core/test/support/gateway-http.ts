/**
 * What the gateway tests share: a JSON call that keeps the raw text of the answer, the checks of a v1 payload and an
 * ErrorEnvelope, waiting for a condition, and the base URL of a listening app.
 */
import { expect } from "vitest";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import type { FastifyInstance } from "fastify";
import { validatorFor } from "@nodefabric/schemas";

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  text: string;
}

/** Sends `body` (a string is sent as is) and parses the answer; `body` is undefined when it is not JSON. */
export async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(url, {
    method: method as "GET",
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
  });
  const text = await res.body.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.statusCode, headers: res.headers, body: parsed, text };
}

export function expectValid(schema: Parameters<typeof validatorFor>[0], value: unknown): void {
  const validate = validatorFor(schema);
  const ok = validate(value);
  expect(ok, `${schema}: ${JSON.stringify(validate.errors)}`).toBe(true);
}

/** The answer is `status` with a JSON ErrorEnvelope of `code`. */
export function expectEnvelope(a: Answer, status: number, code: string): void {
  expect(a.status, a.text).toBe(status);
  expect(a.headers["content-type"]).toMatch(/^application\/json/);
  expectValid("error_envelope", a.body);
  expect(a.body.error.code).toBe(code);
}

/** Polls `fn` (a throw counts as not yet) until it answers something other than undefined. */
export async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`${what}: not reached in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function baseOf(app: FastifyInstance): string {
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}
