import { describe, it, expect } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ConfigError, loadConfig, serviceUrl, servicePort } from "../src/config.js";

function dir(): string {
  return mkdtempSync(path.join(os.tmpdir(), "nf-config-"));
}

describe("configuration", () => {
  it("has working defaults: loopback, ports 8080-8086, ./.fabric", () => {
    const c = loadConfig({ cwd: dir(), env: {} });
    expect(c.host).toBe("127.0.0.1");
    expect(servicePort(c, "run-gateway")).toBe(8080);
    expect(servicePort(c, "pdp")).toBe(8086);
    expect(serviceUrl(c, "node-registry")).toBe("http://127.0.0.1:8084");
    expect(c.data_dir).toBe(".fabric");
  });

  it("layers fabric.config.json, then the environment, then flags", () => {
    const d = dir();
    writeFileSync(path.join(d, "fabric.config.json"), JSON.stringify({ port_base: 9000, data_dir: "state", log_level: "warn" }));
    const c = loadConfig({
      cwd: d,
      env: { FABRIC_PORT_BASE: "9100", FABRIC_NODE_REGISTRY_URL: "http://10.1.2.3:7000" },
      flags: { log_level: "error" },
    });
    expect(c.port_base).toBe(9100);
    expect(c.data_dir).toBe("state");
    expect(c.log_level).toBe("error");
    expect(serviceUrl(c, "node-registry")).toBe("http://10.1.2.3:7000");
    expect(c.base_dir).toBe(d);
  });

  it("stops with a clear message naming each bad option", () => {
    const d = dir();
    writeFileSync(path.join(d, "fabric.config.json"), JSON.stringify({ port_base: "eighty", colour: "blue", log_level: "loud" }));
    let err: unknown;
    try {
      loadConfig({ cwd: d, env: {} });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    expect(msg).toContain("fabric.config.json");
    expect(msg).toContain("port_base: must be integer");
    expect(msg).toContain("colour: unknown option");
    expect(msg).toContain("log_level: must be one of");
  });

  it("names a bad environment variable value", () => {
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_PORT_BASE: "x1" } })).toThrow(/port_base: must be integer/);
  });

  it("refuses a config file that is not JSON", () => {
    const d = dir();
    writeFileSync(path.join(d, "fabric.config.json"), "{ nope");
    expect(() => loadConfig({ cwd: d, env: {} })).toThrow(/is not valid JSON/);
  });

  it("refuses a named config file that does not exist", () => {
    expect(() => loadConfig({ cwd: dir(), env: {}, configFile: "missing.json" })).toThrow(/config file not found/);
  });
});

describe("auth configuration", () => {
  it("is disabled by default, and required when a command says so, below the file, the environment and flags", () => {
    expect(loadConfig({ cwd: dir(), env: {} }).auth.mode).toBe("disabled");
    const d = dir();
    writeFileSync(path.join(d, "jwks.json"), JSON.stringify({ keys: [] }));
    const required = loadConfig({ cwd: d, env: { FABRIC_AUTH_ISSUER: "https://id.example/", FABRIC_AUTH_JWKS_FILE: "jwks.json" }, commandDefaults: { auth: { mode: "required" } } });
    expect(required.auth).toMatchObject({ mode: "required", issuer: "https://id.example/", jwks_file: "jwks.json", clock_tolerance_s: 60 });
    const flagged = loadConfig({ cwd: d, env: { FABRIC_AUTH_MODE: "optional", FABRIC_AUTH_ISSUER: "i", FABRIC_AUTH_JWKS_FILE: "jwks.json" }, commandDefaults: { auth: { mode: "required" } }, flags: { auth: { mode: "disabled" } } });
    expect(flagged.auth.mode).toBe("disabled");
    expect(loadConfig({ cwd: d, env: { FABRIC_AUTH_MODE: "optional", FABRIC_AUTH_ISSUER: "i", FABRIC_AUTH_JWKS_FILE: "jwks.json", FABRIC_AUTH_ALGORITHMS: "ES256,EdDSA" } }).auth).toMatchObject({ mode: "optional", algorithms: ["ES256", "EdDSA"] });
  });

  it("names what is missing or contradictory", () => {
    expect(() => loadConfig({ cwd: dir(), env: {}, commandDefaults: { auth: { mode: "required" } } })).toThrow(/no keys to verify tokens with: set auth.jwks_url, auth.jwks_file or auth.oidc_discovery_url/);
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_AUTH_MODE: "required", FABRIC_AUTH_JWKS_URL: "http://id/jwks" } })).toThrow(/auth.issuer is needed/);
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_AUTH_MODE: "required", FABRIC_AUTH_ISSUER: "i", FABRIC_AUTH_JWKS_URL: "http://id/jwks", FABRIC_AUTH_JWKS_FILE: "x" } })).toThrow(/set only one of jwks_url, jwks_file/);
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_AUTH_MODE: "sometimes" } })).toThrow(/auth.mode: must be one of required, optional, disabled/);
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_AUTH_ALGORITHMS: "HS256" } })).toThrow(/auth.algorithms.0: must be one of/);
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_AUTH_ISSUER: "i", FABRIC_AUTH_SIGNING_KEY_FILE: "k", FABRIC_AUTH_TOKEN_URL: "http://id/token", FABRIC_AUTH_CLIENT_ID: "c", FABRIC_AUTH_CLIENT_SECRET: "s" } })).toThrow(/either signing_key_file .* or token_url/);
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_AUTH_TOKEN_URL: "http://id/token" } })).toThrow(/token_url needs auth.client_id/);
  });

  it("treats only loopback addresses as loopback", async () => {
    const { isLoopbackHost } = await import("../src/config.js");
    for (const h of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com", "128.0.0.1"]) expect(isLoopbackHost(h), h).toBe(false);
  });

  it("refuses to start without authentication anywhere but on loopback, before anything listens", async () => {
    const { startFabric } = await import("../src/fabric.js");
    const config = loadConfig({ cwd: dir(), env: {}, flags: { host: "0.0.0.0", port_base: 0, log_level: "silent" } as never });
    const err = await startFabric(config).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/refusing to listen on 0\.0\.0\.0: authentication is disabled/);
  });

  it("requires a way to obtain service tokens when a calling service has auth on", async () => {
    const { fabricSecurity } = await import("../src/fabric-security.js");
    const d = dir();
    writeFileSync(path.join(d, "jwks.json"), JSON.stringify({ keys: [] }));
    const config = loadConfig({ cwd: d, env: { FABRIC_AUTH_MODE: "required", FABRIC_AUTH_ISSUER: "i", FABRIC_AUTH_JWKS_FILE: "jwks.json" } });
    const security = fabricSecurity(config);
    expect(() => security.forService("run-gateway")).toThrow(/set auth.signing_key_file .* or auth.token_url/);
    expect(security.forService("pdp").auth?.mode).toBe("required");
  });
});

describe("one table of settings", () => {
  it("checks the llm section as @nodefabric/handler-llm reads it", () => {
    const d = dir();
    writeFileSync(
      path.join(d, "fabric.config.json"),
      JSON.stringify({ llm: { default_profile: "x", profiles: { x: { base_url: "https://llm.example/v1", model: "m", structured_output: "yaml", colour: 1 } }, prices: { m: { input_per_million: -1 } }, extra: true } }),
    );
    let message = "";
    try {
      loadConfig({ cwd: d, env: {} });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain("llm.extra: unknown option");
    expect(message).toContain("llm.profiles.x.colour: unknown option");
    expect(message).toContain("llm.profiles.x.structured_output: must be one of json_schema, json_object, tool");
    expect(message).toContain("llm.prices.m: must have required property 'output_per_million'");
    expect(message).toContain("llm.prices.m.input_per_million: must be >= 0");
  });

  it("reads every variable of the table, nested where the option is", async () => {
    const { configFromEnv, DEFAULT_CONFIG, FABRIC_SETTINGS } = await import("../src/config.js");
    expect(DEFAULT_CONFIG).toEqual(FABRIC_SETTINGS.defaults());
    expect(
      configFromEnv({
        FABRIC_COORDINATOR_PUBLIC_URL: "http://10.0.0.7:8081",
        FABRIC_EXECUTOR_SECRET_HOSTS_API_KEY: "api.example.com, *.example.org",
        FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE: "true",
        FABRIC_LIMITS_MAX_STREAMS: "7",
        FABRIC_PDP_URL: "http://pdp:8086",
        FABRIC_POLICY_CHECKS: "maybe",
        FABRIC_HOST: "",
      }),
    ).toEqual({
      coordinator: { public_url: "http://10.0.0.7:8081" },
      executor: { egress: { allow_private: true }, secret_hosts: { API_KEY: ["api.example.com", "*.example.org"] } },
      limits: { max_streams: 7 },
      services: { pdp: { url: "http://pdp:8086" } },
      policy_checks: "maybe",
    });
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_POLICY_CHECKS: "maybe" } })).toThrow(/policy_checks: must be boolean/);
  });
});
