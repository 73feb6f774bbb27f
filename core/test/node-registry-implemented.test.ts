import { describe, it, expect, afterAll } from "vitest";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { buildNodeRegistry } from "@nodefabric/core";
import { checkedCall as call } from "./support/checked-call.js";

// A node type published with extensions["nodefabric.implementation"] (an HTTP-backed one, say) runs on whatever
// executor serves the implementing definition, so the registry must not call it unserved.
describe("served node types, implementations included", () => {
  let app: FastifyInstance;
  afterAll(async () => {
    await app?.close();
  });

  it("counts a node type as served when the definition implementing it is served", async () => {
    app = await buildNodeRegistry({ logger: false, dbPath: path.join(mkdtempSync(path.join(os.tmpdir(), "nf-impl-")), "registry.db") });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const unserved = async () => (await call(base, "GET", "/v1/health")).body.checks.find((c: { name: string }) => c.name === "unserved_node_types");
    const publish = (node_type: Record<string, unknown>) => call(base, "POST", "/v1/node-types", { node_type });

    expect((await publish({ node_type_id: "http.request", version: "1.0.0", kind: "atomic" })).status).toBe(200);
    expect(
      (await publish({ node_type_id: "weather.current", version: "1.0.0", kind: "atomic", extensions: { "nodefabric.implementation": { node_type_id: "http.request", version: "1.0.0" } } })).status,
    ).toBe(200);
    expect((await publish({ node_type_id: "orphan.thing", version: "1.0.0", kind: "atomic", extensions: { "nodefabric.implementation": { node_type_id: "nobody.serves", version: "1.0.0" } } })).status).toBe(200);
    expect((await unserved()).details.node_types).toEqual([
      { node_type_id: "http.request", version: "1.0.0" },
      { node_type_id: "orphan.thing", version: "1.0.0" },
      { node_type_id: "weather.current", version: "1.0.0" },
    ]);

    await call(base, "PUT", "/v1/executors/ae-http", { endpoint: "http://127.0.0.1:9", kind: "atomic", node_types: [{ node_type_id: "http.request", version: "1.0.0" }] });
    expect((await unserved()).details.node_types).toEqual([{ node_type_id: "orphan.thing", version: "1.0.0" }]);
  });
});
