/**
 * #/login (?next=<hash>&reason=<why>): paste a bearer token, or sign in with the identity provider when config.json
 * names one (auth.oidc). Shows who the kept token says you are, and signs out.
 */
import { useEffect, useState } from "preact/hooks";
import { clearToken, getToken, isRemembered, onTokenChange, setToken, tokenClaims } from "../auth";
import { useConfig } from "../config-context";
import { beginLogin, finishCallback, isCallback } from "../oidc";
import { navigate, parseHash, type Route } from "../router";
import "./login.css";

function goNext(next: string | null): void {
  const target = parseHash(next ?? "/runs");
  navigate(target.path.length > 0 && target.path[0] !== "login" ? target.path : ["runs"], Object.fromEntries(target.query));
}

export function LoginPage({ route }: { route: Route }) {
  const config = useConfig();
  const next = route.query.get("next");
  const reason = route.query.get("reason");
  const [token, setTokenText] = useState("");
  const [remember, setRemember] = useState(false);
  const [problem, setProblem] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const [, setVersion] = useState(0);

  // Sign in and out elsewhere (another component, the 401 handler) redraws who is signed in.
  useEffect(() => onTokenChange(() => setVersion((v) => v + 1)), []);

  // Back from the identity provider: trade the code for a token, keep it, go on.
  useEffect(() => {
    if (!isCallback()) return;
    setBusy(true);
    finishCallback().then(
      ({ accessToken, remember: keep, next: after }) => {
        setToken(accessToken, keep);
        goNext(after);
      },
      (err: unknown) => {
        setBusy(false);
        setProblem((err as Error).message ?? String(err));
      },
    );
  }, []);

  const submit = (e: Event) => {
    e.preventDefault();
    const t = token.trim();
    if (t === "") {
      setProblem("Paste a token first.");
      return;
    }
    if (/\s/.test(t)) {
      setProblem('A token has no spaces in it: paste the token alone, without "Bearer".');
      return;
    }
    setToken(t, remember);
    setTokenText("");
    goNext(next);
  };

  const oidc = config.auth.oidc;
  const current = getToken();
  return (
    <section class="page narrow login-page">
      <h1>{current ? "Signed in" : "Sign in"}</h1>
      {reason && (
        <p class="notice" data-testid="login-reason">
          The fabric refused the request: {reason}
        </p>
      )}
      {!config.auth.required && (
        <p class="muted" data-testid="auth-not-required">
          This fabric does not ask for a token{config.auth.mode ? ` (auth mode ${config.auth.mode})` : ""}. You may still send one.
        </p>
      )}
      {current && <SignedIn token={current} />}
      {problem && (
        <p class="error-box" role="alert" data-testid="login-error">
          {problem}
        </p>
      )}
      {oidc && (
        <div class="oidc">
          <button
            type="button"

            data-testid="oidc-login"
            disabled={busy}
            onClick={() => {
              setBusy(true);
              setProblem(undefined);
              beginLogin(oidc, remember, next ?? "/runs").catch((err: unknown) => {
                setBusy(false);
                setProblem(`Signing in with ${oidc.issuer} failed: ${(err as Error).message ?? String(err)}`);
              });
            }}
          >
            Sign in with {hostOf(oidc.issuer)}
          </button>
          <p class="muted">or paste a token:</p>
        </div>
      )}
      <form onSubmit={submit} class="stack">
        <label>
          {current ? "Use another token" : "Bearer token"}
          <textarea
            data-testid="token-input"
            rows={5}
            spellcheck={false}
            autocomplete="off"
            value={token}
            placeholder="eyJhbGciOi…"
            onInput={(e) => setTokenText((e.currentTarget as HTMLTextAreaElement).value)}
          />
        </label>
        <label class="check">
          <input type="checkbox" data-testid="remember-token" checked={remember} onChange={(e) => setRemember((e.currentTarget as HTMLInputElement).checked)} />
          Remember on this device
        </label>
        <p class="muted small" data-testid="remember-notice">
          {remember
            ? "The token will be kept in this browser's localStorage: it stays after the tab and the browser close, until you sign out. Anyone using this browser profile can use it."
            : "The token is kept in this tab's sessionStorage only: it is gone when the tab closes."}
        </p>
        <button type="submit" data-testid="token-submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </section>
  );
}

function hostOf(issuer: string): string {
  try {
    return new URL(issuer).host;
  } catch {
    return issuer;
  }
}

/**
 * Who the token says you are. Its claims are decoded, not verified: the page holds no keys and needs none, since
 * every service verifies the token on every request. A token that says more than it may gets nothing more from them.
 */
function SignedIn({ token }: { token: string }) {
  const claims = tokenClaims(token);
  const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const scopes = [claims?.scope, claims?.scp].flatMap((s) =>
    typeof s === "string" ? s.split(" ").filter(Boolean) : Array.isArray(s) ? s.filter((x): x is string => typeof x === "string") : [],
  );
  const exp = typeof claims?.exp === "number" ? new Date(claims.exp * 1000) : undefined;
  const expired = exp !== undefined && exp.getTime() < Date.now();
  return (
    <div class="signed-in" data-testid="signed-in">
      <h2>Who the token says you are</h2>
      {claims ? (
        <dl>
          <dt>Subject</dt>
          <dd data-testid="signed-in-sub">{str(claims.sub) ?? <span class="muted">(none)</span>}</dd>
          <dt>Tenant</dt>
          <dd data-testid="signed-in-tenant">{str(claims.tenant_id) ?? <span class="muted">none: not confined to a tenant</span>}</dd>
          <dt>Scopes</dt>
          <dd data-testid="signed-in-scopes">
            {scopes.length > 0 ? [...new Set(scopes)].map((s) => <code key={s}>{s} </code>) : <span class="muted">(none)</span>}
          </dd>
          {str(claims.iss) && (
            <>
              <dt>Issuer</dt>
              <dd>{str(claims.iss)}</dd>
            </>
          )}
          {exp && (
            <>
              <dt>Expires</dt>
              <dd class={expired ? "error-text" : ""}>
                {exp.toLocaleString()}
                {expired && " (expired: sign in again)"}
              </dd>
            </>
          )}
        </dl>
      ) : (
        <p class="muted">The token is not a JWT the page can read; the fabric will tell whether it accepts it.</p>
      )}
      <p class="muted small">
        {isRemembered() ? "Kept in this browser's localStorage (remembered on this device)." : "Kept in this tab's sessionStorage (gone when the tab closes)."}{" "}
        What is shown here is what the token claims; the page does not verify it, the fabric does.
      </p>
      <button type="button" class="secondary" data-testid="login-sign-out" onClick={() => clearToken()}>
        Sign out
      </button>
    </div>
  );
}
