/**
 * A person's reason with an approval's decision (the optional body of :approve and :reject), over real HTTP: the
 * fabric's own gateway (which calls its coordinator in-process), a gateway that forwards to the coordinator, and the
 * coordinator itself. Work is parked at an approval by a real PDP policy.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import type { RunningFabric } from "../src/fabric.js";
import { GatewayClient } from "../src/clients/gateway-client.js";
import { call, expectEnvelope, expectValid, until } from "./support/gateway-http.js";
import { startListingSetup, type ListingBases } from "./support/listing-fabric.js";

const sleepRef = { node_type_id: "demo.sleep", version: "1.0.0" };

describe("a reason with an approval's decision (auth off)", () => {
  let fabric: RunningFabric;
  let bases: ListingBases;
  let gw: string;

  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ fabric, bases, close } = await startListingSetup());
    gw = bases.inProcess;
  }, 60_000);

  afterAll(async () => {
    await close?.();
  });

  /** Starts a demo.sleep run and waits for its approval: { runId, approvalId }. */
  async function parked(): Promise<{ runId: string; approvalId: string }> {
    const r = await call("POST", `${gw}/v1/runs`, { root_node_type_ref: sleepRef, input: { ms: 10, value: "v" } });
    expect(r.status, r.text).toBe(200);
    const runId = r.body.run_id as string;
    const approvalId = await until("the approval is pending", async () => {
      const a = await call("GET", `${gw}/v1/approvals?run_id=${encodeURIComponent(runId)}&state=pending`);
      return a.body?.[0]?.approval_id as string | undefined;
    });
    return { runId, approvalId };
  }

  async function approvalOf(runId: string) {
    const r = await call("GET", `${gw}/v1/approvals?run_id=${encodeURIComponent(runId)}`);
    expect(r.status, r.text).toBe(200);
    expectValid("approval_list", r.body);
    expect(r.body).toHaveLength(1);
    return r.body[0];
  }

  async function resolvedEvent(runId: string) {
    const r = await call("GET", `${gw}/v1/runs/${runId}/events?follow=false`);
    const events = r.text.trim().split("\n").map((l) => JSON.parse(l));
    const resolved = events.filter((e) => e.type === "approval_resolved");
    expect(resolved).toHaveLength(1);
    return resolved[0];
  }

  const runState = async (runId: string) => (await call("GET", `${gw}/v1/runs/${runId}`)).body?.state as string | undefined;

  for (const where of ["inProcess", "forwarded", "coordinator"] as const) {
    describe(`on the ${where === "inProcess" ? "fabric's gateway" : where === "forwarded" ? "forwarding gateway" : "coordinator"}`, () => {
      it("keeps a rejection's reason: in approval_resolved and as decision_reason", async () => {
        const { runId, approvalId } = await parked();
        const reason = "The payee is not on the list of known suppliers.";
        const r = await call("POST", `${bases[where]}/v1/approvals/${approvalId}:reject`, { reason });
        expect(r.status, r.text).toBe(204);
        expect(r.text).toBe("");

        const ev = await resolvedEvent(runId);
        expect(ev.data).toEqual({ approval_id: approvalId, action: "node.run.execute", decision: "rejected", state: "rejected", reason });
        const a = await approvalOf(runId);
        expect(a).toMatchObject({ approval_id: approvalId, state: "rejected", decision: "rejected", decision_reason: reason });
        await until("the rejected run failed", async () => ((await runState(runId)) === "failed" ? true : undefined));
        // Every service lists it the same.
        for (const base of Object.values(bases)) {
          const l = await call("GET", `${base}/v1/approvals?run_id=${encodeURIComponent(runId)}`);
          expect(l.body[0].decision_reason).toBe(reason);
        }
      });

      it("keeps an approval's reason, and the run goes on", async () => {
        const { runId, approvalId } = await parked();
        const reason = "Checked with the customer by phone ☎, all fine.";
        expect((await call("POST", `${bases[where]}/v1/approvals/${approvalId}:approve`, { reason })).status).toBe(204);
        expect((await resolvedEvent(runId)).data).toMatchObject({ decision: "approved", reason });
        expect(await approvalOf(runId)).toMatchObject({ state: "approved", decision: "approved", decision_reason: reason });
        await until("the approved run completed", async () => ((await runState(runId)) === "completed" ? true : undefined));
        // Repeating the decision answers the same and keeps the first reason.
        expect((await call("POST", `${bases[where]}/v1/approvals/${approvalId}:approve`, { reason: "again" })).status).toBe(204);
        expect((await approvalOf(runId)).decision_reason).toBe(reason);
      });

      it("decides without a reason when there is no body, an empty one, or {}", async () => {
        const noBody = await parked();
        const empty = await parked();
        const emptyObject = await parked();
        expect((await call("POST", `${bases[where]}/v1/approvals/${noBody.approvalId}:approve`)).status).toBe(204);
        expect((await call("POST", `${bases[where]}/v1/approvals/${empty.approvalId}:reject`, "", { "content-type": "application/json" })).status).toBe(204);
        expect((await call("POST", `${bases[where]}/v1/approvals/${emptyObject.approvalId}:approve`, {})).status).toBe(204);
        for (const p of [noBody, empty, emptyObject]) {
          const ev = await resolvedEvent(p.runId);
          expect(ev.data).not.toHaveProperty("reason");
          const a = await approvalOf(p.runId);
          expect(a.decision).toBe(p === empty ? "rejected" : "approved");
          expect(a).not.toHaveProperty("decision_reason");
        }
      });

      it("refuses any other body with 400 invalid_request, and the approval stays pending", async () => {
        const { runId, approvalId } = await parked();
        const bad: unknown[] = [
          { reason: "" },
          { reason: "x".repeat(1001) },
          { reason: 42 },
          { reason: null },
          { reason: ["no"] },
          { reason: "fine", approved_by: "me" },
          { comment: "why" },
          [],
          "null",
          '"just words"',
          "7",
          "{",
        ];
        for (const action of ["approve", "reject"]) {
          for (const body of bad) {
            const r = await call("POST", `${bases[where]}/v1/approvals/${approvalId}:${action}`, body);
            expectEnvelope(r, 400, "invalid_request");
          }
        }
        // A body that is not JSON is refused as such.
        const text = await call("POST", `${bases[where]}/v1/approvals/${approvalId}:reject`, "because", { "content-type": "text/plain" });
        expectEnvelope(text, 415, "unsupported_media_type");

        const a = await approvalOf(runId);
        expect(a).toMatchObject({ approval_id: approvalId, state: "pending" });
        expect(a).not.toHaveProperty("decision");
        const events = (await call("GET", `${gw}/v1/runs/${runId}/events?follow=false`)).text;
        expect(events).not.toContain("approval_resolved");
        expect((await call("GET", `${gw}/v1/node-runs/${a.node_run_id}`)).body.state).toBe("queued");
        // The longest reason allowed is taken.
        const longest = "y".repeat(1000);
        expect((await call("POST", `${bases[where]}/v1/approvals/${approvalId}:reject`, { reason: longest })).status).toBe(204);
        expect((await approvalOf(runId)).decision_reason).toBe(longest);
      });
    });
  }

  it("an unknown approval with a reason is still approval_not_found, and a bad body still 400", async () => {
    for (const base of Object.values(bases)) {
      expectEnvelope(await call("POST", `${base}/v1/approvals/apr_nobody:reject`, { reason: "no such thing" }), 404, "approval_not_found");
      expectEnvelope(await call("POST", `${base}/v1/approvals/apr_nobody:reject`, { why: "no" }), 400, "invalid_request");
    }
  });

  it("the GatewayClient sends the reason with approve and reject, and none when not given", async () => {
    const client = new GatewayClient(bases.forwarded);
    try {
      const a = await parked();
      const b = await parked();
      const c = await parked();
      await client.approve(a.approvalId, "Looks right.");
      await client.reject(b.approvalId, "Wrong account.");
      await client.reject(c.approvalId);
      const listed = await client.listApprovals({ state: "rejected", run_id: b.runId });
      expect(listed.items).toEqual([expect.objectContaining({ approval_id: b.approvalId, decision_reason: "Wrong account." })]);
      expect((await approvalOf(a.runId)).decision_reason).toBe("Looks right.");
      expect(await approvalOf(c.runId)).not.toHaveProperty("decision_reason");
      const d = await parked();
      await expect(client.approve(d.approvalId, "")).rejects.toMatchObject({ code: "invalid_request" });
      expect((await approvalOf(d.runId)).state).toBe("pending");
    } finally {
      await client.close();
    }
  });
});
