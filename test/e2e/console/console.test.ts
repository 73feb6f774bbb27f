import { describe, it, expect, beforeAll, afterAll, afterEach } from "vitest";
import type { Page } from "playwright-core";
import {
  DEFAULT_TENANT,
  ECHO,
  FAIL,
  FANOUT,
  GATE,
  PLAN_NODE_TYPE_ID,
  SLEEP,
  launchBrowser,
  open,
  signIn,
  startConsoleFabric,
  tid,
  waitForText,
  type ConsoleBrowser,
  type ConsoleFabric,
  type WatchedPage,
} from "./harness.js";
import { eventually } from "../../run-client.js";

// The console's flows in Debian's chromium against `fabric dev`, once with auth off and once with auth required
// (the person pastes a token on #/login first). After each test, any error the page threw or logged fails it.
// The fabric with auth required also has FABRIC_CONSOLE_TRACE_URL, so a run's trace id is a link there and plain
// text in the other.

/** Marks the window, so a test can tell the page was updated in place rather than loaded again. */
const markWindow = (page: Page) => page.evaluate(() => ((window as unknown as { __nf_mark: number }).__nf_mark = 1));
const stillMarked = (page: Page) => page.evaluate(() => (window as unknown as { __nf_mark?: number }).__nf_mark === 1);

/** Jaeger's trace page, as an operator would configure it (nothing needs to listen there: the link is not followed). */
const TRACE_URL = "http://127.0.0.1:16686/trace/{trace_id}";
const TRACE = { trace_id: "4bf92f3577b34da6a3ce929d0e0e4736", span_id: "00f067aa0ba902b7" };

describe.each([
  { auth: false, traceUrl: undefined },
  { auth: true, traceUrl: TRACE_URL },
])("the console (auth required: $auth, trace URL: $traceUrl)", ({ auth, traceUrl }) => {
  let f: ConsoleFabric;
  let browser: ConsoleBrowser;

  beforeAll(async () => {
    f = await startConsoleFabric({ auth, env: traceUrl ? { FABRIC_CONSOLE_TRACE_URL: traceUrl } : {} });
    browser = await launchBrowser();
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await f?.stop();
  });
  afterEach(async () => {
    const errors = browser.takeErrors();
    for (const p of browser.context.pages()) await p.close();
    expect(errors, "errors in the browser's console").toEqual([]);
  });

  /** A fresh tab, signed in as the default tenant when auth is on. */
  async function signedIn(): Promise<WatchedPage> {
    const w = await browser.newPage();
    await signIn(w.page, f);
    return w;
  }

  it("starts a run from the form generated from the node type's input_schema, and lands on the run page", async () => {
    const { page } = await signedIn();
    await open(page, f, "#/start");
    // Type once the catalogue's suggestions are in: the field is controlled without onInput, so a re-render while
    // typing (the catalogue arriving) puts back the old value (reported to the console's authors).
    await page.locator(`#start-node-type-ids option[value="${ECHO.node_type_id}"]`).waitFor({ state: "attached" });
    await tid(page, "start-node-type").fill(ECHO.node_type_id);
    // The pick is made when the field is left, as a person tabs on to the form.
    await tid(page, "start-node-type").press("Tab");
    const form = tid(page, "start-form");
    await waitForText(form, /demo\.echo@1\.0\.0/);
    // demo.echo's input_schema is any object, which the form takes as JSON.
    await form.getByTestId("json-field").fill('{"greeting": "hello from the form"}');
    await tid(page, "start-submit").click();
    await page.waitForFunction(() => /^#\/runs\/run_/.test(location.hash), undefined, { timeout: 15_000 });
    const runId = await page.evaluate(() => decodeURIComponent(/^#\/runs\/([^/?]+)/.exec(location.hash)![1]!));
    await waitForText(tid(page, "run-state"), /completed/);
    const run = await f.waitForState(runId, "completed");
    expect(run.extensions["nodefabric.outputs"]).toEqual({ echo: { greeting: "hello from the form" } });
  }, 60_000);

  it("refuses, in the page, an input its schema does not allow, naming the field", async () => {
    const { page } = await signedIn();
    await open(page, f, `#/start?type=${SLEEP.node_type_id}&version=${SLEEP.version}`);
    await tid(page, "start-form").waitFor();
    const before = (await f.api("GET", `${f.gateway}/v1/runs?node_type_id=${SLEEP.node_type_id}`)).body.length;
    // ms is required: submitting the empty form stays on the page and says so.
    await tid(page, "start-submit").click();
    await waitForText(tid(page, "start-errors"), /ms/);
    expect(await page.evaluate(() => location.hash)).toMatch(/^#\/start/);
    expect((await f.api("GET", `${f.gateway}/v1/runs?node_type_id=${SLEEP.node_type_id}`)).body.length).toBe(before);
  }, 60_000);

  it("shows a run complete live, without reloading the page", async () => {
    const { page } = await signedIn();
    const run = await f.startRun(SLEEP, { ms: 3000 });
    await open(page, f, `#/runs/${run.run_id}`);
    await waitForText(tid(page, "run-state"), /queued|running/);
    await markWindow(page);
    await waitForText(tid(page, "run-state"), /completed/, 20_000);
    expect(await stillMarked(page), "the page was loaded again").toBe(true);
  }, 60_000);

  it(`shows the trace id of a run started with one${traceUrl ? ", a link to the configured trace URL" : ""}, and no trace fact for a run without`, async () => {
    const { page } = await signedIn();
    const traced = await f.startRun(ECHO, { traced: true }, { wait: 10, runContext: { trace: TRACE } });
    expect(traced.run_context?.trace?.trace_id).toBe(TRACE.trace_id);
    await open(page, f, `#/runs/${traced.run_id}`);
    const fact = tid(page, "run-trace");
    await waitForText(fact, new RegExp(`^Trace ${TRACE.trace_id}$`));
    const link = fact.locator("a");
    if (traceUrl) {
      expect(await link.getAttribute("href")).toBe(`http://127.0.0.1:16686/trace/${TRACE.trace_id}`);
      expect(await link.getAttribute("target")).toBe("_blank");
      expect(await link.getAttribute("rel")).toMatch(/\bnoopener\b/);
    } else {
      expect(await link.count()).toBe(0);
    }

    const plain = await f.startRun(ECHO, { traced: false }, { wait: 10 });
    await open(page, f, `#/runs/${plain.run_id}`);
    await waitForText(tid(page, "run-state"), /completed/);
    await waitForText(tid(page, "run-duration"), /Duration/);
    expect(await fact.count()).toBe(0);
  }, 60_000);

  it("opens a failed NodeRun and shows its error code and message", async () => {
    const { page } = await signedIn();
    const run = await f.startRun(FAIL, { code: "card_declined", message: "the card was declined" }, { wait: 10 });
    expect(run.state).toBe("failed");
    await open(page, f, `#/runs/${run.run_id}`);
    await waitForText(tid(page, "run-state"), /failed/);
    await tid(page, "node-row").first().click();
    const panel = tid(page, "node-panel");
    await panel.waitFor();
    expect(await panel.getAttribute("data-node-run-id")).toBe(run.root_node_run_id);
    const error = panel.getByTestId("node-error");
    await waitForText(error.getByTestId("error-code"), /card_declined/);
    await waitForText(error.getByTestId("error-message"), /the card was declined/);
    // The panel is a link of its own: #/runs/<id>?node=<nr>.
    expect(await page.evaluate(() => location.hash)).toContain(`node=${run.root_node_run_id}`);
  }, 60_000);

  it("approves a parked NodeRun from the approvals page, and the run then completes", async () => {
    const { page } = await signedIn();
    const run = await f.startRun(GATE, { note: "ship it" });
    // Parked: the PDP asked for a person before console.gate executes.
    await eventually(async () => {
      const r = await f.api("GET", `${f.gateway}/v1/approvals?run_id=${run.run_id}&state=pending`);
      return r.status === 200 && r.body.length === 1 ? true : undefined;
    }, 15_000, "the approval of console.gate");
    await open(page, f, "#/approvals");
    await tid(page, "approvals-table").waitFor();
    const row = tid(page, "approval-row").filter({ hasText: run.run_id });
    await row.getByTestId("approve").click();
    await f.waitForState(run.run_id, "completed", { ms: 20_000 });
    await open(page, f, `#/runs/${run.run_id}`);
    await waitForText(tid(page, "run-state"), /completed/);
  }, 60_000);

  it("cancels a sleeping run", async () => {
    const { page } = await signedIn();
    const run = await f.startRun(SLEEP, { ms: 600_000 });
    await f.waitForState(run.run_id, "running");
    await open(page, f, `#/runs/${run.run_id}`);
    await waitForText(tid(page, "run-state"), /running/);
    page.once("dialog", (d) => void d.accept());
    await tid(page, "cancel-run").click();
    await waitForText(tid(page, "run-state"), /canceled/, 20_000);
    expect((await f.waitForState(run.run_id, "canceled")).state).toBe("canceled");
  }, 60_000);

  it("opens a 1,000-child fan-out, grouped by node type and state, and scrolls it with far fewer rows in the page", async () => {
    const run = await f.startRun(FANOUT, { children: 1000 });
    await f.waitForState(run.run_id, "completed", { ms: 120_000 });
    const { page } = await signedIn();
    await open(page, f, `#/runs/${run.run_id}`);
    // The 1,000 children come grouped by node type and state, with their counts.
    const groups = tid(page, "node-group-row");
    await groups.first().waitFor();
    const counted = await groups.evaluateAll((els) => els.map((e) => `${e.getAttribute("data-node-type")} ${e.getAttribute("data-state")} ${e.getAttribute("data-count")}`));
    const children = (await f.api("GET", `${f.gateway}/v1/runs/${run.run_id}/node-runs`)).body.filter((n: { parent_node_run_id?: string }) => n.parent_node_run_id);
    expect(children).toHaveLength(1000);
    const expected = new Map<string, number>();
    for (const c of children) expected.set(`${c.node_type_ref.node_type_id} ${c.state}`, (expected.get(`${c.node_type_ref.node_type_id} ${c.state}`) ?? 0) + 1);
    expect(counted.sort()).toEqual([...expected].map(([k, n]) => `${k} ${n}`).sort());

    // Opening the biggest group puts hundreds of rows in the list, but only a screenful in the page.
    const echoes = groups.and(page.locator('[data-node-type="demo.echo"][data-state="completed"]'));
    await echoes.click();
    const list = tid(page, "node-list");
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="node-list"]')?.getAttribute("data-rows")) > 700, undefined, { timeout: 10_000 });
    const rowIds = () => tid(page, "node-row").evaluateAll((els) => els.map((e) => e.getAttribute("data-node-run-id")!));
    const first = await rowIds();
    expect(first.length).toBeGreaterThan(5);
    expect(first.length).toBeLessThan(100);
    // The groups after the open one are not in the page until the list is scrolled to them.
    expect(await groups.and(page.locator('[data-node-type="demo.fail"]')).count()).toBe(0);

    await list.evaluate((el) => (el.scrollTop = el.scrollHeight));
    await groups.and(page.locator('[data-node-type="demo.fail"]')).waitFor({ timeout: 5_000 });
    const last = await rowIds();
    expect(last.length).toBeLessThan(100);
    const revealed = last.filter((id) => !first.includes(id));
    expect(revealed.length).toBeGreaterThan(5);
    const echoIds = new Set(children.filter((c: { node_type_ref: { node_type_id: string } }) => c.node_type_ref.node_type_id === "demo.echo").map((c: { node_run_id: string }) => c.node_run_id));
    expect(revealed.every((id) => echoIds.has(id))).toBe(true);
  }, 180_000);

  it("finds node types by search, and draws a declarative composite's plan as a graph", async () => {
    const { page } = await signedIn();
    await open(page, f, "#/node-types");
    await tid(page, "node-type-row").first().waitFor();
    await tid(page, "node-types-search").fill("fan");
    const ids = () => tid(page, "node-type-row").evaluateAll((els) => els.map((e) => e.getAttribute("data-node-type-id")));
    await eventually(async () => ((await ids()).includes("demo.echo") ? undefined : true), 10_000, "the search to apply");
    expect((await ids()).sort()).toEqual(["console.fanout", "examples.fanout"]);

    await open(page, f, `#/node-types/${PLAN_NODE_TYPE_ID}`);
    const graph = tid(page, "plan-graph");
    await graph.waitFor();
    const steps = await graph.getByTestId("plan-step").evaluateAll((els) => els.map((e) => e.getAttribute("data-step")));
    expect(steps).toEqual(expect.arrayContaining(["weather", "each", "audit"]));
    const edges = await graph.getByTestId("plan-edge").evaluateAll((els) => els.map((e) => `${e.getAttribute("data-from")}>${e.getAttribute("data-to")}`));
    // each reads the weather step's outputs; audit runs after each.
    expect(edges).toEqual(expect.arrayContaining(["weather>each", "each>audit"]));
  }, 60_000);

  if (auth) {
    it("sends a page without a token to the login page, and keeps a pasted token out of localStorage", async () => {
      const w = await browser.newPage();
      // Without a token the API answers 401, which chromium logs as a failed load; that is what sends the page to login.
      w.allow(/status of 401/);
      await open(w.page, f, "#/runs");
      await w.page.waitForFunction(() => location.hash.startsWith("#/login"), undefined, { timeout: 10_000 });
      await tid(w.page, "token-input").waitFor();
      const token = await f.tokenFor(DEFAULT_TENANT);
      await tid(w.page, "token-input").fill(token);
      await tid(w.page, "token-submit").click();
      await w.page.waitForFunction(() => !location.hash.startsWith("#/login"), undefined, { timeout: 10_000 });
      const local = await w.page.evaluate(() => JSON.stringify({ ...localStorage }));
      expect(local).not.toContain(token);
    }, 60_000);

    it("shows a token of another tenant none of the first tenant's runs", async () => {
      const mine = await f.startRun(ECHO, { secret: "acme only" }, { tenant: DEFAULT_TENANT, wait: 10 });
      const theirs = await f.startRun(ECHO, { hello: "globex" }, { tenant: "globex", wait: 10 });
      const w = await browser.newPage();
      await signIn(w.page, f, "globex");
      await open(w.page, f, "#/runs");
      const table = tid(w.page, "runs-table");
      await waitForText(table, new RegExp(theirs.run_id));
      expect(await table.textContent()).not.toContain(mine.run_id);
      // The other tenant's run is not found (404), as the API answers; chromium logs the failed load.
      w.allow(/status of 404/);
      await open(w.page, f, `#/runs/${mine.run_id}`);
      await waitForText(tid(w.page, "run-error-load"), /run_not_found/);
      expect(await tid(w.page, "run-state").count()).toBe(0);
    }, 60_000);
  }
});
