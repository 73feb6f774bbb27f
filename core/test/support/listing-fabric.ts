/**
 * A fabric for the listing tests: the demo handlers, and a real PDP policy under which every demo.sleep waits for a
 * person before it executes.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../src/config.js";
import { startFabric, type RunningFabric } from "../../src/fabric.js";
import { buildRunGateway } from "../../src/services/run-gateway/index.js";
import { baseOf, call, until } from "./gateway-http.js";

const repoRoot = fileURLToPath(new URL("../../..", import.meta.url));

export const SLEEP_NEEDS_APPROVAL = `
@id("allow-the-rest")
permit(principal, action, resource);

@id("approve-sleep-execute")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.sleep");
`;

/** Starts it; `auth` is what `fabric dev` takes under `auth`. */
export async function startListingFabric(auth?: Record<string, unknown>): Promise<RunningFabric> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-listings-"));
  const policy = path.join(dataDir, "policy.cedar");
  fs.writeFileSync(policy, SLEEP_NEEDS_APPROVAL);
  const flags: Record<string, unknown> = { port_base: 0, data_dir: dataDir, log_level: "silent", handlers: ["@nodefabric/handler-demo"], policy };
  if (auth) flags.auth = auth;
  const config = loadConfig({ cwd: repoRoot, env: {}, flags: flags as never });
  return startFabric(config, ["node-registry", "pdp", "selection", "atomic-executor", "run-coordinator", "run-gateway"]);
}

/** The three ways in that the listing tests ask alike: the fabric's gateway, a forwarding gateway, the coordinator. */
export interface ListingBases {
  inProcess: string;
  forwarded: string;
  coordinator: string;
}

/**
 * The listing fabric and a gateway forwarding to its coordinator over HTTP, once the demo node types are published.
 * `close` stops both.
 */
export async function startListingSetup(): Promise<{ fabric: RunningFabric; bases: ListingBases; close(): Promise<void> }> {
  const fabric = await startListingFabric();
  const forwarding = await buildRunGateway({ logger: false, coordinatorUrl: fabric.urls["run-coordinator"]! });
  await forwarding.listen({ host: "127.0.0.1", port: 0 });
  const bases = { inProcess: fabric.urls["run-gateway"]!, forwarded: baseOf(forwarding), coordinator: fabric.urls["run-coordinator"]! };
  await until("demo node types published", async () => {
    const r = await call("GET", `${fabric.urls["node-registry"]}/v1/node-types/demo.sleep`);
    return r.status === 200 ? true : undefined;
  });
  return {
    fabric,
    bases,
    close: async () => {
      await forwarding.close();
      await fabric.close();
    },
  };
}
