/**
 * GET /v1/approvals and the filters of GET /v1/runs, over real HTTP: the fabric's own gateway (which calls its
 * coordinator in-process), a gateway that forwards to the coordinator over HTTP, and the coordinator itself. Work is
 * parked at an approval by a real PDP policy.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import type { RunningFabric } from "../src/fabric.js";
import { GatewayClient } from "../src/clients/gateway-client.js";
import { call, expectEnvelope, expectValid, until, type Answer } from "./support/gateway-http.js";
import { startListingSetup, type ListingBases } from "./support/listing-fabric.js";

const echoRef = { node_type_id: "demo.echo", version: "1.0.0" };
const sleepRef = { node_type_id: "demo.sleep", version: "1.0.0" };

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const idsOf = (list: Array<{ run_id: string }>) => list.map((r) => r.run_id);

describe("GET /v1/approvals and GET /v1/runs filters (auth off)", () => {
  let fabric: RunningFabric;
  /** The fabric's gateway (in-process coordinator), a forwarding gateway, and the coordinator. */
  let bases: ListingBases;
  let gw: string;

  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ fabric, bases, close } = await startListingSetup());
    gw = bases.forwarded;
  }, 60_000);

  afterAll(async () => {
    await close?.();
  });

  async function start(ref: typeof echoRef, input: Record<string, unknown>): Promise<string> {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: ref, input });
    expect(r.status, r.text).toBe(200);
    return r.body.run_id as string;
  }

  /** The same GET on the three services answers the same. */
  async function everywhere(pathAndQuery: string): Promise<Answer> {
    const [a, b, c] = await Promise.all([bases.inProcess, bases.forwarded, bases.coordinator].map((base) => call("GET", `${base}${pathAndQuery}`)));
    expect(b.status, b.text).toBe(a.status);
    expect(c.status, c.text).toBe(a.status);
    expect(b.body).toEqual(a.body);
    expect(c.body).toEqual(a.body);
    expect(b.headers["x-next-page-token"]).toEqual(a.headers["x-next-page-token"]);
    return a;
  }

  describe("GET /v1/approvals", () => {
    let parked: string[];

    beforeAll(async () => {
      parked = [];
      for (let i = 0; i < 3; i++) parked.push(await start(sleepRef, { ms: 10, value: i }));
      await until("three approvals pending", async () => {
        const r = await call("GET", `${gw}/v1/approvals?state=pending`);
        return r.body?.length === 3 ? true : undefined;
      });
    });

    it("lists what waits for a person, newest first, with what a person needs to decide", async () => {
      const r = await everywhere("/v1/approvals?state=pending");
      expect(r.status).toBe(200);
      expectValid("approval_list", r.body);
      expect(r.headers["x-next-page-token"]).toBeUndefined();
      expect(idsOf(r.body)).toEqual([...parked].reverse());
      for (const a of r.body) {
        expect(a).toMatchObject({ state: "pending", action: "node.run.execute", node_type_ref: sleepRef });
        expect(a.decision).toBeUndefined();
        expect(a.resolved_at).toBeUndefined();
        expect(a.tenant_id).toBeUndefined();
        // The NodeRun it names is the one that waits: the run's root, still queued.
        const run = await call("GET", `${gw}/v1/runs/${a.run_id}`);
        expect(run.body.root_node_run_id).toBe(a.node_run_id);
        const nr = await call("GET", `${gw}/v1/node-runs/${a.node_run_id}`);
        expect(nr.body.state).toBe("queued");
        expect(nr.body.extensions["nodefabric.approval_id"]).toBe(a.approval_id);
      }
      // The events tell the same story.
      const events = await call("GET", `${gw}/v1/runs/${parked[0]}/events?follow=false`);
      const requested = events.text.trim().split("\n").map((l) => JSON.parse(l)).find((e) => e.type === "approval_requested");
      expect(r.body[2].approval_id).toBe(requested.data.approval_id);
    });

    it("pages with limit and x-next-page-token, and filters by run_id", async () => {
      const first = await everywhere("/v1/approvals?state=pending&limit=2");
      expect(idsOf(first.body)).toEqual([parked[2], parked[1]]);
      const token = first.headers["x-next-page-token"] as string;
      expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
      const second = await everywhere(`/v1/approvals?state=pending&limit=2&page_token=${token}`);
      expect(idsOf(second.body)).toEqual([parked[0]]);
      expect(second.headers["x-next-page-token"]).toBeUndefined();

      const one = await everywhere(`/v1/approvals?run_id=${encodeURIComponent(parked[1])}`);
      expect(idsOf(one.body)).toEqual([parked[1]]);
      expect((await everywhere("/v1/approvals?run_id=run_nobody")).body).toEqual([]);
    });

    it("after an approval, the run goes on and the approval lists as approved, with when", async () => {
      const pending = (await call("GET", `${gw}/v1/approvals?run_id=${encodeURIComponent(parked[0])}`)).body[0];
      const before = Date.now();
      const ok = await call("POST", `${gw}/v1/approvals/${pending.approval_id}:approve`);
      expect(ok.status, ok.text).toBe(204);

      const still = await everywhere("/v1/approvals?state=pending");
      expect(idsOf(still.body)).toEqual([parked[2], parked[1]]);
      const approved = await everywhere("/v1/approvals?state=approved");
      expectValid("approval_list", approved.body);
      expect(approved.body).toHaveLength(1);
      expect(approved.body[0]).toMatchObject({ approval_id: pending.approval_id, state: "approved", decision: "approved", created_at: pending.created_at });
      expect(Date.parse(approved.body[0].resolved_at)).toBeGreaterThanOrEqual(before - 1000);
      await until("the approved run completed", async () => ((await call("GET", `${gw}/v1/runs/${parked[0]}`)).body?.state === "completed" ? true : undefined));

      // A rejection is listed as such, and fails its run.
      const other = (await call("GET", `${gw}/v1/approvals?run_id=${encodeURIComponent(parked[1])}`)).body[0];
      expect((await call("POST", `${gw}/v1/approvals/${other.approval_id}:reject`)).status).toBe(204);
      const rejected = await everywhere("/v1/approvals?state=rejected");
      expect(rejected.body).toEqual([expect.objectContaining({ approval_id: other.approval_id, state: "rejected", decision: "rejected" })]);
      expect(idsOf((await everywhere("/v1/approvals")).body)).toEqual([...parked].reverse());
    });

    it("refuses bad query strings with 400 and an ErrorEnvelope, changing nothing", async () => {
      const before = (await call("GET", `${gw}/v1/approvals`)).body;
      const runsToken = (await call("GET", `${gw}/v1/runs?limit=1`)).headers["x-next-page-token"] as string;
      for (const q of ["state=waiting", "limit=0", "limit=1001", "limit=many", "page_token=a%2Fb", `page_token=${runsToken}`, "colour=red", "run_id="]) {
        for (const base of Object.values(bases)) {
          const r = await call("GET", `${base}/v1/approvals?${q}`);
          expectEnvelope(r, 400, "invalid_request");
        }
      }
      expect((await call("GET", `${gw}/v1/approvals`)).body).toEqual(before);
    });
  });

  describe("GET /v1/runs filters", () => {
    let t0: string;
    let echo1: string;
    let sleep1: string;
    let mid: string;
    let echo2: string;
    let echo3: string;
    let t1: string;

    beforeAll(async () => {
      await pause(5);
      t0 = new Date().toISOString();
      await pause(5);
      echo1 = await start(echoRef, { n: 1 });
      sleep1 = await start(sleepRef, { ms: 10, value: "s" });
      await pause(5);
      mid = new Date().toISOString();
      await pause(5);
      echo2 = await start(echoRef, { n: 2 });
      echo3 = await start(echoRef, { n: 3 });
      await pause(5);
      t1 = new Date().toISOString();
      await until("echo runs ended", async () => {
        const r = await call("GET", `${gw}/v1/runs?node_type_id=demo.echo&state=completed&created_after=${t0}`);
        return r.body?.length === 3 ? true : undefined;
      });
    });

    const q = (s: string) => s.replace(/\+/g, "%2B");

    it("node_type_id keeps the runs whose root is of that node type", async () => {
      const r = await everywhere(`/v1/runs?node_type_id=demo.echo&created_after=${t0}`);
      expect(r.status).toBe(200);
      expectValid("run_list", r.body);
      expect(idsOf(r.body)).toEqual([echo3, echo2, echo1]);
      expect(idsOf((await everywhere(`/v1/runs?node_type_id=demo.sleep&created_after=${t0}`)).body)).toEqual([sleep1]);
      expect((await everywhere("/v1/runs?node_type_id=demo.none")).body).toEqual([]);
      // Each listed Run names its root node type itself, so a list shows it without reading root NodeRuns.
      for (const run of r.body) expect(run.extensions["nodefabric.root_node_type_ref"]).toEqual({ node_type_id: "demo.echo", version: "1.0.0" });
    });

    it("created_after and created_before bound the creation time, exclusively, in any time zone", async () => {
      expect(idsOf((await everywhere(`/v1/runs?created_after=${t0}&created_before=${mid}`)).body)).toEqual([sleep1, echo1]);
      expect(idsOf((await everywhere(`/v1/runs?created_after=${mid}`)).body)).toEqual([echo3, echo2]);
      expect((await everywhere(`/v1/runs?created_after=${t1}`)).body).toEqual([]);
      // The same instant written with an offset.
      const shifted = new Date(Date.parse(mid) + 2 * 3600_000).toISOString().replace("Z", "+02:00");
      expect(idsOf((await everywhere(`/v1/runs?created_after=${q(shifted)}`)).body)).toEqual([echo3, echo2]);
      // Runs started before t0 (the approvals' runs) are all before it.
      const older = (await everywhere(`/v1/runs?created_before=${t0}`)).body;
      expect(idsOf(older)).not.toContain(echo1);
      expect(older.length).toBeGreaterThanOrEqual(3);
    });

    it("filters combine with state and with pages", async () => {
      expect(idsOf((await everywhere(`/v1/runs?node_type_id=demo.echo&state=completed&created_after=${mid}`)).body)).toEqual([echo3, echo2]);
      expect((await everywhere(`/v1/runs?node_type_id=demo.echo&state=failed&created_after=${t0}`)).body).toEqual([]);
      const sleeping = await everywhere(`/v1/runs?node_type_id=demo.sleep&created_after=${t0}&state=${(await call("GET", `${gw}/v1/runs/${sleep1}`)).body.state}`);
      expect(idsOf(sleeping.body)).toEqual([sleep1]);

      const page1 = await everywhere(`/v1/runs?node_type_id=demo.echo&created_after=${t0}&limit=2`);
      expect(idsOf(page1.body)).toEqual([echo3, echo2]);
      const token = page1.headers["x-next-page-token"] as string;
      expect(token).toBeTruthy();
      const page2 = await everywhere(`/v1/runs?node_type_id=demo.echo&created_after=${t0}&limit=2&page_token=${token}`);
      expect(idsOf(page2.body)).toEqual([echo1]);
      expect(page2.headers["x-next-page-token"]).toBeUndefined();
    });

    it("tenant_id picks a tenant for a caller confined to none (auth off)", async () => {
      expect((await everywhere("/v1/runs?tenant_id=acme")).body).toEqual([]);
      expect((await everywhere(`/v1/runs?created_after=${t0}`)).body).toHaveLength(4);
    });

    it("the GatewayClient pages through both listings with their filters", async () => {
      const client = new GatewayClient(gw);
      try {
        const runs = await client.listRuns({ node_type_id: "demo.echo", created_after: t0, limit: 2 });
        expect(idsOf(runs.items)).toEqual([echo3, echo2]);
        expect(idsOf((await client.listRuns({ node_type_id: "demo.echo", created_after: t0, limit: 2, page_token: runs.nextPageToken })).items)).toEqual([echo1]);
        const pending = await client.listApprovals({ state: "pending", limit: 1 });
        expect(idsOf(pending.items)).toEqual([sleep1]);
        expect(pending.nextPageToken).toBeTruthy();
        await expect(client.listRuns({ created_after: "soon" })).rejects.toMatchObject({ code: "invalid_request" });
      } finally {
        await client.close();
      }
    });

    it("refuses bad filters with 400 and an ErrorEnvelope", async () => {
      const approvalsToken = (await call("GET", `${gw}/v1/approvals?limit=1`)).headers["x-next-page-token"] as string;
      expect(approvalsToken).toBeTruthy();
      const bad = [
        "created_after=yesterday",
        "created_after=2026-01-01",
        "created_before=2026-01-01T10:00:00",
        "created_before=2026-02-30T10:00:00Z",
        "node_type_id=",
        "tenant_id=",
        "state=sleeping",
        `page_token=${approvalsToken}`,
        "limit=0",
        "owner=me",
      ];
      for (const query of bad) {
        for (const base of Object.values(bases)) expectEnvelope(await call("GET", `${base}/v1/runs?${query}`), 400, "invalid_request");
      }
    });
  });
});
