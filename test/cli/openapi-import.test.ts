/**
 * `fabric node-types import --from-openapi`, as a user runs it: `fabric dev` from the repository (which serves
 * `@nodefabric/handler-http`), a document with a secured API on loopback, and runs through the gateway, with no
 * package and no deploy.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runFabric, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const seen: Seen[] = [];
let upstream: http.Server;
let upstreamUrl: string;
let fabric: FabricProcess;
let dir: string;

/** A small inventory API on loopback, which wants an API key in a header. */
function startUpstream(): Promise<void> {
  upstream = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (req.headers["x-api-key"] !== "k-123") {
        res.writeHead(401, { "content-type": "application/json" }).end('{"message":"no key"}');
        return;
      }
      const url = new URL(req.url!, "http://x");
      if (req.method === "GET" && url.pathname.startsWith("/v1/items/")) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: decodeURIComponent(url.pathname.slice(10)), tags: url.searchParams.get("tags") }));
      } else if (req.method === "POST" && url.pathname === "/v1/items") {
        res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ id: "new", ...JSON.parse(body) }));
      } else if (req.method === "GET" && url.pathname === "/v1/count") {
        res.writeHead(200, { "content-type": "application/json" }).end("42");
      } else {
        res.writeHead(404).end();
      }
    });
  });
  return new Promise((resolve) => upstream.listen(0, "127.0.0.1", () => resolve()));
}

const document = () => ({
  openapi: "3.0.3",
  info: { title: "Inventory", version: "2.1.0" },
  servers: [{ url: `${upstreamUrl}/v1` }],
  components: { securitySchemes: { api_key: { type: "apiKey", in: "header", name: "X-Api-Key" } } },
  security: [{ api_key: [] }],
  paths: {
    "/items/{itemId}": {
      get: {
        operationId: "getItem",
        tags: ["items"],
        parameters: [
          { name: "itemId", in: "path", required: true, schema: { type: "string" } },
          { name: "tags", in: "query", style: "form", explode: false, schema: { type: "array", items: { type: "string" } } },
        ],
        responses: { "200": { description: "ok", content: { "application/json": { schema: { type: "object", properties: { id: { type: "string" }, tags: { type: ["string", "null"] } } } } } } },
      },
    },
    "/items": {
      post: {
        operationId: "createItem",
        tags: ["items"],
        requestBody: { required: true, content: { "application/json": { schema: { type: "object", required: ["name"], properties: { name: { type: "string" } } } } } },
        responses: { "201": { description: "made", content: { "application/json": { schema: { type: "object", required: ["id"], properties: { id: { type: "string" }, name: { type: "string" } } } } } } },
      },
    },
    "/count": {
      get: { operationId: "countItems", tags: ["stats"], responses: { "200": { description: "n", content: { "application/json": { schema: { type: "integer" } } } } } },
    },
  },
});

beforeAll(async () => {
  await startUpstream();
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  dir = mkdtempSync(path.join(os.tmpdir(), "nf-openapi-import-"));
  writeFileSync(path.join(dir, "inventory.json"), JSON.stringify(document()));
  fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", path.join(dir, ".fabric")], {
    cwd: repo,
    env: {
      // The API runs on this machine; the operator allows loopback and binds the key to it.
      FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
      FABRIC_SECRET_INVENTORY_API_KEY: "k-123",
      FABRIC_EXECUTOR_SECRET_HOSTS_INVENTORY_API_KEY: new URL(upstreamUrl).host,
    },
  });
  await eventually(async () => ((await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/http.request`)).status === 200 ? true : undefined), 20_000, "http.request published");
}, 60_000);

afterAll(async () => {
  await fabric?.stop();
  await new Promise((r) => upstream?.close(r));
});

async function runNode(id: string, input: unknown) {
  const r = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: id, version: "1.0.0" }, input }, { prefer: "wait=20" });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

describe("fabric node-types import --from-openapi", () => {
  it("prints the node types with --dry-run and publishes nothing", async () => {
    const r = await runFabric(["node-types", "import", "--from-openapi", path.join(dir, "inventory.json"), "--dry-run", "--registry", fabric.urls["node-registry"]!]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.node_types.map((t: { node_type_id: string }) => t.node_type_id)).toEqual(["inventory.getItem", "inventory.createItem", "inventory.countItems"]);
    expect(out.node_types[0].extensions["nodefabric.implementation"]).toEqual({ node_type_id: "http.request", version: "1.0.0" });
    expect(out.secrets).toEqual([expect.objectContaining({ name: "INVENTORY_API_KEY" })]);
    expect((await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/inventory.getItem`)).status).toBe(404);
  });

  it("refuses a document it cannot read, with the reason, and publishes nothing", async () => {
    const r = await runFabric(["node-types", "import", "--from-openapi", path.join(dir, "missing.yaml"), "--registry", fabric.urls["node-registry"]!]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/missing\.yaml/);
  });

  it("publishes the selected operations, callable at once through the gateway with the document's security", async () => {
    const r = await runFabric(["node-types", "import", "--from-openapi", path.join(dir, "inventory.json"), "--include", "items", "--registry", fabric.urls["node-registry"]!]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("published 2 node types of Inventory 2.1.0, run by http.request@1.0.0:");
    expect(r.stdout).toMatch(/left out \(1\)/);
    expect(r.stdout).toMatch(/GET \/count \(countItems\): not selected/);
    expect(r.stdout).toContain(`FABRIC_SECRET_INVENTORY_API_KEY=…  FABRIC_EXECUTOR_SECRET_HOSTS_INVENTORY_API_KEY=${new URL(upstreamUrl).host}`);

    const got = await runNode("inventory.getItem", { itemId: "a/b", tags: ["x", "y"] });
    expect(got.state, JSON.stringify(got.extensions)).toBe("completed");
    expect(got.extensions["nodefabric.outputs"]).toEqual({ id: "a/b", tags: "x,y" });
    const request = seen.at(-1)!;
    expect(request.url).toBe("/v1/items/a%2Fb?tags=x,y");
    expect(request.headers["x-api-key"]).toBe("k-123");

    const made = await runNode("inventory.createItem", { body: { name: "mug" } });
    expect(made.state, JSON.stringify(made.extensions)).toBe("completed");
    expect(made.extensions["nodefabric.outputs"]).toEqual({ id: "new", name: "mug" });
    expect(JSON.parse(seen.at(-1)!.body)).toEqual({ name: "mug" });

    expect((await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/inventory.countItems`)).status).toBe(404);
  });

  it("checks inputs against the operation's schema before any request is sent", async () => {
    const before = seen.length;
    const r = await call("POST", `${fabric.urls["run-gateway"]}/v1/runs`, { root_node_type_ref: { node_type_id: "inventory.createItem", version: "1.0.0" }, input: { body: { size: 3 } } }, { prefer: "wait=20" });
    expect(r.status).toBe(200);
    expect(r.body.state).toBe("failed");
    expect(r.body.extensions["nodefabric.error"]).toMatchObject({ code: "invalid_inputs" });
    expect(seen.length).toBe(before);
  });
});
