/**
 * The OAuth 2 client credentials grant (RFC 6749 §4.4) for `callHttpOperation` and `http.request`: a token is asked
 * for once and reused, per token URL, client credentials and scopes, until shortly before it expires, so a busy node type does
 * not ask the authorisation server for a new token on every call.
 */
import { createHash } from "node:crypto";
import { upstreamUnavailableError } from "./network-failure.js";
import { HandlerError } from "./handler-error.js";
import { fail } from "./failure-codes.js";
import { readResponseBytes } from "./response-body.js";
import { retryAfterMs } from "./retry-after.js";

/** What a client credentials token request needs. */
export interface ClientCredentials {
  tokenUrl: URL;
  clientId: string;
  clientSecret: string;
  scopes: readonly string[];
  /** Sends the token request (`ctx.fetch`, or `ctx.egress.fetch` under `http.request`). */
  fetch: typeof globalThis.fetch;
}

/** How much of a token endpoint's answer is read: a token answer is small. */
const MAX_TOKEN_ANSWER_BYTES = 64 * 1024;
/** How much of a failed token answer is kept in the error. */
const ERROR_BODY_BYTES = 2048;
/** The most tokens remembered; the oldest is dropped past it. */
const MAX_CACHED_TOKENS = 256;

interface CacheEntry {
  /** The request in flight, which concurrent calls share. */
  pending?: Promise<string>;
  token?: string;
  /** Epoch ms after which `token` is asked for again. */
  refreshAt?: number;
}

const tokens = new Map<string, CacheEntry>();

/** Forgets every cached token (tests, or after the credentials changed). */
export function forgetOAuthTokens(): void {
  tokens.clear();
}

/**
 * An access token for `credentials`: the cached one while it is fresh, else a new one from the token endpoint. A
 * failure is a HandlerError `upstream_error` naming the token URL, retryable for a 5xx, 408 or 429; a connection that
 * fails is the retryable `upstream_unavailable`, as for any upstream.
 */
export async function clientCredentialsToken(credentials: ClientCredentials): Promise<string> {
  // The secret is part of the key too (as a digest): a token is reused only by a caller that could have asked for it.
  const secretDigest = createHash("sha256").update(credentials.clientSecret).digest("base64");
  const key = JSON.stringify([credentials.tokenUrl.href, credentials.clientId, secretDigest, [...credentials.scopes].sort()]);
  const entry = tokens.get(key);
  if (entry?.token !== undefined && Date.now() < entry.refreshAt!) return entry.token;
  if (entry?.pending) return entry.pending;
  const pending = requestToken(credentials).then(
    ({ token, expiresIn }) => {
      // Without expires_in the lifetime is unknown, so the token is not reused.
      if (expiresIn === undefined) tokens.delete(key);
      else tokens.set(key, { token, refreshAt: Date.now() + lifetimeMs(expiresIn) });
      return token;
    },
    (err: unknown) => {
      tokens.delete(key);
      throw err;
    },
  );
  tokens.set(key, { pending });
  if (tokens.size > MAX_CACHED_TOKENS) tokens.delete(tokens.keys().next().value!);
  return pending;
}

/** How long a token of `expiresIn` seconds is reused: until a tenth of its life (at most a minute) is left. */
function lifetimeMs(expiresIn: number): number {
  return Math.max(0, expiresIn - Math.min(60, expiresIn / 10)) * 1000;
}

/** `application/x-www-form-urlencoded` of one value, as RFC 6749 §2.3.1 asks for the client id and secret. */
function formEncoded(text: string): string {
  return new URLSearchParams({ v: text }).toString().slice(2);
}

/** Where the token request went, for messages: no query, which might carry something private. */
function describe(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

async function requestToken(credentials: ClientCredentials): Promise<{ token: string; expiresIn?: number }> {
  const { tokenUrl } = credentials;
  const form = new URLSearchParams({ grant_type: "client_credentials" });
  if (credentials.scopes.length > 0) form.set("scope", credentials.scopes.join(" "));
  const basic = Buffer.from(`${formEncoded(credentials.clientId)}:${formEncoded(credentials.clientSecret)}`, "utf8").toString("base64");
  let res: Response;
  let bytes: Uint8Array;
  try {
    res = await credentials.fetch(tokenUrl, {
      method: "POST",
      headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body: form.toString(),
      redirect: "manual",
    });
    const ok = res.status >= 200 && res.status < 300;
    bytes = await readResponseBytes(res, ok ? MAX_TOKEN_ANSWER_BYTES : ERROR_BODY_BYTES, !ok);
  } catch (err) {
    // A refusal of the egress policy says what to change, a failure ctx.fetch already named stays named, and a cancel is
    // the execution's own.
    if (HandlerError.is(err) || (err as Error)?.name === "AbortError") throw err;
    const unavailable = upstreamUnavailableError(err, tokenUrl);
    if (unavailable) throw unavailable;
    const timedOut = (err as Error)?.name === "TimeoutError";
    const why = (err as { cause?: { code?: unknown } })?.cause?.code ?? (err as Error)?.message ?? String(err);
    throw fail("upstream_error", `the OAuth 2 token request to ${describe(tokenUrl)} failed: ${timedOut ? "no answer in time" : String(why)}`, {
      retryable: true,
      details: { token_url: describe(tokenUrl), reason: timedOut ? "timeout" : "network" },
      cause: err,
    });
  }
  const text = new TextDecoder().decode(bytes);
  if (res.status < 200 || res.status >= 300) {
    const retryAfter = res.status === 429 || res.status === 503 ? retryAfterMs(res.headers.get("retry-after")) : undefined;
    throw fail("upstream_error", `the OAuth 2 token request to ${describe(tokenUrl)} answered ${res.status}`, {
      retryable: res.status >= 500 || res.status === 429 || res.status === 408,
      details: { token_url: describe(tokenUrl), status: res.status, body: text, ...(retryAfter !== undefined ? { retry_after_ms: retryAfter } : {}) },
    });
  }
  let answer: { access_token?: unknown; expires_in?: unknown } | undefined;
  try {
    answer = JSON.parse(text) as typeof answer;
  } catch {
    answer = undefined;
  }
  if (typeof answer?.access_token !== "string" || answer.access_token === "") {
    throw fail("upstream_error", `the OAuth 2 token request to ${describe(tokenUrl)} answered ${res.status} without an access_token`, {
      retryable: false,
      details: { token_url: describe(tokenUrl), status: res.status },
    });
  }
  const expiresIn = Number(answer.expires_in);
  return { token: answer.access_token, expiresIn: answer.expires_in !== undefined && Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : undefined };
}
