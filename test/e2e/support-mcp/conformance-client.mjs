#!/usr/bin/env node
// The client under test for the MCP conformance suite's client leg (`conformance client --command "node <this>"`):
// NodeFabric itself, as a user meets it. The suite starts a scenario's MCP server and appends its URL to the command;
// this probe then does what a user does with an MCP server:
//   1. `fabric node-types import --from-mcp <url> --prefix <p>`: one node type per tool, run by mcp.call;
//   2. runs each imported tool as a run through the gateway (POST /v1/runs, Prefer: wait), with arguments made from its
//      input schema, and prints each run's state and outputs.
// So the MCP client the suite checks is the importer's and mcp.call's (the official SDK v2 client inside
// @nodefabric/handler-mcp), seen on the wire.
//
// Environment (set by test/e2e/mcp-conformance.test.ts):
//   NF_CLI       the fabric CLI (core/dist/cli/main.js)     NF_NODE  the Node that runs it
//   NF_REGISTRY  the node registry                           NF_GATEWAY  the run gateway
//   MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION: set by the suite.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";

const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION;
const { NF_CLI, NF_NODE, NF_REGISTRY, NF_GATEWAY } = process.env;
if (!url || !NF_CLI || !NF_REGISTRY || !NF_GATEWAY) {
  console.error("usage: NF_CLI=… NF_REGISTRY=… NF_GATEWAY=… conformance-client.mjs <server-url>");
  process.exit(2);
}

// A fresh prefix per scenario run, so runs of several scenarios never share node type ids.
const prefix = `conf${randomBytes(4).toString("hex")}`;
// The era the suite asks for: 2026-07-28 pinned, or the 2025 era (initialize) for a dated 2025 version.
const protocol = version === "2026-07-28" ? "2026-07-28" : "legacy";

const imported = spawnSync(NF_NODE || process.execPath, [NF_CLI, "node-types", "import", "--from-mcp", url, "--prefix", prefix, "--protocol", protocol, "--registry", NF_REGISTRY], {
  encoding: "utf8",
  timeout: 60_000,
});
process.stdout.write(imported.stdout ?? "");
process.stderr.write(imported.stderr ?? "");
if (imported.status !== 0) {
  console.error(`import --from-mcp exited ${imported.status}`);
  process.exit(1);
}

const list = await (await fetch(`${NF_REGISTRY}/v1/node-types?q=${encodeURIComponent(`${prefix}.`)}&limit=1000`)).json();
const types = (Array.isArray(list) ? list : (list.items ?? list.node_types ?? [])).filter((t) => t.node_type_id.startsWith(`${prefix}.`));
console.log(`imported ${types.length} node type(s): ${types.map((t) => t.node_type_id).join(", ")}`);

// A scenario that only checks what a client does with a listed schema needs no call.
const LIST_ONLY = new Set(["json-schema-ref-no-deref"]);
if (LIST_ONLY.has(scenario)) process.exit(0);

/**
 * Arguments that satisfy a schema's required properties, with sample values. Strings carry a non-ASCII character, so a
 * parameter mirrored into an Mcp-Param header (SEP-2243) needs the client's Base64 encoding.
 */
function sample(schema, depth = 0) {
  if (!schema || typeof schema !== "object" || depth > 6) return {};
  if (schema.default !== undefined) return schema.default;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  if (schema.const !== undefined) return schema.const;
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === "number" || type === "integer") return schema.minimum ?? 2;
  if (type === "string") return "conformance ✓";
  if (type === "boolean") return true;
  if (type === "array") return [];
  const out = {};
  for (const key of schema.required ?? []) out[key] = sample(schema.properties?.[key], depth + 1);
  return out;
}

// json-schema-2020-12-preservation: the focal tool's schema, as the importer kept it in the registry, goes back to the
// server through its echo tool, which reports any keyword the client stripped or changed.
const inputs = new Map(types.map((t) => [t.node_type_id, sample(t.input_schema)]));
if (scenario === "json-schema-2020-12-preservation") {
  const focal = types.find((t) => t.node_type_id === `${prefix}.json_schema_2020_12_tool`);
  inputs.clear();
  if (focal) inputs.set(`${prefix}.json_schema_echo`, { schema: focal.input_schema });
}

let failed = 0;
for (const t of types) {
  if (!inputs.has(t.node_type_id)) continue;
  const input = inputs.get(t.node_type_id);
  const res = await fetch(`${NF_GATEWAY}/v1/runs`, {
    method: "POST",
    headers: { "content-type": "application/json", prefer: "wait=30" },
    body: JSON.stringify({ root_node_type_ref: { node_type_id: t.node_type_id, version: t.version }, input }),
  });
  const run = await res.json();
  const outputs = run.extensions?.["nodefabric.outputs"];
  const error = run.extensions?.["nodefabric.error"];
  console.log(`${t.node_type_id} ${JSON.stringify(input)} -> HTTP ${res.status} ${run.state} ${JSON.stringify(outputs ?? error ?? run.error ?? null)}`);
  if (run.state !== "completed") failed++;
}
process.exit(failed ? 1 : 0);
