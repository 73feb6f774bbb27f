/**
 * What the fabric tells a service plugin (`options.fabric`): the URL of every service, known once it listens even
 * when it starts after the plugin's service, and the auth facts (mode, issuer, auth.oidc) without secrets; and the
 * `links` a plugin adds to the start banner.
 */
import { describe, it, expect, afterEach } from "vitest";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { definePlugin, type PluginServiceContext } from "../src/plugin.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { startFabric, type RunningFabric } from "../src/fabric.js";
import type { LoadedPlugin } from "../src/plugin-loader.js";
import { call } from "./support/gateway-http.js";

/** A plugin on the registry that answers what it was told, read at request time. */
const reporter = definePlugin({
  name: "reporter",
  services: [
    {
      service: "node-registry",
      options: { own: "kept" },
      plugin: async (app: FastifyInstance, opts: { own?: string; fabric: PluginServiceContext }) => {
        app.get("/told", { config: { access: "public" } }, async () => ({
          own: opts.own,
          service: opts.fabric.service,
          gateway: opts.fabric.serviceUrl("run-gateway"),
          registry: opts.fabric.serviceUrl("node-registry"),
          auth: opts.fabric.auth,
          // A token of the service's own for another service: none with authentication disabled.
          token: (await opts.fabric.serviceToken?.("run-coordinator")) ?? null,
        }));
      },
    },
  ],
  links: [{ label: "told", service: "node-registry", path: "/told" }],
});
const loaded: LoadedPlugin = { definition: reporter, source: "reporter", file: "reporter.js", discovered: false };

describe("a service plugin's options.fabric", () => {
  let fabric: RunningFabric | undefined;
  afterEach(async () => {
    await fabric?.close();
    fabric = undefined;
  });

  it("gives its own options, the service URLs (a later service's once it listens) and the auth facts", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-plugin-context-"));
    const config = { ...loadConfig({ cwd: dir, env: {} }), port_base: 0, data_dir: dir, log_level: "silent" as const, policy_checks: false };
    fabric = await startFabric(config, ["node-registry", "run-coordinator", "run-gateway"], { plugins: [loaded] });
    const r = await call("GET", `${fabric.urls["node-registry"]}/told`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ own: "kept", service: "node-registry", gateway: fabric.urls["run-gateway"], registry: fabric.urls["node-registry"], auth: { mode: "disabled" }, token: null });
  });
});

describe("plugin links and auth.oidc", () => {
  it("checks a plugin's links at once, naming the field", () => {
    expect(() => definePlugin({ name: "l", links: [{ label: "", service: "run-gateway", path: "/x" }] })).toThrow(/links\[0\]\.label/);
    expect(() => definePlugin({ name: "l", links: [{ label: "x", service: "gateway" as never, path: "/x" }] })).toThrow(/links\[0\]\.service` is "gateway"/);
    expect(() => definePlugin({ name: "l", links: [{ label: "x", service: "run-gateway", path: "x" }] })).toThrow(/links\[0\]\.path/);
    expect(definePlugin({ name: "l", links: [{ label: "x", service: "run-gateway", path: "/x/" }] }).links).toHaveLength(1);
  });

  it("takes auth.oidc (issuer, client_id, scope) and refuses one without a client", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-oidc-config-"));
    fs.writeFileSync(path.join(dir, "fabric.config.json"), JSON.stringify({ auth: { oidc: { issuer: "https://login.example.com/", client_id: "console", scope: "openid runs:read" } } }));
    expect(loadConfig({ cwd: dir, env: {} }).auth.oidc).toEqual({ issuer: "https://login.example.com/", client_id: "console", scope: "openid runs:read" });
    fs.writeFileSync(path.join(dir, "fabric.config.json"), JSON.stringify({ auth: { oidc: { issuer: "https://login.example.com/" } } }));
    expect(() => loadConfig({ cwd: dir, env: {} })).toThrow(ConfigError);
  });
});
