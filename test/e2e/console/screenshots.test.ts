import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import { ECHO, FAIL, FANOUT, GATE, PLAN_NODE_TYPE_ID, REPO, SLEEP, launchBrowser, open, startConsoleFabric, tid, waitForText, type ConsoleBrowser, type ConsoleFabric } from "./harness.js";
import { eventually } from "../../run-client.js";

// Writes the console's screenshots, docs/images/console-*.png, at 1280x800:
//   SCREENSHOTS=1 npx vitest run test/e2e/console/screenshots.test.ts
// It runs only when asked: it rewrites committed images, and each screen it shows is tested in console.test.ts.
const IMAGES = path.join(REPO, "docs/images");
const wanted = process.env.SCREENSHOTS === "1";

describe.runIf(wanted)("the console's screenshots", () => {
  let f: ConsoleFabric;
  let browser: ConsoleBrowser;
  let page: Page;
  const runs: Record<string, Record<string, any>> = {};

  beforeAll(async () => {
    mkdirSync(IMAGES, { recursive: true });
    f = await startConsoleFabric({ auth: false });
    browser = await launchBrowser({ viewport: { width: 1280, height: 800 } });
    page = (await browser.newPage()).page;
    // A few runs of every kind, so the lists have something to show.
    runs.trip = await f.startRun({ node_type_id: PLAN_NODE_TYPE_ID, version: "1.0.0" }, { city: "Oslo", items: ["museum", "fjord", "dinner"] }, { wait: 20 });
    runs.echo = await f.startRun(ECHO, { greeting: "hello" }, { wait: 10 });
    runs.failed = await f.startRun(FAIL, { code: "card_declined", message: "the card was declined by the issuer" }, { wait: 10 });
    runs.fanout = await f.startRun(FANOUT, { children: 60 }, { wait: 30 });
    runs.sleeping = await f.startRun(SLEEP, { ms: 600_000 });
    runs.gate1 = await f.startRun(GATE, { note: "deploy to production" });
    runs.gate2 = await f.startRun(GATE, { note: "refund order 1042" });
    for (const id of [runs.gate1.run_id, runs.gate2.run_id]) {
      await eventually(async () => {
        const r = await f.api("GET", `${f.gateway}/v1/approvals?run_id=${id}&state=pending`);
        return r.status === 200 && r.body.length === 1 ? true : undefined;
      }, 15_000, "an approval");
    }
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await f?.stop();
  });

  async function shoot(name: string, hash: string, ready: () => Promise<unknown>) {
    await open(page, f, hash);
    await ready();
    // Let the live updates and layout settle before the picture.
    await page.waitForTimeout(500);
    await page.screenshot({ path: path.join(IMAGES, `console-${name}.png`) });
  }

  it("takes the main screens", async () => {
    await shoot("runs", "#/runs", () => tid(page, "run-row").first().waitFor());
    await shoot("run", `#/runs/${runs.trip.run_id}`, () => waitForText(tid(page, "run-state"), /completed/));
    const failedChild = await eventually(async () => {
      const r = await f.api("GET", `${f.gateway}/v1/runs/${runs.fanout.run_id}/node-runs`);
      return r.body.find((n: { state: string }) => n.state === "failed");
    });
    await shoot("node-error", `#/runs/${runs.fanout.run_id}?node=${failedChild.node_run_id}`, () => tid(page, "node-error").waitFor());
    await shoot("approvals", "#/approvals", () => tid(page, "approve").first().waitFor());
    await shoot("start", `#/start?type=${PLAN_NODE_TYPE_ID}&version=1.0.0`, async () => {
      await tid(page, "start-form").waitFor();
      // A form half filled in, as a person would leave it before pressing Start run.
      await page.locator('input[name="/city"]').fill("Oslo");
      await tid(page, "array-add").click();
      await page.locator('input[name="/items/0"]').fill("museum");
    });
    await shoot("node-types", "#/node-types", () => tid(page, "node-type-row").first().waitFor());
    await shoot("node-type-plan", `#/node-types/${PLAN_NODE_TYPE_ID}`, () => tid(page, "plan-graph").waitFor());
    expect(browser.takeErrors()).toEqual([]);
  }, 120_000);

  it("takes the login page of a fabric with auth required", async () => {
    const authed = await startConsoleFabric({ auth: true });
    try {
      const w = await browser.newPage();
      w.allow(/status of 401/);
      await open(w.page, authed, "#/login");
      await tid(w.page, "token-input").waitFor();
      await w.page.waitForTimeout(300);
      await w.page.screenshot({ path: path.join(IMAGES, "console-login.png") });
      expect(browser.takeErrors()).toEqual([]);
    } finally {
      await authed.stop();
    }
  }, 90_000);
});
