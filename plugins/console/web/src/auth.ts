/**
 * Where the console keeps the caller's bearer token. By default in sessionStorage: it is gone when the tab closes.
 * Only when the user ticks "Remember on this device" does it go to localStorage, and the login page says so. Signing
 * out clears both. The token is never sent anywhere but the fabric's own API (see api.ts).
 */

const KEY = "nodefabric.console.token";

type Listener = () => void;
const listeners = new Set<Listener>();

function read(storage: Storage): string | undefined {
  try {
    return storage.getItem(KEY) ?? undefined;
  } catch {
    // storage disabled (private mode, a sandboxed frame): no token kept
    return undefined;
  }
}

/** The token to send, if any: this tab's first, then a remembered one. */
export function getToken(): string | undefined {
  return read(sessionStorage) ?? read(localStorage);
}

/** Whether the current token is kept in localStorage (survives closing the browser). */
export function isRemembered(): boolean {
  return read(sessionStorage) === undefined && read(localStorage) !== undefined;
}

/** Keeps a token: in this tab only, or on this device when `remember` is true. */
export function setToken(token: string, remember = false): void {
  const t = token.trim();
  clearToken(false);
  try {
    (remember ? localStorage : sessionStorage).setItem(KEY, t);
  } catch {
    // storage disabled: nothing kept; the caller's next request will ask again
  }
  notify();
}

/** Forgets the token everywhere it may be kept. */
export function clearToken(announce = true): void {
  for (const s of [sessionStorage, localStorage]) {
    try {
      s.removeItem(KEY);
    } catch {
      // storage disabled
    }
  }
  if (announce) notify();
}

/** Calls `fn` whenever the token changes (sign in or out); returns the unsubscribe function. */
export function onTokenChange(fn: Listener): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function notify(): void {
  for (const fn of listeners) fn();
}

/**
 * The claims of a JWT, read without verifying it: only for what the page shows (who is signed in, whether the token
 * is confined to a tenant, when it expires). The services verify every token themselves.
 */
export function tokenClaims(token = getToken()): Record<string, unknown> | undefined {
  if (!token) return undefined;
  const part = token.split(".")[1];
  if (!part) return undefined;
  try {
    const b64 = part.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(part.length / 4) * 4, "=");
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
    return typeof claims === "object" && claims !== null && !Array.isArray(claims) ? (claims as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The tenant the token is confined to, if it is. */
export function tokenTenant(token = getToken()): string | undefined {
  const t = tokenClaims(token)?.tenant_id;
  return typeof t === "string" ? t : undefined;
}

/** Seconds until the token expires (negative once expired), or undefined when it says nothing. */
export function tokenExpiresIn(token = getToken()): number | undefined {
  const exp = tokenClaims(token)?.exp;
  return typeof exp === "number" ? exp - Date.now() / 1000 : undefined;
}
