/**
 * The `coordinator` section of the configuration: leases and the public address, from fabric.config.json or
 * FABRIC_COORDINATOR_*; a bad value stops the start naming it. On a shared store the coordinator announces its
 * public address in the directory, which is where the other coordinators forward to.
 */
import { afterAll, describe, expect, it } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError, loadConfig, startFabric } from "@nodefabric/core";
import { call, eventually } from "./run-client.js";
import { dropSchemas, newSchema, pgQuery, storeUrl } from "./e2e/pg-fabric.js";

const repo = fileURLToPath(new URL("..", import.meta.url));

describe("coordinator configuration", () => {
  afterAll(async () => {
    await dropSchemas();
  });

  it("reads run_lease_ms, composite_lease_ms and public_url from the file and the environment, and refuses bad ones", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-coord-config-"));
    fs.writeFileSync(path.join(dir, "fabric.config.json"), JSON.stringify({ coordinator: { run_lease_ms: 5000, composite_lease_ms: 4000 } }));
    expect(loadConfig({ cwd: dir, env: {} }).coordinator).toEqual({ run_lease_ms: 5000, composite_lease_ms: 4000 });
    const env = { FABRIC_COORDINATOR_RUN_LEASE_MS: "2500", FABRIC_COORDINATOR_PUBLIC_URL: "http://10.0.0.7:8081" };
    expect(loadConfig({ cwd: dir, env }).coordinator).toEqual({ run_lease_ms: 2500, composite_lease_ms: 4000, public_url: "http://10.0.0.7:8081" });
    expect(() => loadConfig({ cwd: dir, env: { FABRIC_COORDINATOR_RUN_LEASE_MS: "soon" } })).toThrow(ConfigError);
    expect(() => loadConfig({ cwd: dir, env: { FABRIC_COORDINATOR_RUN_LEASE_MS: "10" } })).toThrow(/run_lease_ms/);
    expect(() => loadConfig({ cwd: dir, env: { FABRIC_COORDINATOR_PUBLIC_URL: "http://10.0.0.7:8081/path" } })).toThrow(/public_url/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("announces coordinator.public_url in the shared directory, and its health names the live coordinators", async () => {
    const schema = newSchema("nf_pub");
    const fabric = await startFabric(
      loadConfig({
        cwd: repo,
        env: {},
        flags: {
          port_base: 0,
          data_dir: fs.mkdtempSync(path.join(os.tmpdir(), "nf-pub-")),
          log_level: "silent",
          plugins: [path.join(repo, "plugins/postgres")],
          store: { url: storeUrl(schema) },
          coordinator: { public_url: "http://coordinator-7.internal:8081" },
        } as never,
      }),
      ["node-registry", "run-coordinator"],
    );
    try {
      const rows = await eventually(async () => {
        const r = await pgQuery<{ endpoint: string }>(`SELECT endpoint FROM ${schema}.coordinators`);
        return r.length === 1 && r[0].endpoint ? r : undefined;
      }, 10_000, "the coordinator announced");
      expect(rows[0].endpoint).toBe("http://coordinator-7.internal:8081");
      const health = await call("GET", `${fabric.urls["run-coordinator"]}/v1/health`);
      expect(health.status).toBe(200);
      expect(health.body.checks.find((c: { name: string }) => c.name === "store")).toEqual({ name: "store", status: "ok", details: { shared: true, coordinators: 1 } });
    } finally {
      await fabric.close();
    }
    // A clean stop leaves the directory.
    const [left] = await pgQuery<{ live: boolean }>(`SELECT expires_at > now() AS live FROM ${schema}.coordinators`);
    expect(left.live).toBe(false);
  });
});
