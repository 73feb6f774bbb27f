/** #/login: paste a token (or log in with OIDC when configured). A placeholder until the login page lands. */
import { useState } from "preact/hooks";
import { setToken } from "../auth";
import { navigate, parseHash, type Route } from "../router";

export function LoginPage(props: { route: Route }) {
  const next = props.route.query.get("next") ?? "/runs";
  const reason = props.route.query.get("reason") ?? undefined;
  const [token, setValue] = useState("");
  const [remember, setRemember] = useState(false);
  const submit = (e: Event) => {
    e.preventDefault();
    if (token.trim() === "") return;
    setToken(token, remember);
    const target = parseHash(next);
    navigate(target.path.length > 0 ? target.path : ["runs"], Object.fromEntries(target.query));
  };
  return (
    <section class="page narrow">
      <h1>Sign in</h1>
      {reason && <p class="notice">{reason}</p>}
      <form onSubmit={submit} class="stack">
        <label>
          Bearer token
          <textarea data-testid="token-input" rows={5} value={token} onInput={(e) => setValue((e.target as HTMLTextAreaElement).value)} />
        </label>
        <label class="check">
          <input type="checkbox" data-testid="remember-token" checked={remember} onChange={(e) => setRemember((e.target as HTMLInputElement).checked)} />
          Remember on this device (kept in this browser's localStorage until you sign out)
        </label>
        <button type="submit" data-testid="token-submit">Sign in</button>
      </form>
    </section>
  );
}
