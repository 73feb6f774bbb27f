/**
 * What the console's browser tests stand on: a fabric started as a user starts it (`fabric dev`, a child process,
 * with auth off or required), Debian's chromium driven by playwright-core, and a watch on every page for errors,
 * since a test fails when the page throws or logs an error.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext, type Locator, type Page } from "playwright-core";
import { freePortBase, runFabric, startFabricProcess, type FabricProcess } from "../fabric-cli.js";
import { call, eventually, type JsonAnswer } from "../../run-client.js";

export const REPO = fileURLToPath(new URL("../../..", import.meta.url));
export const CHROMIUM = "/usr/bin/chromium";
const CONSOLE_HANDLERS = path.join(REPO, "test/fixtures/console-handlers");

export const ECHO = { node_type_id: "demo.echo", version: "1.0.0" };
export const SLEEP = { node_type_id: "demo.sleep", version: "1.0.0" };
export const FAIL = { node_type_id: "demo.fail", version: "1.0.0" };
export const GATE = { node_type_id: "console.gate", version: "1.0.0" };
export const FANOUT = { node_type_id: "console.fanout", version: "1.0.0" };
/** The declarative composite whose plan the node-type page draws (published through the registry, as docs/plans.md shows). */
export const PLAN_NODE_TYPE_ID = "console.trip-brief";

/** Everything allowed, except that console.gate waits for a person before it executes. */
const POLICY = `
@id("allow-all")
permit(principal, action, resource);

@id("approve-console-gate")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"console.gate");
`;

/** What a person using the console may do: read and write runs, approve, and read the catalogue. */
const USER_SCOPES = "runs:read runs:write approvals:write node-types:read";
const USER_AUDIENCES = ["run-gateway", "node-registry"];

export interface ConsoleFabric {
  auth: boolean;
  process: FabricProcess;
  gateway: string;
  registry: string;
  /** The console's address: the gateway's /console/. */
  consoleUrl: string;
  /** A token a person of `tenant` pastes into the login page (auth on only). */
  tokenFor(tenant: string): Promise<string>;
  /** Calls the gateway or registry as a person of `tenant` would (no header with auth off). */
  api(method: string, url: string, body?: unknown, tenant?: string, headers?: Record<string, string>): Promise<JsonAnswer>;
  /** Starts a run through the gateway as `tenant`; the run as the gateway answered (201 or, with wait, 200). */
  startRun(ref: { node_type_id: string; version: string }, input: unknown, o?: { tenant?: string; wait?: number; runContext?: Record<string, unknown> }): Promise<Record<string, any>>;
  /** Polls the run until it is in `state`. */
  waitForState(runId: string, state: string, o?: { tenant?: string; ms?: number }): Promise<Record<string, any>>;
  stop(): Promise<void>;
}

export const DEFAULT_TENANT = "acme";

/**
 * Starts `fabric dev` with the demo and example handlers, the console fixture handlers and the approval policy; with
 * `auth`, authentication is required (`--auth`, its dev keys minting the tokens); `env` is added to the child's
 * environment (FABRIC_CONSOLE_TRACE_URL). Resolves once the executors serve every node type the tests use and the
 * plan composite is published.
 */
export async function startConsoleFabric(o: { auth: boolean; env?: NodeJS.ProcessEnv }): Promise<ConsoleFabric> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), o.auth ? "nf-console-auth-" : "nf-console-"));
  const policyFile = path.join(dataDir, "policy.cedar");
  writeFileSync(policyFile, POLICY);
  const args = [
    "dev",
    "--port-base",
    String(await freePortBase()),
    "--data-dir",
    dataDir,
    "--policy",
    policyFile,
    ...(o.auth ? ["--auth"] : []),
    "--handlers",
    "@nodefabric/handler-demo",
    "@nodefabric/handler-examples",
    CONSOLE_HANDLERS,
  ];
  const proc = await startFabricProcess(args, { cwd: REPO, env: o.env });
  const gateway = proc.urls["run-gateway"]!;
  const registry = proc.urls["node-registry"]!;
  const keyFile = path.join(dataDir, "keys", "signing-key.json");

  const tokens = new Map<string, Promise<string>>();
  const mint = (key: string, args: string[]) => {
    if (!tokens.has(key)) {
      tokens.set(
        key,
        runFabric(["token", "mint", ...args, "--key", keyFile], { cwd: REPO }).then((r) => {
          if (r.code !== 0) throw new Error(`fabric token mint failed (${r.code}): ${r.stderr}`);
          return r.stdout.trim();
        }),
      );
    }
    return tokens.get(key)!;
  };
  const tokenFor = (tenant: string) => {
    if (!o.auth) throw new Error("no tokens with auth off");
    return mint(`user:${tenant}`, [...USER_AUDIENCES.flatMap((a) => ["--aud", a]), "--scope", USER_SCOPES, "--tenant", tenant, "--sub", `user-of-${tenant}`]);
  };
  // The test's own setup publishes a node type, which no console user may.
  const operatorHeaders = async (): Promise<Record<string, string>> =>
    o.auth ? { authorization: `Bearer ${await mint("operator", ["--aud", "node-registry", "--scope", "node-types:write"])}` } : {};
  const headersFor = async (tenant: string): Promise<Record<string, string>> => (o.auth ? { authorization: `Bearer ${await tokenFor(tenant)}` } : {});

  const api: ConsoleFabric["api"] = async (method, url, body, tenant = DEFAULT_TENANT, headers = {}) =>
    call(method, url, body, { ...(await headersFor(tenant)), ...headers });

  const it: ConsoleFabric = {
    auth: o.auth,
    process: proc,
    gateway,
    registry,
    consoleUrl: `${gateway}/console/`,
    tokenFor,
    api,
    async startRun(ref, input, so = {}) {
      const body = { root_node_type_ref: ref, input, ...(so.runContext ? { run_context: so.runContext } : {}) };
      const r = await api("POST", `${gateway}/v1/runs`, body, so.tenant, so.wait ? { prefer: `wait=${so.wait}` } : {});
      if (r.status !== 200 && r.status !== 201 && r.status !== 202) throw new Error(`starting ${ref.node_type_id} answered ${r.status}: ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async waitForState(runId, state, so = {}) {
      return eventually(
        async () => {
          const r = await api("GET", `${gateway}/v1/runs/${runId}`, undefined, so.tenant);
          return r.status === 200 && r.body.state === state ? r.body : undefined;
        },
        so.ms ?? 30_000,
        `run ${runId} ${state}`,
      );
    },
    async stop() {
      await proc.stop();
    },
  };

  try {
    const ready = [ECHO, SLEEP, FAIL, GATE, FANOUT];
    await eventually(
      async () => {
        for (const ref of ready) {
          const r = await api("GET", `${registry}/v1/executors?node_type_id=${ref.node_type_id}`);
          if (r.status !== 200 || r.body.length === 0) return undefined;
        }
        return true;
      },
      30_000,
      "executors serving the console's node types",
    );
    const published = await call("POST", `${registry}/v1/node-types`, { node_type: TRIP_BRIEF }, await operatorHeaders());
    if (published.status >= 300) throw new Error(`publishing ${PLAN_NODE_TYPE_ID} answered ${published.status}: ${JSON.stringify(published.body)}`);
  } catch (err) {
    await proc.stop();
    throw new Error(`${(err as Error).message}\nfabric output:\n${proc.output()}`);
  }
  return it;
}

/** A declarative composite, as in docs/plans.md: one step, a for_each step, and a step after it. */
const TRIP_BRIEF = {
  node_type_id: PLAN_NODE_TYPE_ID,
  version: "1.0.0",
  kind: "composite",
  description: "Weather for a city, then one echo per item, then an audit note",
  input_schema: {
    type: "object",
    properties: { city: { type: "string" }, items: { type: "array", items: { type: "string" } } },
    required: ["city"],
  },
  extensions: {
    "nodefabric.plan": {
      steps: [
        { id: "weather", node_type_ref: ECHO, inputs: { city: "{% inputs.city %}", units: "metric" } },
        { id: "each", node_type_ref: ECHO, for_each: "{% inputs.items %}", inputs: { v: "{% item %}", city: "{% steps.weather.outputs.echo.city %}" } },
        { id: "audit", node_type_ref: ECHO, inputs: { note: "done" }, after: ["each"] },
      ],
      outputs: { city: "{% steps.weather.outputs.echo.city %}", count: "{% $count(steps.each.outputs) %}" },
    },
  },
};

/** A page under watch: every uncaught error and every console error it logs is kept, for the test to assert on. */
export interface WatchedPage {
  page: Page;
  errors: string[];
  /** Messages expected in this test (a 401 before login, a 404 for another tenant's run), left out of `unexpected`. */
  allow(pattern: RegExp): void;
  unexpected(): string[];
}

export interface ConsoleBrowser {
  context: BrowserContext;
  newPage(): Promise<WatchedPage>;
  /** The unexpected errors of every page opened since the last call (and forgets them). */
  takeErrors(): string[];
  close(): Promise<void>;
}

/**
 * Launches Debian's chromium, headless, with a fresh profile in a temporary directory. The flags keep it from
 * reaching out to the network on its own (the fabric works offline, and so must its tests).
 */
export async function launchBrowser(o: { viewport?: { width: number; height: number } } = {}): Promise<ConsoleBrowser> {
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), "nf-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: o.viewport ?? { width: 1280, height: 800 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  let watched: WatchedPage[] = [];
  const watch = (page: Page): WatchedPage => {
    const errors: string[] = [];
    const allowed: RegExp[] = [];
    page.on("pageerror", (err) => errors.push(`page error: ${err.stack ?? err.message}`));
    page.on("console", (msg) => {
      if (msg.type() === "error") errors.push(`console error: ${msg.text()} (${msg.location().url})`);
    });
    page.on("crash", () => errors.push("the page crashed"));
    const w: WatchedPage = {
      page,
      errors,
      allow: (p) => allowed.push(p),
      unexpected: () => errors.filter((e) => !allowed.some((p) => p.test(e))),
    };
    watched.push(w);
    return w;
  };
  // The persistent context opens with a blank page; the tests open their own.
  for (const p of context.pages()) await p.close();
  return {
    context,
    newPage: async () => watch(await context.newPage()),
    takeErrors() {
      const all = watched.flatMap((w) => w.unexpected());
      watched = [];
      return all;
    },
    close: () => context.close(),
  };
}

/** The element with this data-testid. */
export const tid = (page: Page, id: string) => page.getByTestId(id);

/** Opens a route of the console (a hash such as "#/runs"). */
export async function open(page: Page, f: ConsoleFabric, hash: string): Promise<void> {
  await page.goto(`${f.consoleUrl}${hash}`);
}

/** Pastes a token on #/login and waits until the page has left the login route. */
export async function login(page: Page, f: ConsoleFabric, token: string, then = "#/runs"): Promise<void> {
  await open(page, f, "#/login");
  await tid(page, "token-input").fill(token);
  await tid(page, "token-submit").click();
  await page.waitForFunction(() => !location.hash.startsWith("#/login"), undefined, { timeout: 10_000 });
  if (then) await open(page, f, then);
}

/** With auth on, signs the page in as `tenant`; with auth off, nothing to do. */
export async function signIn(page: Page, f: ConsoleFabric, tenant = DEFAULT_TENANT): Promise<void> {
  if (f.auth) await login(page, f, await f.tokenFor(tenant), "");
}

/** Waits until the element's text matches (playwright-core has no `expect`; this is its toHaveText). */
export async function waitForText(locator: Locator, pattern: RegExp, ms = 15_000): Promise<string> {
  const end = Date.now() + ms;
  let last = "";
  for (;;) {
    last = (await locator.first().textContent({ timeout: Math.max(1, end - Date.now()) }).catch(() => null)) ?? "";
    if (pattern.test(last)) return last;
    if (Date.now() > end) throw new Error(`the text of ${locator} did not match ${pattern} in ${ms} ms; last: ${JSON.stringify(last.slice(0, 300))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
