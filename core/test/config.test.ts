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
