/**
 * Egress of http.request is safe by default: every address a connection goes to is checked when it connects, so
 * loopback, private, link-local and metadata addresses are refused whatever the URL looks like (names, decimal or hex
 * IPv4, IPv6 forms, DNS rebinding, redirects), unless the executor's operator allows them, never a node type; and a
 * secret goes only to the hosts the operator bound it to. Everything runs through a whole fabric: a node type is
 * published in the registry, run through the gateway, and executed by the atomic executor, against real loopback
 * servers that record what reached them.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import dns from "node:dns";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig, SERVICE_NAMES, startFabric, type RunningFabric, type StartFabricOptions } from "@nodefabric/core";
import { httpRequest } from "../src/index.js";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

interface Upstream {
  /** Base URL, e.g. http://127.0.0.2:PORT */
  url: string;
  /** host:port */
  host: string;
  port: number;
  seen: Seen[];
  close(): Promise<void>;
}

/** A loopback HTTP server on `address` (and `port`, 0 for any) that records every request and answers with `route`. */
async function startUpstream(address: string, port: number, route: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => sendJson(res, 200, { ok: true, address })): Promise<Upstream> {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers });
    req.resume();
    req.on("end", () => route(req, res));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, address, resolve);
  });
  const actual = (server.address() as { port: number }).port;
  const host = `${address.includes(":") ? `[${address}]` : address}:${actual}`;
  return {
    url: `http://${host}`,
    host,
    port: actual,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Test DNS: names of the tests resolve as this map says (a function answers differently each time); others go to the system. */
function testResolver(names: Record<string, string | (() => string)>): NonNullable<StartFabricOptions["egressLookup"]> {
  return async (hostname) => {
    const entry = names[hostname.toLowerCase()];
    if (entry === undefined) return dns.promises.lookup(hostname, { all: true });
    const address = typeof entry === "function" ? entry() : entry;
    return [{ address, family: address.includes(":") ? 6 : 4 }];
  };
}

interface TestFabric {
  fabric: RunningFabric;
  publish(nodeType: Json): Promise<void>;
  /** Runs a node type through the gateway and answers the ended Run. */
  run(id: string, input?: Record<string, unknown>): Promise<Json>;
  close(): Promise<void>;
}

/**
 * A whole fabric serving http.request, configured like an operator would: `flags` as fabric.config.json options
 * (executor.egress…), `env` as FABRIC_* variables. Secrets come from FABRIC_SECRET_* in the process environment.
 */
async function openFabric(options: { flags?: Record<string, unknown>; env?: Record<string, string>; secrets?: Record<string, string>; lookup?: StartFabricOptions["egressLookup"] }): Promise<TestFabric> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-egress-"));
  const config = loadConfig({ cwd: dataDir, env: options.env ?? {}, flags: { port_base: 0, data_dir: dataDir, log_level: "silent", ...options.flags } as never });
  const secretKeys = Object.keys(options.secrets ?? {}).map((name) => `FABRIC_SECRET_${name}`);
  // The executor reads FABRIC_SECRET_* from the environment when it starts.
  for (const [name, value] of Object.entries(options.secrets ?? {})) process.env[`FABRIC_SECRET_${name}`] = value;
  let fabric: RunningFabric;
  try {
    fabric = await startFabric(config, SERVICE_NAMES, { definitions: [httpRequest], egressLookup: options.lookup });
  } finally {
    for (const key of secretKeys) delete process.env[key];
  }
  const registry = fabric.urls["node-registry"]!;
  const gateway = fabric.urls["run-gateway"]!;
  const end = Date.now() + 15_000;
  for (;;) {
    const r = await call("GET", `${registry}/v1/executors?node_type_id=http.request`);
    if (r.status === 200 && r.body.length > 0) break;
    if (Date.now() > end) throw new Error("the executor did not register http.request");
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    fabric,
    async publish(nodeType) {
      const r = await call("POST", `${registry}/v1/node-types`, { node_type: nodeType });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    },
    async run(id, input = {}) {
      const r = await call("POST", `${gateway}/v1/runs`, { root_node_type_ref: { node_type_id: id, version: "1.0.0" }, input }, { prefer: "wait=20" });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(["completed", "failed"]).toContain(r.body.state);
      return r.body;
    },
    async close() {
      await fabric.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A NodeType implemented by http.request@1.0.0, configured by `http`. */
function httpBacked(id: string, http: Record<string, unknown>, extra: Record<string, unknown> = {}): Json {
  return {
    node_type_id: id,
    version: "1.0.0",
    kind: "atomic",
    description: `${id}, backed by an HTTP API`,
    input_schema: { type: "object" },
    output_schema: { type: "object" },
    constraints: { gates: { side_effect_class: "read" } },
    extensions: { "nodefabric.implementation": { node_type_id: "http.request", version: "1.0.0" }, "nodefabric.http": http },
    ...extra,
  };
}

/** A node type with no base_url, taking its URL from the inputs, limited to `hosts`. */
function directCall(id: string, hosts: string[], http: Record<string, unknown> = {}): Json {
  return httpBacked(id, { allowed_hosts: hosts, ...http }, { input_schema: httpRequest.nodeType.input_schema, output_schema: httpRequest.nodeType.output_schema });
}

const errorOf = (run: Json) => run.extensions?.["nodefabric.error"];

describe("by default, http.request refuses every address that is not public, when it connects", () => {
  let f: TestFabric;
  let v4: Upstream;
  let v6: Upstream | undefined;
  let counter = 0;
  const id = () => `egress.default-${++counter}`;

  beforeAll(async () => {
    v4 = await startUpstream("127.0.0.1", 0);
    // The same port on ::1, so "[::1]" and "localhost" (which may resolve to ::1) would reach a recording server.
    v6 = await startUpstream("::1", v4.port).catch(() => undefined);
    f = await openFabric({ lookup: testResolver({ "loopback.test": "127.0.0.1", "loopback6.test": "::1", "mapped.test": "::ffff:127.0.0.1" }) });
  }, 60_000);
  afterAll(async () => {
    await f?.close();
    await v4?.close();
    await v6?.close();
  });

  const refused = async (baseUrl: string, expected: { host: string; address?: string; reason: string; message: RegExp }) => {
    const nodeType = id();
    await f.publish(httpBacked(nodeType, { base_url: baseUrl, path: "/anything" }));
    const run = await f.run(nodeType);
    expect(run.state, JSON.stringify(run.extensions)).toBe("failed");
    const error = errorOf(run);
    expect(error, JSON.stringify(error)).toMatchObject({ code: "egress_denied" });
    expect(error.retryable).toBe(false);
    expect(error.details).toMatchObject({ host: expected.host, reason: expected.reason, ...(expected.address ? { address: expected.address } : {}) });
    expect(error.message).toMatch(expected.message);
    expect(error.message).toContain("executor.egress");
    return error;
  };

  it("refuses loopback however the URL writes it: 127.0.0.1, localhost, [::1], 2130706433, 0x7f000001, 127.1, [::ffff:127.0.0.1]", async () => {
    const port = v4.port;
    await refused(`http://127.0.0.1:${port}`, { host: "127.0.0.1", address: "127.0.0.1", reason: "loopback", message: /127\.0\.0\.1 is a loopback address \(127\.0\.0\.0\/8\)/ });
    await refused(`http://localhost:${port}`, { host: "localhost", reason: "loopback", message: /localhost resolved to (127\.0\.0\.1|::1), a loopback address/ });
    await refused(`http://[::1]:${port}`, { host: "::1", address: "::1", reason: "loopback", message: /::1 is a loopback address \(::1\/128\)/ });
    // The URL parser turns these into 127.0.0.1; what is checked is the address connected to.
    await refused(`http://2130706433:${port}`, { host: "127.0.0.1", address: "127.0.0.1", reason: "loopback", message: /loopback/ });
    await refused(`http://0x7f000001:${port}`, { host: "127.0.0.1", address: "127.0.0.1", reason: "loopback", message: /loopback/ });
    await refused(`http://127.1:${port}`, { host: "127.0.0.1", address: "127.0.0.1", reason: "loopback", message: /loopback/ });
    await refused(`http://[::ffff:127.0.0.1]:${port}`, { host: "::ffff:7f00:1", reason: "loopback", message: /::ffff:7f00:1 is the IPv4-mapped form of 127\.0\.0\.1, a loopback address/ });
    expect(v4.seen).toEqual([]);
    expect(v6?.seen ?? []).toEqual([]);
  });

  it("refuses a host name that resolves to loopback, in IPv4, IPv6 and IPv4-mapped form", async () => {
    const port = v4.port;
    const error = await refused(`http://loopback.test:${port}`, { host: "loopback.test", address: "127.0.0.1", reason: "loopback", message: /loopback\.test resolved to 127\.0\.0\.1, a loopback address/ });
    expect(error.message).toContain(`loopback.test:${port}`);
    await refused(`http://loopback6.test:${port}`, { host: "loopback6.test", address: "::1", reason: "loopback", message: /loopback6\.test resolved to ::1/ });
    await refused(`http://mapped.test:${port}`, { host: "mapped.test", reason: "loopback", message: /IPv4-mapped form of 127\.0\.0\.1/ });
    expect(v4.seen).toEqual([]);
    expect(v6?.seen ?? []).toEqual([]);
  });

  it("refuses private, link-local, CGNAT, unspecified and cloud metadata addresses and names before connecting", async () => {
    await refused("http://169.254.169.254", { host: "169.254.169.254", address: "169.254.169.254", reason: "metadata", message: /cloud metadata address/ });
    await refused("http://metadata.google.internal", { host: "metadata.google.internal", reason: "metadata", message: /metadata\.google\.internal is a cloud metadata service/ });
    await refused("http://[fd00:ec2::254]", { host: "fd00:ec2::254", reason: "metadata", message: /cloud metadata address/ });
    await refused("http://10.0.0.1:8080", { host: "10.0.0.1", reason: "private", message: /10\.0\.0\.1 is a private address \(10\.0\.0\.0\/8\)/ });
    await refused("http://172.16.5.4:8080", { host: "172.16.5.4", reason: "private", message: /172\.16\.0\.0\/12/ });
    await refused("http://192.168.1.1:8080", { host: "192.168.1.1", reason: "private", message: /192\.168\.0\.0\/16/ });
    await refused("http://[fc00::1]:8080", { host: "fc00::1", reason: "private", message: /fc00::\/7/ });
    await refused("http://169.254.1.1:8080", { host: "169.254.1.1", reason: "link_local", message: /link-local/ });
    await refused("http://[fe80::1]:8080", { host: "fe80::1", reason: "link_local", message: /link-local/ });
    await refused("http://100.64.0.1:8080", { host: "100.64.0.1", reason: "shared", message: /carrier-grade NAT/ });
    await refused(`http://0.0.0.0:${v4.port}`, { host: "0.0.0.0", reason: "unspecified", message: /unspecified/ });
    await refused(`http://[::]:${v4.port}`, { host: "::", reason: "unspecified", message: /unspecified/ });
    expect(v4.seen).toEqual([]);
    expect(v6?.seen ?? []).toEqual([]);
  });

  it("refuses loopback even when the node type lists it in allowed_hosts: a node type only narrows", async () => {
    const nodeType = id();
    await f.publish(directCall(nodeType, [v4.host, `localhost:${v4.port}`, `loopback.test:${v4.port}`]));
    const run = await f.run(nodeType, { url: `${v4.url}/x` });
    expect(errorOf(run)).toMatchObject({ code: "egress_denied", details: { reason: "loopback", address: "127.0.0.1" } });
    const named = await f.run(nodeType, { url: `http://loopback.test:${v4.port}/x` });
    expect(errorOf(named)).toMatchObject({ code: "egress_denied", details: { reason: "loopback", host: "loopback.test" } });
    expect(v4.seen).toEqual([]);
  });
});

describe("what the operator allows in the executor's configuration", () => {
  // 127.0.0.2 and 127.0.0.3 stand for public hosts: the operator allows them with allow_cidrs, while 127.0.0.1
  // stays refused. `api` is where the secret belongs, `elsewhere` is a host a node type's author picks.
  let f: TestFabric;
  let api: Upstream;
  let elsewhere: Upstream;
  let internal: Upstream;
  let rebindPublic: Upstream;
  let rebindLoopback: Upstream;
  let rebindLookups = 0;
  const SECRET = "s3cr3t-value-for-api-only";
  const OTHER_SECRET = "s3cr3t-value-bound-to-nothing";
  const allSeen = () => [...api.seen, ...elsewhere.seen, ...internal.seen, ...rebindPublic.seen, ...rebindLoopback.seen];

  beforeAll(async () => {
    internal = await startUpstream("127.0.0.1", 0);
    api = await startUpstream("127.0.0.2", 0, (req, res) => {
      const url = new URL(req.url!, "http://x");
      if (url.pathname === "/to-loopback") return void res.writeHead(302, { location: `${internal.url}/stolen` }).end();
      if (url.pathname === "/to-loopback-name") return void res.writeHead(307, { location: `http://loopback.test:${internal.port}/stolen` }).end();
      if (url.pathname === "/to-elsewhere") return void res.writeHead(302, { location: `${elsewhere.url}/landed` }).end();
      sendJson(res, 200, { ok: true, at: "api", authorization: req.headers.authorization ?? null });
    });
    elsewhere = await startUpstream("127.0.0.3", 0);
    // Rebinding: the same port on two addresses; rebind.test answers the allowed one first, then loopback.
    rebindLoopback = await startUpstream("127.0.0.1", 0);
    rebindPublic = await startUpstream("127.0.0.2", rebindLoopback.port, (_req, res) => sendJson(res, 200, { ok: true, at: "public" }, { connection: "close" }));

    f = await openFabric({
      flags: { executor: { egress: { allow_cidrs: ["127.0.0.2/32", "127.0.0.3/32"], allow_hosts: ["internal.test"] } } },
      env: { FABRIC_EXECUTOR_SECRET_HOSTS_API_KEY: `${api.host}, api.test:${api.port}` },
      secrets: { API_KEY: SECRET, OTHER_KEY: OTHER_SECRET },
      lookup: testResolver({
        "internal.test": "127.0.0.1",
        "loopback.test": "127.0.0.1",
        "api.test": "127.0.0.2",
        "rebind.test": () => (++rebindLookups === 1 ? "127.0.0.2" : "127.0.0.1"),
      }),
    });
  }, 60_000);
  afterAll(async () => {
    await f?.close();
    for (const u of [api, elsewhere, internal, rebindPublic, rebindLoopback]) await u?.close();
  });

  it("allows the addresses of allow_cidrs and the names of allow_hosts, and nothing else", async () => {
    await f.publish(httpBacked("op.allowed-cidr", { base_url: elsewhere.url, path: "/x" }));
    expect((await f.run("op.allowed-cidr")).state).toBe("completed");
    expect(elsewhere.seen.at(-1)?.url).toBe("/x");

    await f.publish(httpBacked("op.allowed-host", { base_url: `http://internal.test:${internal.port}`, path: "/y" }));
    const viaName = await f.run("op.allowed-host");
    expect(viaName.state, JSON.stringify(viaName.extensions)).toBe("completed");
    expect(internal.seen.map((s) => s.url)).toEqual(["/y"]);

    // The same server by its address, or by another name resolving to it, stays refused.
    await f.publish(httpBacked("op.same-by-address", { base_url: internal.url, path: "/z" }));
    expect(errorOf(await f.run("op.same-by-address"))).toMatchObject({ code: "egress_denied", details: { reason: "loopback" } });
    await f.publish(httpBacked("op.same-by-other-name", { base_url: `http://loopback.test:${internal.port}`, path: "/z" }));
    expect(errorOf(await f.run("op.same-by-other-name"))).toMatchObject({ code: "egress_denied", details: { host: "loopback.test", reason: "loopback" } });
    expect(internal.seen.map((s) => s.url)).toEqual(["/y"]);
  });

  it("checks the address it actually connects to: a name that rebinds to loopback after a first, allowed answer is refused", async () => {
    await f.publish(httpBacked("op.rebind", { base_url: `http://rebind.test:${rebindLoopback.port}`, path: "/r" }));
    const first = await f.run("op.rebind");
    expect(first.state, JSON.stringify(first.extensions)).toBe("completed");
    expect(first.extensions["nodefabric.outputs"]).toEqual({ ok: true, at: "public" });
    expect(rebindPublic.seen).toHaveLength(1);
    // One resolution per connection, and the connection went where that answer pointed.
    expect(rebindLookups).toBe(1);

    // The server closed the connection, so the next run connects anew, and the name now answers 127.0.0.1.
    const second = await f.run("op.rebind");
    expect(errorOf(second)).toMatchObject({ code: "egress_denied", details: { host: "rebind.test", address: "127.0.0.1", reason: "loopback" } });
    expect(errorOf(second).message).toContain("rebind.test resolved to 127.0.0.1");
    expect(rebindLoopback.seen).toEqual([]);
  });

  it("checks every redirect hop when it connects: a redirect from an allowed host to loopback is refused", async () => {
    const hosts = [api.host, internal.host, `loopback.test:${internal.port}`];
    await f.publish(httpBacked("op.redirect-loopback", { base_url: api.url, path: "/to-loopback", follow_redirects: true, allowed_hosts: hosts }));
    const byAddress = await f.run("op.redirect-loopback");
    expect(errorOf(byAddress)).toMatchObject({ code: "egress_denied", details: { host: "127.0.0.1", address: "127.0.0.1", reason: "loopback" } });
    await f.publish(httpBacked("op.redirect-loopback-name", { base_url: api.url, path: "/to-loopback-name", follow_redirects: true, allowed_hosts: hosts }));
    const byName = await f.run("op.redirect-loopback-name");
    expect(errorOf(byName)).toMatchObject({ code: "egress_denied", details: { host: "loopback.test", address: "127.0.0.1", reason: "loopback" } });
    expect(api.seen.map((s) => s.url)).toEqual(expect.arrayContaining(["/to-loopback", "/to-loopback-name"]));
    expect(internal.seen.filter((s) => s.url === "/stolen")).toEqual([]);
  });

  it("sends a secret to the host it is bound to, and refuses a node type that sends it anywhere else: the secret never arrives there", async () => {
    const secretHeaders = { authorization: { secret: "API_KEY", prefix: "Bearer " } };
    await f.publish(httpBacked("op.secret-bound", { base_url: api.url, path: "/me", secret_headers: secretHeaders }));
    const bound = await f.run("op.secret-bound");
    expect(bound.state, JSON.stringify(bound.extensions)).toBe("completed");
    expect(api.seen.at(-1)?.headers.authorization).toBe(`Bearer ${SECRET}`);
    // Bound by name too (api.test resolves to the api's address).
    await f.publish(httpBacked("op.secret-bound-name", { base_url: `http://api.test:${api.port}`, path: "/me", secret_headers: secretHeaders }));
    expect((await f.run("op.secret-bound-name")).state).toBe("completed");

    // A node type of someone else's making, pointing the executor's secret at a host of its choosing, reachable as it is.
    await f.publish(httpBacked("op.secret-stolen", { base_url: elsewhere.url, path: "/collect", secret_headers: secretHeaders }));
    const stolen = await f.run("op.secret-stolen");
    expect(stolen.state).toBe("failed");
    expect(errorOf(stolen)).toMatchObject({
      code: "egress_denied",
      details: { reason: "secret_host_not_bound", secret: "API_KEY", host: elsewhere.host, field: "nodefabric.http.secret_headers.authorization" },
    });
    expect(errorOf(stolen).retryable).toBe(false);
    expect(errorOf(stolen).message).toContain("FABRIC_EXECUTOR_SECRET_HOSTS_API_KEY");
    expect(JSON.stringify(stolen)).not.toContain(SECRET);

    // The same with the URL from the inputs, with the api's address spelt another way, and with a bound host's port changed.
    await f.publish(directCall("op.secret-direct", [api.host, elsewhere.host, "127.0.0.2"], { secret_headers: secretHeaders }));
    const direct = await f.run("op.secret-direct", { url: `${elsewhere.url}/collect` });
    expect(errorOf(direct)).toMatchObject({ code: "egress_denied", details: { reason: "secret_host_not_bound", secret: "API_KEY" } });
    const otherPort = await f.run("op.secret-direct", { url: "http://127.0.0.2/collect" });
    expect(errorOf(otherPort)).toMatchObject({ code: "egress_denied", details: { reason: "secret_host_not_bound" } });
    expect(elsewhere.seen.filter((s) => s.url === "/collect")).toEqual([]);
    const ok = await f.run("op.secret-direct", { url: `${api.url}/me` });
    expect(ok.state, JSON.stringify(ok.extensions)).toBe("completed");
    expect(ok.extensions["nodefabric.outputs"].body.authorization).toBe(`Bearer ${SECRET}`);

    // A redirect from the bound host to another one does not carry the secret along.
    await f.publish(httpBacked("op.secret-redirect", { base_url: api.url, path: "/to-elsewhere", follow_redirects: true, allowed_hosts: [api.host, elsewhere.host], secret_headers: secretHeaders }));
    expect((await f.run("op.secret-redirect")).state).toBe("completed");
    expect(elsewhere.seen.at(-1)?.url).toBe("/landed");
    expect(elsewhere.seen.every((s) => s.headers.authorization === undefined)).toBe(true);
    expect(JSON.stringify(elsewhere.seen)).not.toContain(SECRET);
  });

  it("refuses a secret bound to no host at all, and says how to bind it", async () => {
    const before = allSeen().length;
    await f.publish(httpBacked("op.secret-unbound", { base_url: api.url, path: "/me", secret_headers: { "x-api-key": { secret: "OTHER_KEY" } } }));
    const run = await f.run("op.secret-unbound");
    expect(errorOf(run)).toMatchObject({ code: "egress_denied", details: { reason: "secret_unbound", secret: "OTHER_KEY", field: "nodefabric.http.secret_headers.x-api-key" } });
    expect(errorOf(run).message).toContain("executor.secret_hosts.OTHER_KEY");
    expect(errorOf(run).message).toContain("FABRIC_EXECUTOR_SECRET_HOSTS_OTHER_KEY");
    expect(allSeen().length).toBe(before);
    expect(JSON.stringify(allSeen())).not.toContain(OTHER_SECRET);
  });
});

describe("FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE", () => {
  let f: TestFabric;
  let v4: Upstream;

  beforeAll(async () => {
    v4 = await startUpstream("127.0.0.1", 0);
    f = await openFabric({ env: { FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE: "true" }, lookup: testResolver({ "loopback.test": "127.0.0.1" }) });
  }, 60_000);
  afterAll(async () => {
    await f?.close();
    await v4?.close();
  });

  it("allows loopback and private addresses, by address and by name, but still not cloud metadata", async () => {
    await f.publish(httpBacked("priv.address", { base_url: v4.url, path: "/a" }));
    expect((await f.run("priv.address")).state).toBe("completed");
    await f.publish(httpBacked("priv.name", { base_url: `http://loopback.test:${v4.port}`, path: "/b" }));
    expect((await f.run("priv.name")).state).toBe("completed");
    await f.publish(httpBacked("priv.decimal", { base_url: `http://2130706433:${v4.port}`, path: "/c" }));
    expect((await f.run("priv.decimal")).state).toBe("completed");
    expect(v4.seen.map((s) => s.url)).toEqual(["/a", "/b", "/c"]);

    await f.publish(httpBacked("priv.metadata", { base_url: "http://169.254.169.254", path: "/latest/meta-data/" }));
    const metadata = await f.run("priv.metadata");
    expect(errorOf(metadata)).toMatchObject({ code: "egress_denied", details: { reason: "metadata" } });
    expect(errorOf(metadata).message).toContain("allow_cidrs");
  });
});
