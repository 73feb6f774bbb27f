/**
 * The headers of every console response. The Content-Security-Policy lets the page run only its own scripts and
 * styles, and talk only to its gateway, the registry and (with OIDC login) the identity provider: a script injected
 * through a run's data could neither run nor send anything elsewhere.
 */

/** The origin of a URL, or undefined for one that is not http(s). */
export function originOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/** The console's Content-Security-Policy, connecting to 'self' and the given origins. */
export function contentSecurityPolicy(connectOrigins: ReadonlyArray<string | undefined>): string {
  const connect = ["'self'", ...new Set(connectOrigins.filter((o): o is string => o !== undefined))];
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${connect.join(" ")}`,
    "font-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** The headers set on every console response besides the CSP. */
export const STATIC_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
};
