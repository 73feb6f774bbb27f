import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { SignJWT } from "jose";
import { audienceOf, type ServiceName } from "@nodefabric/core";
import { call, eventually } from "./run-client.js";
import { ECHO, FANOUT, isEnvelope, ref, startHardeningFabric, startTestAuth, type HardeningFabric, type Json, type TestAuth } from "./hardening-support.js";

// Issue 10, trust boundaries 1 and 3, on real loopback HTTP with real signed tokens:
// - a token's claims fail closed: a tenant_id (or sub, scope, scp) of the wrong type is refused, never read as "none";
// - the executor directory is not a back door: registering an executor needs executors:register, and the token the
//   coordinator sends an executor is bound to that executor, so an executor it was sent to cannot replay it elsewhere.

/** What an attacker-run executor received. */
interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Json;
}

/** An executor run by an attacker: a real HTTP server on loopback that keeps what it is sent and answers success. */
async function startAttacker(): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => (text += c.toString()));
    req.on("end", () => {
      const path = (req.url ?? "").split("?")[0]!;
      const body = text ? (JSON.parse(text) as Json) : {};
      received.push({ path, headers: req.headers, body });
      const json = (status: number, answer: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(answer));
      if (path === "/v1/atomic-node-runs:execute") return json(200, { node_run_id: body.node_run_id, state: "completed", outputs: { stolen: true } });
      if (path === "/v1/composite-node-runs:begin") return json(200, { accepted: true });
      json(404, { error: { code: "route_not_found", message: path } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    received,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe("trust boundaries of tokens", () => {
  let auth: TestAuth;
  let h: HardeningFabric;
  const bearer = async (service: ServiceName, scope: string, extra: Record<string, unknown> = {}, o: { tenant_id?: string; sub?: string } = {}) => ({
    authorization: `Bearer ${await auth.idp.mint({ aud: audienceOf(service), scope, extra, ...o })}`,
  });

  beforeAll(async () => {
    auth = await startTestAuth();
    h = await startHardeningFabric({ auth, handlers: ["@nodefabric/handler-demo", "@nodefabric/handler-examples"], ready: ["demo.echo", "examples.fanout"] });
    // Runs of two tenants, and one without a tenant: a token that fails closed must see none of them.
    for (const tenant of ["acme", "beta"]) {
      const r = await call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: ECHO, input: { tenant } }, { ...(await bearer("run-gateway", "runs:write", {}, { tenant_id: tenant })), prefer: "wait=10" });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await auth?.close();
  });

  describe("claims fail closed", () => {
    const BAD_TENANTS: Array<[string, unknown]> = [
      ["a number", 42],
      ["an empty string", ""],
      ["an array", ["acme"]],
      ["an object", { id: "acme" }],
      ["null", null],
      ["true", true],
    ];

    for (const [what, value] of BAD_TENANTS) {
      it(`refuses (401) a signed token whose tenant_id is ${what}, on the gateway and the coordinator`, async () => {
        for (const [service, base] of [["run-gateway", h.gw], ["run-coordinator", h.coord]] as const) {
          const res = await call("GET", `${base}/v1/runs?limit=1000`, undefined, await bearer(service, "runs:read runs:write", { tenant_id: value }));
          expect(res.status, `${service}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(401);
          expect(isEnvelope(res.body)).toBe(true);
          expect(res.body.error.code).toBe("unauthenticated");
          expect(res.body.error.message).toContain("tenant_id");
          expect(res.headers["www-authenticate"]).toMatch(/^Bearer realm="[^"]+", error="invalid_token", error_description="[^"]*tenant_id/);
        }
        // Nor can it start a run that would belong to no tenant.
        const start = await call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: ECHO, input: {} }, await bearer("run-gateway", "runs:write", { tenant_id: value }));
        expect(start.status).toBe(401);
      });
    }

    it("refuses a sub, scope or scp of the wrong type, and names the claim", async () => {
      const cases: Array<[string, Record<string, unknown>]> = [
        ["sub", { sub: 7 }],
        ["sub", { sub: "" }],
        ["sub", { sub: ["alice"] }],
        ["scope", { scope: 5 }],
        ["scope", { scope: { runs: "read" } }],
        ["scope", { scope: ["runs:read", 3] }],
        ["scp", { scp: 5 }],
        ["scp", { scp: ["runs:read", { x: 1 }] }],
      ];
      for (const [claim, extra] of cases) {
        // Signed by hand: the claims are exactly these.
        const key = auth.idp.keys[0]!;
        const now = Math.floor(Date.now() / 1000);
        const claims = { iss: auth.idp.issuer, aud: audienceOf("run-gateway"), sub: "alice", scope: "runs:read", iat: now, exp: now + 300, ...extra };
        const token = await new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid }).sign(key.privateKey);
        const res = await call("GET", `${h.gw}/v1/runs`, undefined, { authorization: `Bearer ${token}` });
        expect(res.status, `${JSON.stringify(extra)}: ${JSON.stringify(res.body)}`).toBe(401);
        expect(res.body.error.message, JSON.stringify(extra)).toContain(claim);
        expect(res.headers["www-authenticate"]).toContain('error="invalid_token"');
      }
    });

    it("still reads a well-formed tenant_id: the tenant sees its own runs only", async () => {
      const res = await call("GET", `${h.gw}/v1/runs?limit=1000`, undefined, await bearer("run-gateway", "runs:read", { tenant_id: "acme" }));
      expect(res.status).toBe(200);
      expect(res.body.length).toBeGreaterThan(0);
      expect(res.body.every((r: Json) => r.run_context?.tenant_id === "acme")).toBe(true);
      // scp as an array of strings, as some providers send it.
      const scp = await auth.idp.mint({ aud: audienceOf("run-gateway"), extra: { scp: ["runs:read"] }, tenant_id: "acme" });
      expect((await call("GET", `${h.gw}/v1/runs`, undefined, { authorization: `Bearer ${scp}` })).status).toBe(200);
    });
  });

  describe("the executor directory", () => {
    let attacker: Awaited<ReturnType<typeof startAttacker>>;
    const EVIL = ref("attacker.echo");
    const EVIL_COMPOSITE = ref("attacker.plan");
    beforeAll(async () => {
      attacker = await startAttacker();
    });
    afterAll(async () => {
      await attacker?.close();
    });

    it("refuses (403) to register an executor with node-types:write alone, so nobody can take demo.echo's inputs", async () => {
      const writer = await bearer("node-registry", "node-types:write node-types:read");
      const put = await call("PUT", `${h.registry}/v1/executors/sneaky-echo`, { endpoint: attacker.url, kind: "atomic", node_types: [ECHO] }, writer);
      expect(put.status, JSON.stringify(put.body)).toBe(403);
      expect(put.body.error).toMatchObject({ code: "permission_denied", details: { required_scope: "executors:register" } });
      expect(put.headers["www-authenticate"]).toContain('scope="executors:register"');
      const listed = await call("GET", `${h.registry}/v1/executors?node_type_id=demo.echo`, undefined, writer);
      expect(listed.status).toBe(200);
      expect(listed.body.map((e: Json) => e.endpoint)).not.toContain(attacker.url);
      // Publishing node types still needs only node-types:write.
      const published = await call("POST", `${h.registry}/v1/node-types`, { node_type: { ...ref("writer.only"), kind: "atomic", description: "x", input_schema: { type: "object" }, output_schema: { type: "object" } } }, writer);
      expect(published.status, JSON.stringify(published.body)).toBe(200);
    });

    it("binds the coordinator's token to the executor it calls: an executor cannot replay it against another", async () => {
      // The attacker holds what an executor operator holds: it may publish node types and register its executor.
      const operator = await bearer("node-registry", "node-types:write executors:register");
      const nodeTypes = [
        { ...EVIL, kind: "atomic", description: "served by the attacker", input_schema: { type: "object" }, output_schema: { type: "object" } },
        { ...EVIL_COMPOSITE, kind: "composite", description: "served by the attacker", input_schema: { type: "object" }, output_schema: { type: "object" } },
      ];
      for (const node_type of nodeTypes) expect((await call("POST", `${h.registry}/v1/node-types`, { node_type }, operator)).status).toBe(200);
      for (const [id, kind, served] of [["attacker-atomic", "atomic", EVIL], ["attacker-composite", "composite", EVIL_COMPOSITE]] as const) {
        const put = await call("PUT", `${h.registry}/v1/executors/${id}`, { endpoint: attacker.url, kind, node_types: [served] }, operator);
        expect(put.status, JSON.stringify(put.body)).toBe(200);
      }

      // A client's run reaches the attacker's executor with the coordinator's token.
      const client = await bearer("run-gateway", "runs:read runs:write", {}, { tenant_id: "acme" });
      const run = await call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: EVIL, input: { hello: 1 } }, { ...client, prefer: "wait=10" });
      expect(run.status).toBe(200);
      const execute = await eventually(async () => attacker.received.find((r) => r.path === "/v1/atomic-node-runs:execute"), 10_000, "the attacker's :execute");
      const stolen = execute.headers.authorization!;
      expect(stolen).toMatch(/^Bearer /);

      // Replayed against the real atomic executor, with someone's demo.echo request: refused, nothing runs.
      const atomic = h.fabric.urls["atomic-executor"]!;
      const replay = await call(
        "POST",
        `${atomic}/v1/atomic-node-runs:execute`,
        { ...execute.body, node_type_ref: ECHO, inputs: { replayed: true }, node_run_id: `${execute.body.node_run_id}-replay` },
        { authorization: stolen, "idempotency-key": "replay-1" },
      );
      expect(replay.status, JSON.stringify(replay.body)).toBe(401);
      expect(replay.body.error.code).toBe("unauthenticated");
      expect(replay.headers["www-authenticate"]).toContain('error="invalid_token"');
      const cancel = await call("POST", `${atomic}/v1/atomic-node-runs/${encodeURIComponent(execute.body.node_run_id)}:cancel`, undefined, { authorization: stolen });
      expect(cancel.status).toBe(401);

      // The same for a composite executor: the :begin token works only where it was sent.
      const composite = await call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: EVIL_COMPOSITE, input: {} }, client);
      expect(composite.status).toBe(200);
      const begin = await eventually(async () => attacker.received.find((r) => r.path === "/v1/composite-node-runs:begin"), 10_000, "the attacker's :begin");
      const realComposite = h.fabric.urls["composite-executor"]!;
      const beginReplay = await call("POST", `${realComposite}/v1/composite-node-runs:begin`, { ...begin.body, node_type_ref: FANOUT, inputs: { items: ["x"] } }, { authorization: begin.headers.authorization! });
      expect(beginReplay.status, JSON.stringify(beginReplay.body)).toBe(401);
      expect(beginReplay.body.error.code).toBe("unauthenticated");

      // The fabric's own executors still accept the coordinator's tokens bound to them: composites run over HTTP.
      const fanout = await call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: FANOUT, input: { items: ["a", "b"] } }, { ...client, prefer: "wait=15" });
      expect(fanout.status).toBe(200);
      expect(fanout.body.state, JSON.stringify(fanout.body.extensions)).toBe("completed");
    });
  });
});
