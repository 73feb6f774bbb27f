/**
 * Shared parts of the hardening tests (issue 10, "Contract invariants the coordinator must hold"). Everything runs on
 * real loopback HTTP against a real fabric (SQLite in a temp dir), with authentication required and real signed
 * tokens. What stands in for a peer is itself a real HTTP server: a peer executor registered in the registry's
 * executor directory for node types only it serves, a fake PDP, and an observer that handlers report to.
 */
import { expect } from "vitest";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { validatorFor } from "@nodefabric/schemas";
import { SCOPES, SERVICE_NAMES, audienceOf, loadConfig, startFabric, type RunningFabric, type ServiceName } from "@nodefabric/core";
import { call, eventually, readNdjson, type JsonAnswer } from "./run-client.js";
import { startTestIssuer, type TestIssuer } from "../core/test/support/test-issuer.js";

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const repo = fileURLToPath(new URL("..", import.meta.url));
export const HARDENING_HANDLERS = path.join(repo, "test/fixtures/hardening-handlers");
export const RUN_HANDLERS = path.join(repo, "test/fixtures/run-handlers");

export const isRun = validatorFor("run");
export const isNodeRun = validatorFor("node_run");
export const isEvent = validatorFor("run_event");
export const isEnvelope = validatorFor("error_envelope");

export const ref = (node_type_id: string, version = "1.0.0") => ({ node_type_id, version });
export const ECHO = ref("demo.echo");
export const SLEEP = ref("demo.sleep");
export const FAIL = ref("demo.fail");
export const FANOUT = ref("examples.fanout");
export const NOTIFY = ref("hardening.notify");
export const COSTLY = ref("hardening.costly");
export const SEQUENCE = ref("hardening.sequence");
export const TERMINAL = ["completed", "failed", "canceled"];

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A non-2xx answer: an ErrorEnvelope with this status and code. */
export function expectError(res: JsonAnswer, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(isEnvelope(res.body), JSON.stringify(res.body)).toBe(true);
  expect(res.body.error.code, JSON.stringify(res.body)).toBe(code);
}

// ------------------------------------------------------------------------------------------------ tokens

/** A test identity provider and the tokens an operator of the fabric holds (every scope, one per audience). */
export interface TestAuth {
  idp: TestIssuer;
  keyFile: string;
  token(service: ServiceName): Promise<string>;
  close(): Promise<void>;
}

export async function startTestAuth(): Promise<TestAuth> {
  const idp = await startTestIssuer();
  const dir = mkdtempSync(path.join(os.tmpdir(), "nf-hardening-keys-"));
  const keyFile = path.join(dir, "signing-key.json");
  writeFileSync(keyFile, JSON.stringify(idp.keys[0]!.privateJwk));
  const cache = new Map<ServiceName, { token: string; until: number }>();
  return {
    idp,
    keyFile,
    async token(service) {
      const hit = cache.get(service);
      if (hit && hit.until > Date.now()) return hit.token;
      const token = await idp.mint({ aud: audienceOf(service), scope: SCOPES.join(" "), sub: "hardening-operator", expiresIn: 3600 });
      cache.set(service, { token, until: Date.now() + 30 * 60_000 });
      return token;
    },
    close: () => idp.close(),
  };
}

// ------------------------------------------------------------------------------------------------ the fabric

export interface FabricOptions {
  auth?: TestAuth;
  dataDir?: string;
  /** A fixed port base, so a restarted fabric comes back on the same addresses. */
  portBase?: number;
  /** Cedar policy text for the fabric's own PDP. */
  policy?: string;
  /** A PDP of the test's own: the fabric then starts without its PDP and asks this one. */
  pdpUrl?: string;
  handlers?: string[];
  /** Node type ids whose executors must be registered before the fabric counts as started. */
  ready?: string[];
}

export interface HardeningFabric {
  fabric: RunningFabric;
  dataDir: string;
  gw: string;
  coord: string;
  registry: string;
  /** A request with the operator's token for the service it goes to (none for other addresses). */
  call(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<JsonAnswer>;
  /** The run's events so far, each checked against the schema, seq gapless. */
  events(runId: string): Promise<Json[]>;
  run(runId: string): Promise<Json>;
  nodeRun(nodeRunId: string): Promise<Json>;
  nodeRuns(runId: string): Promise<Json[]>;
  /** Waits until the run has ended and returns it. */
  ended(runId: string, ms?: number): Promise<Json>;
  /** Run, NodeRuns and events as a client sees them now. */
  snapshot(runId: string): Promise<{ run: Json; nodeRuns: Json[]; events: Json[] }>;
  /** Checks the Run's state equals its root NodeRun's. */
  expectRunIsRoot(runId: string): Promise<void>;
  /** POST /v1/approvals/{id}:approve (through the gateway, with the operator's token). */
  approve(approvalId: string): Promise<JsonAnswer>;
  /** POST /v1/approvals/{id}:reject (through the gateway, with the operator's token). */
  reject(approvalId: string): Promise<JsonAnswer>;
  /** Waits until the NodeRun is in one of `states` and returns it. */
  nodeRunIn(nodeRunId: string, states: readonly string[]): Promise<Json>;
  close(): Promise<void>;
}

export async function startHardeningFabric(o: FabricOptions = {}): Promise<HardeningFabric> {
  const dataDir = o.dataDir ?? mkdtempSync(path.join(os.tmpdir(), "nf-hardening-"));
  const flags: Record<string, unknown> = {
    port_base: o.portBase ?? 0,
    data_dir: dataDir,
    log_level: "silent",
    handlers: o.handlers ?? ["@nodefabric/handler-demo", HARDENING_HANDLERS],
  };
  if (o.auth) flags.auth = { mode: "required", issuer: o.auth.idp.issuer, jwks_url: o.auth.idp.jwksUrl, signing_key_file: o.auth.keyFile };
  if (o.policy) {
    const file = path.join(dataDir, "policy.cedar");
    writeFileSync(file, o.policy);
    flags.policy = file;
  }
  let names: readonly ServiceName[] = SERVICE_NAMES;
  if (o.pdpUrl) {
    flags.services = { pdp: { url: o.pdpUrl } };
    names = SERVICE_NAMES.filter((n) => n !== "pdp");
  }
  const fabric = await startFabric(loadConfig({ cwd: repo, env: {}, flags: flags as never }), names);
  const origins = new Map<string, ServiceName>();
  for (const [name, url] of Object.entries(fabric.urls)) origins.set(new URL(url!).origin, name as ServiceName);

  const send = async (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const service = origins.get(new URL(url).origin);
    const auth: Record<string, string> = o.auth && service && !headers.authorization ? { authorization: `Bearer ${await o.auth.token(service)}` } : {};
    return call(method, url, body, { ...auth, ...headers });
  };
  const gw = fabric.urls["run-gateway"]!;
  const coord = fabric.urls["run-coordinator"]!;
  const registry = fabric.urls["node-registry"]!;

  const h: HardeningFabric = {
    fabric,
    dataDir,
    gw,
    coord,
    registry,
    call: send,
    async events(runId) {
      const headers: Record<string, string> = o.auth ? { authorization: `Bearer ${await o.auth.token("run-gateway")}` } : {};
      const ev = await readNdjson(`${gw}/v1/runs/${runId}/events?follow=false`, headers);
      expect(ev.status, JSON.stringify(ev.lines)).toBe(200);
      for (const e of ev.lines) expect(isEvent(e), JSON.stringify(e)).toBe(true);
      expect(ev.lines.map((e) => e.seq)).toEqual(ev.lines.map((_, i) => i));
      return ev.lines;
    },
    async run(runId) {
      const r = await send("GET", `${gw}/v1/runs/${runId}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(isRun(r.body), JSON.stringify(r.body)).toBe(true);
      return r.body;
    },
    async nodeRun(id) {
      const r = await send("GET", `${gw}/v1/node-runs/${id}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(isNodeRun(r.body), JSON.stringify(r.body)).toBe(true);
      return r.body;
    },
    async nodeRuns(runId) {
      const r = await send("GET", `${gw}/v1/runs/${runId}/node-runs`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      for (const n of r.body) expect(isNodeRun(n), JSON.stringify(n)).toBe(true);
      return [...r.body].sort((a: Json, b: Json) => (a.node_run_id < b.node_run_id ? -1 : 1));
    },
    async ended(runId, ms = 20_000) {
      return eventually(
        async () => {
          const r = await send("GET", `${gw}/v1/runs/${runId}`);
          return TERMINAL.includes(r.body?.state) ? r.body : undefined;
        },
        ms,
        `end of run ${runId}`,
      );
    },
    async snapshot(runId) {
      return { run: await h.run(runId), nodeRuns: await h.nodeRuns(runId), events: await h.events(runId) };
    },
    async expectRunIsRoot(runId) {
      const run = await h.run(runId);
      const root = await h.nodeRun(run.root_node_run_id);
      expect(run.state, `run ${runId} and its root`).toBe(root.state);
    },
    approve: (approvalId) => send("POST", `${gw}/v1/approvals/${approvalId}:approve`),
    reject: (approvalId) => send("POST", `${gw}/v1/approvals/${approvalId}:reject`),
    nodeRunIn: (nodeRunId, states) =>
      eventually(async () => {
        const n = await h.nodeRun(nodeRunId);
        return states.includes(n.state) ? n : undefined;
      }),
    close: () => fabric.close(),
  };

  for (const id of o.ready ?? []) {
    await eventually(
      async () => {
        const r = await send("GET", `${registry}/v1/executors?node_type_id=${encodeURIComponent(id)}`);
        return r.status === 200 && r.body.length > 0 ? true : undefined;
      },
      20_000,
      `executor registration of ${id}`,
    );
  }
  return h;
}

/** Publishes node types and registers `endpoint` as the one executor serving them. */
export async function registerExecutor(h: HardeningFabric, id: string, endpoint: string, kind: "atomic" | "composite", nodeTypes: Json[]): Promise<void> {
  for (const nodeType of nodeTypes) {
    const published = await h.call("POST", `${h.registry}/v1/node-types`, { node_type: nodeType });
    expect(published.status, JSON.stringify(published.body)).toBe(200);
  }
  const put = await h.call("PUT", `${h.registry}/v1/executors/${id}`, {
    endpoint,
    kind,
    node_types: nodeTypes.map((t) => ({ node_type_id: t.node_type_id, version: t.version })),
  });
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  for (const t of nodeTypes) {
    await eventually(async () => {
      const r = await h.call("GET", `${h.registry}/v1/executors?node_type_id=${encodeURIComponent(t.node_type_id)}`);
      return r.body?.some((e: Json) => e.endpoint === endpoint) ? true : undefined;
    });
  }
}

/** Closes each of `things` in turn (those not started are passed over). */
export async function closeAll(...things: Array<{ close(): Promise<void> } | undefined>): Promise<void> {
  for (const thing of things) await thing?.close();
}

// ------------------------------------------------------------------------------------------------ stand-ins

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => resolve(body));
    req.on("error", reject);
  });
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as { port: number }).port}`)));
}

function close(server: Server): Promise<void> {
  server.closeAllConnections?.();
  return new Promise((resolve) => server.close(() => resolve()));
}

function reply(res: ServerResponse, status: number, body?: unknown, raw?: string): void {
  if (status === 204) {
    res.writeHead(204).end();
    return;
  }
  if (raw !== undefined) {
    res.writeHead(status, { "content-type": "text/plain" }).end(raw);
    return;
  }
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

/** What a peer answers to `:execute`: a status and a JSON body, or a raw text body. */
export interface PeerAnswer {
  status?: number;
  body?: unknown;
  raw?: string;
}

/**
 * A peer executor: answers `:execute` with whatever `onExecute` returns and `:begin` with what `onBegin` returns
 * (accepted by default), and records what it was sent.
 */
export interface Peer {
  url: string;
  executes: Array<{ body: Json; headers: IncomingMessage["headers"] }>;
  begins: Json[];
  cancels: string[];
  onExecute: (body: Json) => PeerAnswer | Promise<PeerAnswer>;
  /** How the peer answers `:begin` (default: accepted). */
  onBegin: (body: Json) => PeerAnswer;
  /** The `:begin` the peer received for a NodeRun (waits for it). */
  beginOf(nodeRunId: string): Promise<Json>;
  close(): Promise<void>;
}

export async function startPeer(onExecute: Peer["onExecute"] = (body) => ({ body: { node_run_id: body.node_run_id, state: "completed", outputs: {} } })): Promise<Peer> {
  const peer = { executes: [], begins: [], cancels: [], onExecute, onBegin: () => ({ body: { accepted: true } }) } as unknown as Peer;
  const server = createServer((req, res) => {
    void (async () => {
      const text = await readBody(req);
      const url = (req.url ?? "").split("?")[0]!;
      if (req.method === "GET" && url === "/v1/health") return reply(res, 200, { status: "ok", time: new Date().toISOString() });
      if (req.method === "POST" && url === "/v1/atomic-node-runs:execute") {
        const body = JSON.parse(text);
        peer.executes.push({ body, headers: req.headers });
        const answer = await peer.onExecute(body);
        return reply(res, answer.status ?? 200, answer.body, answer.raw);
      }
      if (req.method === "POST" && url === "/v1/composite-node-runs:begin") {
        const body = JSON.parse(text);
        peer.begins.push(body);
        const answer = peer.onBegin(body);
        return reply(res, answer.status ?? 200, answer.body, answer.raw);
      }
      const cancel = /^\/v1\/(?:atomic|composite)-node-runs\/(.+):cancel$/.exec(url);
      if (req.method === "POST" && cancel) {
        peer.cancels.push(decodeURIComponent(cancel[1]!));
        return reply(res, 204);
      }
      reply(res, 404, { error: { code: "route_not_found", message: `no route ${req.method} ${url}` } });
    })().catch((err) => reply(res, 500, { error: { code: "internal_error", message: String(err) } }));
  });
  peer.url = await listen(server);
  peer.beginOf = (nodeRunId) => eventually(async () => peer.begins.find((b) => b.node_run_id === nodeRunId), 10_000, `:begin of ${nodeRunId}`);
  peer.close = () => close(server);
  return peer;
}

/** A PDP of the test's own: records every PolicyDecisionRequest and answers what `decide` says (allow by default). */
export interface FakePdp {
  url: string;
  requests: Json[];
  decide: (req: Json) => Json;
  close(): Promise<void>;
}

export async function startFakePdp(decide: FakePdp["decide"] = () => ({ decision: "allow", reason_code: "fake_pdp" })): Promise<FakePdp> {
  const pdp = { requests: [], decide } as unknown as FakePdp;
  const server = createServer((req, res) => {
    void (async () => {
      const text = await readBody(req);
      const url = (req.url ?? "").split("?")[0]!;
      if (req.method === "GET" && url === "/v1/health") return reply(res, 200, { status: "ok", time: new Date().toISOString() });
      if (req.method === "POST" && url === "/v1/policy:decide") {
        const body = JSON.parse(text);
        pdp.requests.push(body);
        return reply(res, 200, pdp.decide(body));
      }
      reply(res, 404, { error: { code: "route_not_found", message: `no route ${req.method} ${url}` } });
    })().catch((err) => reply(res, 500, { error: { code: "internal_error", message: String(err) } }));
  });
  pdp.url = await listen(server);
  pdp.close = () => close(server);
  return pdp;
}

/** Receives what handlers report (hardening.notify's `notify_url`). */
export interface Observer {
  url: string;
  hits: Json[];
  close(): Promise<void>;
}

export async function startObserver(): Promise<Observer> {
  const observer = { hits: [] } as unknown as Observer;
  const server = createServer((req, res) => {
    void readBody(req).then((text) => {
      observer.hits.push(text ? JSON.parse(text) : {});
      reply(res, 200, {});
    });
  });
  observer.url = await listen(server);
  observer.close = () => close(server);
  return observer;
}

/** Sorts every array of strings inside a constraint envelope, so lists compare as sets. */
export function normalized(value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = value.map(normalized);
    return items.every((i) => typeof i === "string") ? [...(items as string[])].sort() : items;
  }
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalized(v)]));
  return value;
}

/** A composite no executor of ours serves: the tests drive it by hand through a stand-in composite executor. */
export const MANUAL = ref("hardening.manual");

/** One policy with an approval at each checkpoint: run.start of hardening.notify, node.run.create of demo.echo, node.run.execute of demo.sleep. */
export const APPROVAL_POLICY = `
@id("allow-the-rest")
permit(principal, action, resource);

@id("approve-notify-start")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"run.start", resource == NodeFabric::NodeType::"hardening.notify");

@id("approve-echo-create")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.create", resource == NodeFabric::NodeType::"demo.echo");

@id("approve-sleep-execute")
@require_approval("true")
permit(principal, action == NodeFabric::Action::"node.run.execute", resource == NodeFabric::NodeType::"demo.sleep");
`;

/** The hand-driven composite as the tests publish it; `extra` adds to (or replaces) its fields. */
export const manualType = (extra: Json = {}): Json => ({ ...MANUAL, kind: "composite", description: "A composite the test drives through the coordinator's API", ...extra });

/** Starts a peer and registers it as the one composite executor serving `nodeTypes` (by default the hand-driven composite). */
export async function startCompositePeer(h: HardeningFabric, executorId: string, nodeTypes: Json[] = [manualType()]): Promise<Peer> {
  const peer = await startPeer();
  await registerExecutor(h, executorId, peer.url, "composite", nodeTypes);
  return peer;
}

/** A run of a hand-driven composite, and calls made with the assignment token of a composite in it. */
export interface ManualRun {
  runId: string;
  rootId: string;
  /** The root's assignment token, as headers. */
  as: Record<string, string>;
  /** POST /v1/node-runs under the root. */
  create(specs: Json[]): Promise<JsonAnswer>;
  /** The same, checked to be 200; the NodeRuns created. */
  created(specs: Json[]): Promise<Json[]>;
  /** POST /v1/node-runs under any composite of the run, with that one's assignment token. */
  under(parentId: string, specs: Json[]): Promise<JsonAnswer>;
  /** The same, checked to be 200; the NodeRuns created. */
  createdUnder(parentId: string, specs: Json[]): Promise<Json[]>;
  /** POST :complete of the root. */
  complete(body: Json): Promise<JsonAnswer>;
}

/** Starts a run of `root` (served by `composite`), waits for its `:begin`, and returns what drives it by hand. */
export async function startManualRun(h: HardeningFabric, composite: Peer, root: Json = MANUAL, extra: Json = {}): Promise<ManualRun> {
  const r = await h.call("POST", `${h.gw}/v1/runs`, { root_node_type_ref: root, input: {}, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const runId = r.body.run_id as string;
  const rootId = r.body.root_node_run_id as string;
  const as = { authorization: `Bearer ${(await composite.beginOf(rootId)).assignment_token}` };
  const under = async (parentId: string, specs: Json[]) => {
    const begin = await composite.beginOf(parentId);
    return h.call("POST", `${h.coord}/v1/node-runs`, { run_id: runId, parent_node_run_id: parentId, node_runs: specs }, { authorization: `Bearer ${begin.assignment_token}` });
  };
  const createdUnder = async (parentId: string, specs: Json[]) => {
    const c = await under(parentId, specs);
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    return c.body.node_runs as Json[];
  };
  return {
    runId,
    rootId,
    as,
    create: (specs) => under(rootId, specs),
    created: (specs) => createdUnder(rootId, specs),
    under,
    createdUnder,
    complete: (body) => h.call("POST", `${h.coord}/v1/node-runs/${rootId}:complete`, body, as),
  };
}
