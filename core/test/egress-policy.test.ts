import { describe, it, expect } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { EgressPolicy, parseCidr } from "../src/services/atomic-executor/egress-policy.js";
import { SecretBindings, secretHostsFromEnv, secretsFromEnv } from "@nodefabric/sdk/runtime";
import { ConfigError, loadConfig } from "../src/config.js";

const denial = (policy: EgressPolicy, address: string) => policy.checkAddress(address, address);

describe("the egress policy's view of addresses", () => {
  const strict = new EgressPolicy();

  it("refuses every range that is not public, naming its category", () => {
    const cases: Array<[string, string]> = [
      ["127.0.0.1", "loopback"],
      ["127.255.255.254", "loopback"],
      ["10.20.30.40", "private"],
      ["172.31.255.255", "private"],
      ["192.168.0.1", "private"],
      ["169.254.1.1", "link_local"],
      ["169.254.169.254", "metadata"],
      ["169.254.170.2", "metadata"],
      ["100.100.100.200", "metadata"],
      ["100.64.0.1", "shared"],
      ["100.127.255.255", "shared"],
      ["0.0.0.0", "unspecified"],
      ["0.1.2.3", "unspecified"],
      ["224.0.0.1", "multicast"],
      ["255.255.255.255", "broadcast"],
      ["240.0.0.1", "reserved"],
      ["192.0.2.10", "documentation"],
      ["198.18.0.1", "benchmarking"],
      ["::", "unspecified"],
      ["::1", "loopback"],
      ["fc00::1", "private"],
      ["fd12:3456::1", "private"],
      ["fd00:ec2::254", "metadata"],
      ["fe80::1%eth0", "link_local"],
      ["febf::1", "link_local"],
      ["ff02::1", "multicast"],
      ["2001:db8::1", "documentation"],
      ["100::1", "reserved"],
      ["::7f00:1", "reserved"], // IPv4-compatible, deprecated
      // IPv6 forms that carry an IPv4 address are judged by it.
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"],
      ["::ffff:a9fe:a9fe", "metadata"],
      ["::ffff:10.0.0.1", "private"],
      ["64:ff9b::7f00:1", "loopback"],
      ["64:ff9b::192.168.1.1", "private"],
      ["2002:7f00:1::1", "loopback"],
      ["2002:a9fe:a9fe::", "metadata"],
    ];
    for (const [address, category] of cases) expect(denial(strict, address)?.category, address).toBe(category);
  });

  it("allows public addresses, and IPv6 forms carrying a public IPv4 address", () => {
    for (const address of ["8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1", "192.169.0.1", "2606:4700:4700::1111", "2a00:1450:4001::1", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]) {
      expect(denial(strict, address), address).toBeUndefined();
    }
  });

  it("allow_private allows loopback, private, link-local and CGNAT, never metadata, unspecified or reserved ranges", () => {
    const policy = new EgressPolicy({ allowPrivate: true });
    for (const address of ["127.0.0.1", "::1", "10.0.0.1", "192.168.1.1", "169.254.1.1", "fe80::1", "100.64.0.1", "fd12::1", "::ffff:127.0.0.1"]) expect(denial(policy, address), address).toBeUndefined();
    for (const address of ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "0.0.0.0", "::", "224.0.0.1", "192.0.2.1"]) expect(denial(policy, address), address).toBeDefined();
  });

  it("allow_cidrs allows exactly its ranges, in IPv4 or IPv4-mapped form, metadata included when listed", () => {
    const policy = new EgressPolicy({ allowCidrs: ["127.0.0.1/32", "10.1.0.0/16", "169.254.169.254", "fd12:3456::/32"] });
    for (const address of ["127.0.0.1", "::ffff:127.0.0.1", "10.1.2.3", "169.254.169.254", "fd12:3456:1::1"]) expect(denial(policy, address), address).toBeUndefined();
    for (const address of ["127.0.0.2", "::1", "10.2.0.1", "169.254.170.2", "fd12:3457::1"]) expect(denial(policy, address), address).toBeDefined();
  });

  it("refuses metadata names before resolving them, unless allow_hosts names them", () => {
    expect(strict.checkName("metadata.google.internal")?.category).toBe("metadata");
    expect(strict.checkName("METADATA.google.internal.")?.category).toBe("metadata");
    expect(strict.checkName("api.example.com")).toBeUndefined();
    expect(new EgressPolicy({ allowHosts: ["metadata.google.internal"] }).checkName("metadata.google.internal")).toBeUndefined();
    const hosts = new EgressPolicy({ allowHosts: ["internal.example", "*.corp.example"] });
    expect(hosts.hostAllowed("internal.example")).toBe(true);
    expect(hosts.hostAllowed("api.corp.example")).toBe(true);
    expect(hosts.hostAllowed("corp.example")).toBe(false);
    expect(hosts.hostAllowed("evil-internal.example")).toBe(false);
  });

  it("refuses bad CIDRs and host entries with a message naming them", () => {
    expect(() => parseCidr("10.0.0.0/33")).toThrow(/prefix length/);
    expect(() => parseCidr("10.0.0/8")).toThrow(/not an IP address or CIDR/);
    expect(() => parseCidr("example.com/8")).toThrow(/not an IP address or CIDR/);
    expect(() => new EgressPolicy({ allowHosts: ["127.0.0.1"] })).toThrow(/allow_cidrs/);
  });
});

describe("secret bindings", () => {
  it("reads FABRIC_EXECUTOR_SECRET_HOSTS_<NAME>, and it is no secret", () => {
    const env = { FABRIC_SECRET_API_KEY: "k", FABRIC_EXECUTOR_SECRET_HOSTS_API_KEY: "api.example.com, *.example.org" };
    expect(secretHostsFromEnv(env)).toEqual({ API_KEY: ["api.example.com", "*.example.org"] });
    expect(secretsFromEnv(env)).toEqual({ API_KEY: "k" });
  });

  it("matches host[:port] and *.domain against the URL's host, and refuses an unbound secret", () => {
    const b = new SecretBindings({ API_KEY: ["api.example.com", "*.example.org", "internal.example:8443"] });
    expect(b.refusal("API_KEY", new URL("https://api.example.com/v1"))).toBeUndefined();
    expect(b.refusal("API_KEY", new URL("https://eu.example.org/v1"))).toBeUndefined();
    expect(b.refusal("API_KEY", new URL("https://internal.example:8443/"))).toBeUndefined();
    expect(b.refusal("API_KEY", new URL("https://api.example.com:8443/"))?.reason).toBe("secret_host_not_bound");
    expect(b.refusal("API_KEY", new URL("https://example.org/"))?.reason).toBe("secret_host_not_bound");
    expect(b.refusal("API_KEY", new URL("https://api.example.com.evil.test/"))?.reason).toBe("secret_host_not_bound");
    const unbound = b.refusal("OTHER", new URL("https://api.example.com/"));
    expect(unbound?.reason).toBe("secret_unbound");
    expect(unbound?.message).toContain("FABRIC_EXECUTOR_SECRET_HOSTS_OTHER");
  });
});

describe("executor.egress and executor.secret_hosts in the configuration", () => {
  const dir = () => mkdtempSync(path.join(os.tmpdir(), "nf-egress-config-"));

  it("defaults to allowing nothing but public addresses, and binding no secret", () => {
    const c = loadConfig({ cwd: dir(), env: {} });
    expect(c.executor.egress).toEqual({ allow_private: false, allow_cidrs: [], allow_hosts: [] });
    expect(c.executor.secret_hosts).toEqual({});
  });

  it("layers the file and FABRIC_EXECUTOR_EGRESS_* / FABRIC_EXECUTOR_SECRET_HOSTS_* option by option", () => {
    const d = dir();
    writeFileSync(
      path.join(d, "fabric.config.json"),
      JSON.stringify({ executor: { concurrency: 8, egress: { allow_cidrs: ["10.1.0.0/16"], allow_hosts: ["internal.example"] }, secret_hosts: { A: ["a.example.com"], B: ["b.example.com"] } } }),
    );
    const c = loadConfig({ cwd: d, env: { FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE: "true", FABRIC_EXECUTOR_SECRET_HOSTS_B: "b2.example.com,*.b.example.com" } });
    expect(c.executor.concurrency).toBe(8);
    expect(c.executor.egress).toEqual({ allow_private: true, allow_cidrs: ["10.1.0.0/16"], allow_hosts: ["internal.example"] });
    expect(c.executor.secret_hosts).toEqual({ A: ["a.example.com"], B: ["b2.example.com", "*.b.example.com"] });
  });

  it("names each bad option", () => {
    const d = dir();
    writeFileSync(path.join(d, "fabric.config.json"), JSON.stringify({ executor: { egress: { allow_cidrs: ["10.0.0.0/40"], allow_hosts: ["10.0.0.1"], allow_privat: true } } }));
    expect(() => loadConfig({ cwd: d, env: {} })).toThrow(/executor\.egress\.allow_privat: unknown option/);
    writeFileSync(path.join(d, "fabric.config.json"), JSON.stringify({ executor: { egress: { allow_cidrs: ["10.0.0.0/40"], allow_hosts: ["10.0.0.1"] }, secret_hosts: { K: ["https://x"] } } }));
    let err: unknown;
    try {
      loadConfig({ cwd: d, env: {} });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain("executor.egress.allow_cidrs[0]");
    expect((err as Error).message).toContain("executor.egress.allow_hosts[0]");
    expect((err as Error).message).toContain("executor.secret_hosts.K[0]");
    expect(() => loadConfig({ cwd: dir(), env: { FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE: "yes" } })).toThrow(/executor\.egress\.allow_private: must be boolean/);
  });
});
