/**
 * The console on a real fabric over loopback HTTP: the gateway serves the built page under /console/ with its
 * Content-Security-Policy, the assets with their types and caching, and config.json with the registry's URL and the
 * auth facts; the registry lets the gateway's origin (and no other) read it across origins. Needs the page built
 * (`npm run build -w @nodefabric/plugin-console`).
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { RunningFabric } from "../../../core/src/fabric.js";
import { call, expectEnvelope } from "../../../core/test/support/gateway-http.js";
import { expectedCsp, startConsoleFabric } from "./support/console-fabric.js";

describe("the console on a fabric without auth", () => {
  let fabric: RunningFabric;
  let gw: string;
  let registry: string;

  beforeAll(async () => {
    fabric = await startConsoleFabric();
    gw = fabric.urls["run-gateway"]!;
    registry = fabric.urls["node-registry"]!;
  });
  afterAll(async () => {
    await fabric?.close();
  });

  it("serves the built index.html at /console/ with a strict CSP, and no inline script or style", async () => {
    const r = await call("GET", `${gw}/console/`);
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/html/);
    expect(r.text).toContain('<div id="app"></div>');
    expect(r.headers["content-security-policy"]).toBe(expectedCsp(new URL(registry).origin));
    expect(r.headers["x-content-type-options"]).toBe("nosniff");
    expect(r.headers["referrer-policy"]).toBe("no-referrer");
    expect(r.headers["cache-control"]).toBe("no-cache");
    // Every script is a file of ours: no inline code a CSP without 'unsafe-inline' would block.
    for (const m of r.text.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)) {
      expect(m[1]).toMatch(/\bsrc="\/console\/assets\/[^"]+\.js"/);
      expect(m[2].trim()).toBe("");
    }
    expect(r.text).not.toMatch(/<style\b/);
    expect(r.text).not.toMatch(/\sstyle="/);
    expect(r.text).not.toMatch(/https?:\/\//);
  });

  it("redirects /console to /console/, and answers the page's own paths with index.html", async () => {
    const r = await call("GET", `${gw}/console`);
    expect(r.status).toBe(302);
    expect(r.headers.location).toBe("/console/");
    const deep = await call("GET", `${gw}/console/runs/run_123`);
    expect(deep.status).toBe(200);
    expect(deep.text).toContain('<div id="app"></div>');
  });

  it("serves the assets with their content types, cached for good", async () => {
    const html = (await call("GET", `${gw}/console/`)).text;
    const js = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    const css = /href="(\/console\/assets\/[^"]+\.css)"/.exec(html)?.[1];
    expect(js).toBeDefined();
    expect(css).toBeDefined();
    const script = await call("GET", `${gw}${js}`);
    expect(script.status).toBe(200);
    expect(script.headers["content-type"]).toMatch(/^(text|application)\/javascript/);
    expect(script.headers["cache-control"]).toMatch(/immutable/);
    expect(script.headers["content-security-policy"]).toBeDefined();
    expect(script.text.length).toBeGreaterThan(1000);
    const style = await call("GET", `${gw}${css}`);
    expect(style.status).toBe(200);
    expect(style.headers["content-type"]).toMatch(/^text\/css/);
    // No web font or stylesheet from elsewhere: the console works offline.
    expect(style.text).not.toMatch(/url\(\s*["']?https?:/);
    expect(style.text).not.toMatch(/@import/);
  });

  it("answers a missing asset with a 404 envelope, and refuses to leave its folder", async () => {
    expectEnvelope(await call("GET", `${gw}/console/assets/nope-123.js`), 404, "route_not_found");
    const up = await call("GET", `${gw}/console/..%2f..%2fpackage.json`);
    expect(up.status).not.toBe(200);
  });

  it("tells the page where the registry is and that no token is needed", async () => {
    const r = await call("GET", `${gw}/console/config.json`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ registry_url: registry, auth: { required: false, mode: "disabled", oidc: null }, trace_url: null, redact: [] });
  });

  it("lets the gateway's origin read the registry across origins (GET, Authorization), and no other origin", async () => {
    const origin = new URL(gw).origin;
    const pre = await call("OPTIONS", `${registry}/v1/node-types?q=x`, undefined, {
      origin,
      "access-control-request-method": "GET",
      "access-control-request-headers": "authorization",
    });
    expect(pre.status).toBe(204);
    expect(pre.headers["access-control-allow-origin"]).toBe(origin);
    expect(String(pre.headers["access-control-allow-methods"])).toMatch(/\bGET\b/);
    expect(String(pre.headers["access-control-allow-headers"]).toLowerCase()).toContain("authorization");

    // The same gateway as a browser on this machine may name it.
    const port = new URL(gw).port;
    const alias = await call("OPTIONS", `${registry}/v1/node-types`, undefined, { origin: `http://localhost:${port}`, "access-control-request-method": "GET" });
    expect(alias.status).toBe(204);
    expect(alias.headers["access-control-allow-origin"]).toBe(`http://localhost:${port}`);

    const list = await call("GET", `${registry}/v1/node-types`, undefined, { origin });
    expect(list.status).toBe(200);
    expect(list.headers["access-control-allow-origin"]).toBe(origin);
    expect(String(list.headers["access-control-expose-headers"]).toLowerCase()).toContain("x-next-page-token");

    const evil = await call("OPTIONS", `${registry}/v1/node-types`, undefined, { origin: "http://evil.example", "access-control-request-method": "GET" });
    expectEnvelope(evil, 403, "permission_denied");
    expect(evil.headers["access-control-allow-origin"]).toBeUndefined();
    const otherPort = await call("OPTIONS", `${registry}/v1/node-types`, undefined, { origin: `http://127.0.0.1:${Number(port) === 1 ? 2 : 1}`, "access-control-request-method": "GET" });
    expect(otherPort.status).toBe(403);
    const evilGet = await call("GET", `${registry}/v1/node-types`, undefined, { origin: "http://evil.example" });
    expect(evilGet.headers["access-control-allow-origin"]).toBeUndefined();
  });

  it("keeps the page's routes and the preflights out of the services' OpenAPI documents", async () => {
    const gwDoc = await call("GET", `${gw}/openapi.json`);
    expect(gwDoc.status).toBe(200);
    expect(Object.keys(gwDoc.body.paths).filter((p) => p.startsWith("/console"))).toEqual([]);
    const regDoc = await call("GET", `${registry}/openapi.json`);
    expect(Object.values(regDoc.body.paths).filter((ops) => "options" in (ops as object))).toEqual([]);
  });

  it("refuses a preflight for a write or for another header, even from the gateway's origin", async () => {
    const origin = new URL(gw).origin;
    const write = await call("OPTIONS", `${registry}/v1/node-types`, undefined, { origin, "access-control-request-method": "POST" });
    expectEnvelope(write, 403, "permission_denied");
    const header = await call("OPTIONS", `${registry}/v1/node-types`, undefined, { origin, "access-control-request-method": "GET", "access-control-request-headers": "authorization, x-evil" });
    expectEnvelope(header, 403, "permission_denied");
  });
});

describe("the console with an OIDC login configured", () => {
  let fabric: RunningFabric;
  const servers: Server[] = [];
  const listen = async (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
    const s = createServer(handler);
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
    return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  };
  let issuer: string;
  let tokenOrigin: string;

  beforeAll(async () => {
    // A provider whose token endpoint is on another origin than its issuer, as some are.
    tokenOrigin = await listen((_req, res) => res.writeHead(404).end());
    issuer = await listen((req, res) => {
      if (req.url !== "/.well-known/openid-configuration") return void res.writeHead(404).end();
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ issuer, authorization_endpoint: `${issuer}/authorize`, token_endpoint: `${tokenOrigin}/token` }));
    });
    fabric = await startConsoleFabric({ mode: "disabled", oidc: { issuer, client_id: "console", scope: "openid runs:read" } });
  });
  afterAll(async () => {
    await fabric?.close();
    for (const s of servers) await new Promise((r) => s.close(r));
  });

  it("names the client in config.json and lets the page reach the issuer and its token endpoint", async () => {
    const gw = fabric.urls["run-gateway"]!;
    const config = await call("GET", `${gw}/console/config.json`);
    expect(config.body.auth).toEqual({ required: false, mode: "disabled", oidc: { issuer, client_id: "console", scope: "openid runs:read" } });
    const page = await call("GET", `${gw}/console/`);
    expect(page.headers["content-security-policy"]).toBe(expectedCsp(new URL(fabric.urls["node-registry"]!).origin, issuer, tokenOrigin));
  });
});
