/**
 * The console's entry: loads /console/config.json, then renders the navigation and the page the hash names.
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import "./styles.css";
import { loadConfig, type ConsoleConfig } from "./api";
import { clearToken, getToken, onTokenChange, tokenClaims } from "./auth";
import { ConfigContext } from "./config-context";
import { href, navigate, useRoute, type Route } from "./router";
import { RunsPage } from "./pages/runs";
import { RunPage } from "./pages/run";
import { ApprovalsPage } from "./pages/approvals";
import { StartPage } from "./pages/start";
import { NodeTypesPage } from "./pages/node-types";
import { NodeTypePage } from "./pages/node-type";
import { LoginPage } from "./pages/login";
import { isCallback } from "./oidc";

/** The page for a route; every page is given the route (path segments and query). */
function Page(props: { route: Route }) {
  const { route } = props;
  const [first, second] = route.path;
  switch (first) {
    case undefined:
    case "runs":
      return second === undefined ? <RunsPage route={route} /> : <RunPage key={second} route={route} />;
    case "approvals":
      return <ApprovalsPage route={route} />;
    case "start":
      return <StartPage route={route} />;
    case "node-types":
      return second === undefined ? <NodeTypesPage route={route} /> : <NodeTypePage key={second} route={route} />;
    case "login":
      return <LoginPage route={route} />;
    default:
      return (
        <section class="page">
          <h1>Not found</h1>
          <p>
            The console has no page <code>#{route.raw}</code>. <a href={href(["runs"])}>See the runs</a>.
          </p>
        </section>
      );
  }
}

/** Who is signed in, and the control to sign in or out. */
function Session(props: { config: ConsoleConfig }) {
  const [token, setTokenState] = useState(getToken());
  useEffect(() => onTokenChange(() => setTokenState(getToken())), []);
  if (!token) {
    // Signing in is offered wherever a token can matter: auth required or optional, or an OIDC login configured.
    if (!props.config.auth.required && props.config.auth.mode !== "optional" && !props.config.auth.oidc) return null;
    return (
      <a class="session" data-testid="sign-in" href={href(["login"])}>
        Sign in
      </a>
    );
  }
  const claims = tokenClaims(token);
  const who = typeof claims?.sub === "string" ? claims.sub : "token";
  const tenant = typeof claims?.tenant_id === "string" ? ` · tenant ${claims.tenant_id}` : "";
  return (
    <span class="session">
      <span class="muted" data-testid="signed-in-as">
        {who}
        {tenant}
      </span>
      <button
        type="button"
        class="link"
        data-testid="sign-out"
        onClick={() => {
          clearToken();
          navigate(["login"]);
        }}
      >
        Sign out
      </button>
    </span>
  );
}

function Nav(props: { route: Route; config: ConsoleConfig }) {
  const at = props.route.path[0] ?? "runs";
  const link = (name: string, label: string) => (
    <a href={href([name])} class={at === name ? "active" : undefined} data-testid={`nav-${name}`} aria-current={at === name ? "page" : undefined}>
      {label}
    </a>
  );
  return (
    <header class="topbar">
      <a class="brand" href={href(["runs"])}>
        NodeFabric
      </a>
      <nav>
        {link("runs", "Runs")}
        {link("approvals", "Approvals")}
        {link("start", "Start a run")}
        {link("node-types", "Node types")}
      </nav>
      <Session config={props.config} />
    </header>
  );
}

function App() {
  const route = useRoute();
  const [config, setConfig] = useState<ConsoleConfig | undefined>();
  const [failure, setFailure] = useState<string | undefined>();
  useEffect(() => {
    loadConfig().then(setConfig, (err: Error) => setFailure(err.message));
  }, []);
  // With auth required and no token, every page would only meet a 401: go to the login page at once.
  const mustSignIn = config !== undefined && config.auth.required && !getToken() && route.path[0] !== "login";
  useEffect(() => {
    if (mustSignIn) navigate(["login"], { next: route.raw || "/runs" }, true);
  }, [mustSignIn, route.raw]);
  if (failure) {
    return (
      <main class="page">
        <h1>The console cannot start</h1>
        <p class="error-text">Reading /console/config.json failed: {failure}</p>
      </main>
    );
  }
  if (!config) return <main class="page muted">Loading…</main>;
  if (mustSignIn) return <main class="page muted">Sign in to use the console…</main>;
  return (
    <ConfigContext.Provider value={config}>
      <Nav route={route} config={config} />
      <main>
        <Page route={route} />
      </main>
    </ConfigContext.Provider>
  );
}

// Back from the identity provider (/console/callback?code=…): the login page finishes the sign-in.
if (isCallback()) history.replaceState(null, "", `${location.pathname}${location.search}#/login`);

render(<App />, document.getElementById("app")!);
