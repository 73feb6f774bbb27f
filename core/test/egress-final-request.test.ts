import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type Server } from "node:http";
import { createHandlerEgress, SecretBindings } from "@nodefabric/sdk/runtime";
import { createEgressDispatcher, EgressPolicy } from "../src/services/atomic-executor/egress-policy.js";

// ctx.egress.fetch with `final: true`: the one request a handler may still make once its execution was stopped (an
// MCP client's notifications/cancelled). It is not aborted with the execution, the egress policy still applies, and
// before the stop it is an ordinary request, bound to the execution.
let server: Server;
let url: string;
const bodies: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      bodies.push(body);
      if (body === "slow") setTimeout(() => res.end("late"), 2_000);
      else res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const egressFor = (signal: AbortSignal, allowLoopback: boolean) =>
  createHandlerEgress(signal, 30_000, createEgressDispatcher(new EgressPolicy(allowLoopback ? { allowCidrs: ["127.0.0.1/32"] } : {})), { get: () => undefined }, new SecretBindings());

describe("a final egress request", () => {
  it("is sent after the execution stopped, where an ordinary one is refused", async () => {
    const controller = new AbortController();
    const egress = egressFor(controller.signal, true);
    controller.abort(new Error("canceled"));
    await expect(egress.fetch(url, { method: "POST", body: "ordinary" })).rejects.toThrow();
    const res = await egress.fetch(url, { method: "POST", body: "cancelled", final: true } as RequestInit);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok");
    expect(bodies).toContain("cancelled");
    expect(bodies).not.toContain("ordinary");
  });

  it("still goes through the egress policy", async () => {
    const controller = new AbortController();
    const egress = egressFor(controller.signal, false);
    controller.abort(new Error("canceled"));
    await expect(egress.fetch(url, { method: "POST", body: "refused", final: true } as RequestInit)).rejects.toMatchObject({ code: "egress_denied" });
    expect(bodies).not.toContain("refused");
  });

  it("is aborted with the execution when sent before it stopped", async () => {
    const controller = new AbortController();
    const egress = egressFor(controller.signal, true);
    const pending = egress.fetch(url, { method: "POST", body: "slow", final: true } as RequestInit);
    setTimeout(() => controller.abort(new Error("canceled")), 100);
    const started = Date.now();
    await expect(pending).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});
