/**
 * Signing in with the identity provider named in config.json (`auth.oidc`): the OAuth 2.0 authorization-code flow
 * with PKCE (RFC 7636), all in the page, since the console has no server-side session. The provider sends the browser
 * back to /console/callback?code=…&state=…; the gateway serves the page there, and finishCallback trades the code
 * for an access token.
 */

export interface OidcSettings {
  issuer: string;
  client_id: string;
  scope?: string;
}

interface Discovery {
  authorization_endpoint: string;
  token_endpoint: string;
}

/** What survives the round trip to the provider (sessionStorage: this tab only, gone when it closes). */
interface PendingLogin {
  state: string;
  verifier: string;
  redirect_uri: string;
  token_endpoint: string;
  client_id: string;
  remember: boolean;
  /** The console route to go to once signed in. */
  next: string;
}

const PENDING_KEY = "nodefabric.console.oidc-pending";

/** The path the provider returns to; the gateway serves the console's page for it. */
export const CALLBACK_PATH = "callback";

export function redirectUri(): string {
  // The page lives at …/console/ (or …/console/callback when it just came back): the callback is beside it.
  const base = location.pathname.replace(/[^/]*$/, "");
  return `${location.origin}${base}${CALLBACK_PATH}`;
}

function base64Url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(bytes = 32): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(bytes)));
}

async function discover(issuer: string): Promise<Discovery> {
  const url = `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  const res = await fetch(url, { headers: { accept: "application/json" } });
  if (!res.ok) throw new Error(`the provider's discovery document (${url}) answered ${res.status}`);
  const doc = (await res.json()) as Partial<Discovery>;
  if (typeof doc.authorization_endpoint !== "string" || typeof doc.token_endpoint !== "string") {
    throw new Error(`the provider's discovery document (${url}) names no authorization_endpoint or token_endpoint`);
  }
  return { authorization_endpoint: doc.authorization_endpoint, token_endpoint: doc.token_endpoint };
}

/** Sends the browser to the provider's login page. */
export async function beginLogin(oidc: OidcSettings, remember: boolean, next: string): Promise<void> {
  if (!crypto.subtle) throw new Error("signing in needs a secure page (HTTPS, or http://localhost): this browser offers no SHA-256 here");
  const discovery = await discover(oidc.issuer);
  const verifier = randomString();
  const challenge = base64Url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
  const pending: PendingLogin = {
    state: randomString(16),
    verifier,
    redirect_uri: redirectUri(),
    token_endpoint: discovery.token_endpoint,
    client_id: oidc.client_id,
    remember,
    next,
  };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(discovery.authorization_endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", oidc.client_id);
  url.searchParams.set("redirect_uri", pending.redirect_uri);
  url.searchParams.set("scope", oidc.scope ?? "openid");
  url.searchParams.set("state", pending.state);
  url.searchParams.set("code_challenge", challenge);
  url.searchParams.set("code_challenge_method", "S256");
  location.assign(url.toString());
}

/** Whether the page was just sent back by the provider (a code, or an error, in the query). */
export function isCallback(): boolean {
  const q = new URLSearchParams(location.search);
  return q.has("state") && (q.has("code") || q.has("error"));
}

/** Trades the code in the query for an access token; the query is cleared either way, so a reload does not retry. */
export async function finishCallback(): Promise<{ accessToken: string; remember: boolean; next: string }> {
  const q = new URLSearchParams(location.search);
  const raw = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  history.replaceState(null, "", `${location.pathname.replace(new RegExp(`${CALLBACK_PATH}$`), "")}#/login`);
  if (q.has("error")) throw new Error(`the provider refused: ${q.get("error")}${q.get("error_description") ? ` (${q.get("error_description")})` : ""}`);
  if (!raw) throw new Error("this tab did not start a sign-in (or it was started in another tab): sign in again");
  const pending = JSON.parse(raw) as PendingLogin;
  // The state binds the answer to the request this tab made, so a code planted by another site is refused.
  if (q.get("state") !== pending.state) throw new Error("the provider's answer does not match the sign-in this tab started: sign in again");
  const res = await fetch(pending.token_endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: q.get("code") ?? "",
      redirect_uri: pending.redirect_uri,
      client_id: pending.client_id,
      code_verifier: pending.verifier,
    }),
  });
  const body = (await res.json().catch(() => ({}))) as { access_token?: unknown; error?: unknown; error_description?: unknown };
  if (!res.ok || typeof body.access_token !== "string") {
    const why =
      typeof body.error === "string"
        ? `${body.error}${typeof body.error_description === "string" ? `: ${body.error_description}` : ""}`
        : `status ${res.status}`;
    throw new Error(`the provider did not give a token (${why})`);
  }
  return { accessToken: body.access_token, remember: pending.remember, next: pending.next };
}
