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
