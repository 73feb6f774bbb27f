/**
 * The fault suite's harness (issue 32, docs/deploy.md "Guarantees under faults"): a throwaway PostgreSQL cluster that a
 * test may stop and restart, two built `fabric dev --store postgres://…` processes on it (the scale-out deployment of
 * docs/deploy.md), a recording upstream on loopback reached through an `http.request` node type, a load driver that
 * starts runs as a client would, and the invariants every fault must keep.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { request } from "undici";
import { freePortBase, startFabricProcess, type FabricProcess } from "../fabric-cli.js";
import { call, eventually, readNdjson } from "../../run-client.js";

export const repo = fileURLToPath(new URL("../../..", import.meta.url));
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
export const TERMINAL = new Set(["completed", "failed", "canceled"]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A port for the cluster below the ephemeral range (fabric-cli.ts): it restarts on it, and nothing else may take it meanwhile. */
function freePort(): Promise<number> {
  return freePortBase();
}

// ---------------------------------------------------------------------------------------------------------------------
// A throwaway PostgreSQL cluster.

/** The newest server installed under /usr/lib/postgresql (Debian's layout). */
function pgBin(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(path.join(root, v, "bin", "initdb"))) : [];
  if (versions.length === 0) throw new Error("no PostgreSQL server binaries under /usr/lib/postgresql/<version>/bin");
  versions.sort((a, b) => Number(b) - Number(a));
  return path.join(root, versions[0], "bin");
}

/**
 * A PostgreSQL cluster of its own in a temporary folder, on a free loopback port with trust authentication. initdb and
 * pg_ctl refuse to run as root, so under root they run as the `postgres` OS user, which owns the folder.
 */
export class ThrowawayCluster {
  readonly dir: string;
  readonly port: number;
  private readonly bin = pgBin();

  private constructor(dir: string, port: number) {
    this.dir = dir;
    this.port = port;
  }

  static async create(): Promise<ThrowawayCluster> {
    const dir = mkdtempSync(path.join(os.tmpdir(), "nf-faults-pg-"));
    const c = new ThrowawayCluster(dir, await freePort());
    if (process.getuid?.() === 0) {
      const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
      const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
      chownSync(dir, uid, gid);
    }
    c.run("initdb", ["-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]);
    c.start();
    return c;
  }

  get data(): string {
    return path.join(this.dir, "data");
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private run(tool: string, args: string[]): string {
    const exe = path.join(this.bin, tool);
    const [cmd, argv] = process.getuid?.() === 0 ? ["runuser", ["-u", "postgres", "--", exe, ...args]] : [exe, args];
    const r = spawnSync(cmd, argv, { encoding: "utf8", timeout: 120_000 });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(" ")} failed (${r.status}): ${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /** Starts the server on its port (again, after a stop) and waits until it accepts connections. */
  start(): void {
    const opts = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
    this.run("pg_ctl", ["-D", this.data, "-l", path.join(this.dir, "server.log"), "-w", "-t", "120", "-o", opts, "start"]);
  }

  /** `pg_ctl stop -m immediate`: every backend is killed at once, as in a crash of the server. */
  stopImmediate(): void {
    this.run("pg_ctl", ["-D", this.data, "-m", "immediate", "-w", "stop"]);
  }

  async query<R extends pg.QueryResultRow = Json>(sql: string, params: unknown[] = []): Promise<R[]> {
    const client = new pg.Client({ connectionString: this.url });
    await client.connect();
    try {
      return (await client.query<R>(sql, params)).rows;
    } finally {
      await client.end();
    }
  }

  /** Stops the server and removes its folder. */
  remove(): void {
    try {
      this.run("pg_ctl", ["-D", this.data, "-m", "immediate", "-w", "stop"]);
    } catch {
      // already stopped
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The recording upstream.

/** An HTTP server on loopback that counts the calls per key (`POST /call/<key>?ms=N`, answered after N ms). */
export class RecordingUpstream {
  readonly calls = new Map<string, number>();
  private server!: http.Server;
  url = "";

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const u = new URL(req.url ?? "/", "http://upstream");
      const m = /^\/call\/([^/]+)$/.exec(u.pathname);
      if (!m) {
        res.writeHead(404).end();
        return;
      }
      const key = decodeURIComponent(m[1]);
      const n = (this.calls.get(key) ?? 0) + 1;
      this.calls.set(key, n);
      req.resume();
      const ms = Number(u.searchParams.get("ms") ?? 0);
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ key, n }));
      }, ms);
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/** The node type the load runs: one `http.request` call of the recording upstream per execution. */
export const UPSTREAM_REF = { node_type_id: "faults.upstream", version: "1.0.0" };
export function upstreamNodeType(upstreamUrl: string): Json {
  return {
    ...UPSTREAM_REF,
    kind: "atomic",
    description: "Calls the fault suite's recording upstream once per execution",
    input_schema: {
      type: "object",
      required: ["key", "ms"],
      properties: { key: { type: "string" }, ms: { type: "integer", minimum: 0, maximum: 10000 } },
      additionalProperties: false,
    },
    output_schema: { type: "object", required: ["key"], properties: { key: { type: "string" } } },
    constraints: { gates: { side_effect_class: "read" } },
    extensions: {
      // Bounds one attempt (docs/runs.md): an attempt whose answer never comes is tried again after seconds, not 30 s.
      "nodefabric.timeout_ms": 5000,
      "nodefabric.implementation": { node_type_id: "http.request", version: "1.0.0" },
      "nodefabric.http": {
        base_url: upstreamUrl,
        method: "POST",
        path: "/call/{key}",
        query: { ms: "{ms}" },
        response: "{ 'key': body.key }",
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Two fabrics on the cluster.

/**
 * The `fabric` command under test: this workspace's build, or FABRIC_FAULTS_CLI (the core/dist/cli/main.js of another
 * build, such as an older commit's, to see the suite fail where that build breaks a guarantee).
 */
const FAULTS_CLI = process.env.FABRIC_FAULTS_CLI || undefined;

/** Coordinator run lease of the suite's fabrics (FABRIC_COORDINATOR_RUN_LEASE_MS): short, so takeovers are quick. */
export const RUN_LEASE_MS = 1500;

export interface Fabric {
  name: string;
  base: number;
  dataDir: string;
  proc: FabricProcess;
  /** Every process this fabric has been, oldest first (a restart adds one). */
  history: FabricProcess[];
  gateway: string;
  coordinator: string;
  registry: string;
}

/** Two `fabric dev --store postgres://…` processes on one database: two nodes of one fabric. */
export class TwoFabrics {
  readonly fabrics: Fabric[] = [];
  /** Processes the test ended on purpose: not counted as exits. */
  readonly killedOnPurpose = new Set<FabricProcess>();

  constructor(
    readonly cluster: ThrowawayCluster,
    readonly upstream: RecordingUpstream,
  ) {}

  private env(): NodeJS.ProcessEnv {
    return {
      FABRIC_COORDINATOR_RUN_LEASE_MS: String(RUN_LEASE_MS),
      FABRIC_REGISTRY_EXECUTOR_TTL_MS: "3000",
      // The recording upstream is on loopback, which the executor's egress policy refuses unless allowed.
      FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
      FABRIC_LOG_LEVEL: "info",
      FABRIC_LOG_FORMAT: "json",
    };
  }

  private async spawn(base: number, dataDir: string): Promise<FabricProcess> {
    const args = ["dev", "--store", this.cluster.url, "--port-base", String(base), "--data-dir", dataDir];
    return startFabricProcess(args, { cwd: repo, env: this.env(), cli: FAULTS_CLI });
  }

  /**
   * Restarts, as a supervisor (systemd, Kubernetes) would, any fabric process that exits by itself, so a test whose
   * fault crashed a process still checks what the durable part kept. The exit stays recorded (`unexpectedExits`).
   */
  private supervise(f: Fabric, p: FabricProcess): void {
    p.child.once("exit", () => {
      if (this.stopping || this.killedOnPurpose.has(p) || f.proc !== p) return;
      setTimeout(() => {
        if (this.stopping || f.proc !== p) return;
        this.restart(f).catch(() => undefined);
      }, 1_000);
    });
  }
  private stopping = false;

  async up(): Promise<void> {
    const start = async (name: string): Promise<Fabric> => {
      const base = await freePortBase();
      const dataDir = mkdtempSync(path.join(os.tmpdir(), `nf-faults-${name}-`));
      const proc = await this.spawn(base, dataDir);
      const f: Fabric = { name, base, dataDir, proc, history: [proc], gateway: proc.urls["run-gateway"], coordinator: proc.urls["run-coordinator"], registry: proc.urls["node-registry"] };
      this.supervise(f, proc);
      return f;
    };
    // One first, so the migrations are applied once; then the second.
    this.fabrics.push(await start("one"));
    this.fabrics.push(await start("two"));
    const published = await call("POST", `${this.fabrics[0].registry}/v1/node-types`, { node_type: upstreamNodeType(this.upstream.url) });
    if (published.status !== 200) throw new Error(`publishing the upstream node type: ${published.status} ${JSON.stringify(published.body)}`);
    // A first run through each gateway, so both are warm before any fault.
    for (const f of this.fabrics) {
      const r = await call("POST", `${f.gateway}/v1/runs`, { root_node_type_ref: UPSTREAM_REF, input: { key: `warm_${f.name}`, ms: 0 } }, { prefer: "wait=20" });
      if (r.body?.state !== "completed") throw new Error(`warm-up run on ${f.name}: ${r.status} ${JSON.stringify(r.body)}`);
    }
  }

  get gateways(): string[] {
    return this.fabrics.map((f) => f.gateway);
  }

  /** Starts a fabric again on its port range and data folder (after a kill, or after it exited by itself). */
  async restart(f: Fabric): Promise<void> {
    if (f.proc.child.exitCode === null && f.proc.child.signalCode === null) throw new Error(`${f.name} is still running`);
    // The ports of a killed process are free at once; a retry covers a slow release.
    if (this.restarting.has(f)) return this.restarting.get(f);
    const p = (async () => {
      const proc = await eventually(async () => this.spawn(f.base, f.dataDir), 60_000, `${f.name} restarted`);
      f.proc = proc;
      f.history.push(proc);
      this.supervise(f, proc);
    })().finally(() => this.restarting.delete(f));
    this.restarting.set(f, p);
    return p;
  }
  private readonly restarting = new Map<Fabric, Promise<void>>();

  /** Kills a fabric with SIGKILL, as the test's own fault (not counted as an exit, not restarted by the supervisor). */
  async kill(f: Fabric): Promise<void> {
    this.killedOnPurpose.add(f.proc);
    await f.proc.stop("SIGKILL");
  }

  /** Restarts any fabric whose process ended, so each test starts from two running fabrics. */
  async ensureUp(): Promise<void> {
    for (const f of this.fabrics) {
      if (this.restarting.has(f)) await this.restarting.get(f);
      if (f.proc.child.exitCode !== null || f.proc.child.signalCode !== null) await this.restart(f);
    }
  }

  /** Processes that ended although the test did not end them: "fabric one exited with 1: <last output>". */
  unexpectedExits(): string[] {
    const out: string[] = [];
    for (const f of this.fabrics)
      for (const p of f.history) {
        if (this.killedOnPurpose.has(p)) continue;
        if (p.child.exitCode !== null || p.child.signalCode !== null)
          out.push(`fabric ${f.name} (pid ${p.child.pid}) exited with ${p.child.exitCode ?? p.child.signalCode}: ${p.output().slice(-1500)}`);
      }
    return out;
  }

  /** Stops every process, and keeps what each printed (JSON log lines) in a folder it names, to read after a failure. */
  async down(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.restarting.values()].map((p) => p.catch(() => undefined)));
    const logs = mkdtempSync(path.join(os.tmpdir(), "nf-faults-logs-"));
    for (const f of this.fabrics)
      for (const [i, p] of f.history.entries()) {
        p.child.kill("SIGCONT");
        this.killedOnPurpose.add(p);
        await p.stop("SIGKILL");
        writeFileSync(path.join(logs, `${f.name}-${i}.log`), p.output());
      }
    for (const f of this.fabrics) rmSync(f.dataDir, { recursive: true, force: true });
    console.log(`[faults] the fabrics' logs are in ${logs}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The load driver.

export interface Answer {
  run_id: string;
  gateway: string;
  /** HTTP status, or 0 for a transport failure (refused, reset, timed out). */
  status: number;
  /** The ErrorEnvelope's code, or the transport error's code. */
  code?: string;
  retryAfter?: string;
  envelope: boolean;
  at: number;
}

export interface Ack {
  run_id: string;
  gateway: string;
  root_node_run_id: string;
}

export interface StartResult {
  acks: Ack[];
  answers: Answer[];
}

/** Sends one POST /v1/runs and records the answer. A transport failure is status 0. */
async function postStart(gateway: string, spec: Json, timeoutMs: number): Promise<{ answer: Answer; body?: Json }> {
  const at = Date.now();
  try {
    const res = await request(`${gateway}/v1/runs`, {
      method: "POST",
      body: JSON.stringify(spec),
      headers: { "content-type": "application/json" },
      // A new connection per request: no kept-alive socket that the server closed in between is mistaken for a reset.
      reset: true,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await res.body.text();
    let body: Json | undefined;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    const envelope = typeof body?.error?.code === "string" && typeof body?.error?.message === "string";
    const ra = res.headers["retry-after"];
    return {
      answer: { run_id: spec.run_id, gateway, status: res.statusCode, code: envelope ? body!.error.code : undefined, retryAfter: Array.isArray(ra) ? ra[0] : ra, envelope, at },
      body,
    };
  } catch (err) {
    const e = err as { code?: string; cause?: { code?: string }; name?: string };
    return { answer: { run_id: spec.run_id, gateway, status: 0, code: e.code ?? e.cause?.code ?? e.name, envelope: false, at } };
  }
}

/** The body every start of `runId` sends (the same each time, so a repeat is the same request). */
export function startSpec(runId: string, ms: number): Json {
  return { run_id: runId, root_node_type_ref: UPSTREAM_REF, input: { key: runId, ms } };
}

/**
 * Starts `runId` as a client would: on a 503 it waits as Retry-After says and tries again; on a transport failure (no
 * answer within `timeoutMs` included) it tries the other gateway after a short pause (a load balancer's retry); it
 * gives up on any other answer, or after `deadlineMs`. Every answer is recorded.
 */
export async function startLikeAClient(
  gateways: () => string[],
  first: number,
  runId: string,
  ms: number,
  out: StartResult,
  options: { deadlineMs?: number; timeoutMs?: number } = {},
): Promise<void> {
  const spec = startSpec(runId, ms);
  const end = Date.now() + (options.deadlineMs ?? 60_000);
  for (let i = first; Date.now() < end; i++) {
    const gws = gateways();
    const gateway = gws[i % gws.length];
    const { answer, body } = await postStart(gateway, spec, options.timeoutMs ?? CLIENT_TIMEOUT_MS);
    out.answers.push(answer);
    if (answer.status >= 200 && answer.status < 300) {
      out.acks.push({ run_id: runId, gateway, root_node_run_id: body?.root_node_run_id });
      return;
    }
    if (answer.status === 503) {
      const secs = Number(answer.retryAfter);
      await sleep(Number.isFinite(secs) && secs >= 0 ? Math.min(secs, 10) * 1000 : 1000);
      i--; // the same gateway again, as Retry-After asks
    } else if (answer.status === 0 || answer.status === 429) {
      await sleep(200);
    } else {
      return; // any other answer is final for this client
    }
  }
}

/** How long a client waits for an answer before it gives up on a try (and tries the other gateway). */
export const CLIENT_TIMEOUT_MS = 10_000;

/** A load of runs with client-chosen ids `<prefix>_<n>`, started on the gateways alternately by `workers` clients. */
export class Load {
  readonly result: StartResult = { acks: [], answers: [] };
  readonly attempted: string[] = [];
  private stopped = false;
  private done?: Promise<void>;
  private next = 0;

  constructor(
    private readonly gateways: () => string[],
    private readonly prefix: string,
    private readonly options: { workers: number; ms: number; pauseMs: number; timeoutMs?: number },
  ) {}

  /** Starts one more run, `<prefix>_<name>`, through `gateway` only, with an upstream call of `ms`; resolves once answered. */
  async startThrough(gateway: string, name: string, ms: number): Promise<void> {
    const runId = `${this.prefix}_${name}`;
    this.attempted.push(runId);
    await startLikeAClient(() => [gateway], 0, runId, ms, this.result, { deadlineMs: 30_000, timeoutMs: this.options.timeoutMs });
  }

  start(): this {
    this.done = Promise.all(
      Array.from({ length: this.options.workers }, async () => {
        while (!this.stopped) {
          const n = this.next++;
          const runId = `${this.prefix}_${n}`;
          this.attempted.push(runId);
          await startLikeAClient(this.gateways, n, runId, this.options.ms, this.result, { timeoutMs: this.options.timeoutMs });
          await sleep(this.options.pauseMs);
        }
      }),
    ).then(() => undefined);
    return this;
  }

  /** Stops starting new runs; resolves once every start under way has its final answer. */
  async stop(): Promise<StartResult> {
    this.stopped = true;
    await this.done;
    return this.result;
  }
}

/** "503×12 200×80 0:ECONNREFUSED×3": the answers seen, by status (and code for failures). */
export function tally(answers: Answer[]): Record<string, number> {
  const t: Record<string, number> = {};
  for (const a of answers) {
    const k = a.status >= 200 && a.status < 300 ? String(a.status) : `${a.status}:${a.code ?? "?"}`;
    t[k] = (t[k] ?? 0) + 1;
  }
  return t;
}

/** Each list cut to its first 10 entries and a count of the rest, so a failure names them without flooding the report. */
export function capped<T extends Record<string, unknown[]>>(lists: T): Record<keyof T, string[]> {
  const out = {} as Record<keyof T, string[]>;
  for (const [k, list] of Object.entries(lists) as Array<[keyof T, unknown[]]>) {
    const shown = list.slice(0, 10).map((x) => (typeof x === "string" ? x : JSON.stringify(x)));
    out[k] = list.length > 10 ? [...shown, `… and ${list.length - 10} more`] : shown;
  }
  return out;
}

/** "503 unavailable for run_x via http://…": an answer in one line. */
export function line(a: Answer): string {
  return `${a.status} ${a.code ?? ""}${a.retryAfter === undefined ? "" : ` (Retry-After ${a.retryAfter})`}${a.envelope ? "" : " without an ErrorEnvelope"} for ${a.run_id} via ${a.gateway}`;
}

/** Answers that break the contract during an outage: a 500, a non-2xx without an ErrorEnvelope, a 503 without Retry-After. */
export function badAnswers(answers: Answer[]): Answer[] {
  return answers.filter(
    (a) => a.status >= 500 && (a.status === 500 || !a.envelope || (a.status === 503 && a.retryAfter === undefined)) || (a.status >= 400 && !a.envelope),
  );
}

// ---------------------------------------------------------------------------------------------------------------------
// The invariants.

export interface Violations {
  lost: string[];
  unended: string[];
  twoRoots: string[];
  rootMismatch: string[];
  twoStarts: string[];
  twoEndings: string[];
  changedAfterEnd: string[];
  seqGaps: string[];
  timeBack: string[];
  upstream: string[];
  exits: string[];
}

export interface Summary {
  acked: number;
  runs: number;
  states: Record<string, number>;
  upstreamCalls: number;
  externalCalls: number;
  endedInMs: number;
  /** The run whose events span the longest time, with its events ("time type"). */
  slowest?: { run_id: string; ms: number; events: string[] };
}

/**
 * What must hold after any fault (docs/deploy.md, "Guarantees under faults"), over the runs `attempted` (client-chosen
 * ids, acknowledged or not) and the acknowledgements `acks`:
 * - every acknowledged run exists (none lost) and ends within `deadlineMs`;
 * - every run that exists has one root: one `run_started` event, one root NodeRun in the store and in
 *   GET /v1/runs/{id}/node-runs, and every acknowledgement and both gateways name that root;
 * - one ending: one `run_completed`, the last event, whose state is the run's, and neither changes afterwards;
 * - events gapless (seq 0..n-1) with times that never go back;
 * - the recording upstream was called at least once for a completed run, and never more often than the run's
 *   `nodefabric.usage.external_calls` (every attempt sent to an executor, docs/runs.md "Budgets").
 * - no fabric process exited that the test did not end.
 */
export async function checkInvariants(fabrics: TwoFabrics, attempted: string[], acks: Ack[], deadlineMs = 90_000): Promise<{ violations: Violations; summary: Summary }> {
  const v: Violations = { lost: [], unended: [], twoRoots: [], rootMismatch: [], twoStarts: [], twoEndings: [], changedAfterEnd: [], seqGaps: [], timeBack: [], upstream: [], exits: [] };
  const [g1, g2] = fabrics.gateways;
  const ackedIds = [...new Set(acks.map((a) => a.run_id))];
  const ids = [...new Set([...attempted, ...ackedIds])];
  const t0 = Date.now();

  // Every acknowledged run ends; a 404 for one is a lost run.
  const runs = new Map<string, Json>();
  const end = t0 + deadlineMs;
  let pending = ackedIds;
  while (pending.length > 0) {
    const answers = await Promise.all(pending.map(async (id) => [id, await call("GET", `${g1}/v1/runs/${id}`).catch(() => undefined)] as const));
    const still: string[] = [];
    for (const [id, r] of answers) {
      if (r?.status === 200 && TERMINAL.has(r.body.state)) runs.set(id, r.body);
      else still.push(id);
    }
    pending = still;
    if (pending.length === 0 || Date.now() > end) break;
    await sleep(500);
  }
  const endedInMs = Date.now() - t0;
  for (const id of pending) {
    const r = await call("GET", `${g1}/v1/runs/${id}`).catch((e) => ({ status: 0, body: String(e) }));
    if (r.status === 404) v.lost.push(id);
    else v.unended.push(`${id}: ${r.status} ${r.body?.state ?? JSON.stringify(r.body)}`);
  }
  // Runs started but not acknowledged (the client gave up) may exist: they must keep the same invariants.
  for (const id of ids) {
    if (runs.has(id) || pending.includes(id)) continue;
    const r = await call("GET", `${g1}/v1/runs/${id}`);
    if (r.status === 200) runs.set(id, r.body);
  }
  // Wait for the unacknowledged ones that exist to end as well, within what is left of the deadline.
  for (const [id, run] of runs) {
    if (TERMINAL.has(run.state)) continue;
    const ended = await eventually(async () => {
      const r = await call("GET", `${g1}/v1/runs/${id}`);
      return TERMINAL.has(r.body?.state) ? r.body : undefined;
    }, Math.max(1_000, end - Date.now()), `${id} ended`).catch(() => undefined);
    if (ended) runs.set(id, ended);
    else v.unended.push(`${id} (not acknowledged): ${run.state}`);
  }

  // One root per run, in the store.
  const roots = await fabrics.cluster.query<{ run_id: string; n: string; roots: string[] }>(
    "SELECT run_id, count(*) AS n, array_agg(node_run_id) AS roots FROM node_runs WHERE run_id = ANY($1) AND parent_node_run_id IS NULL GROUP BY run_id",
    [[...runs.keys()]],
  );
  const storeRoots = new Map(roots.map((r) => [r.run_id, r.roots]));
  const firstPass = new Map<string, { run: Json; events: number }>();
  let upstreamCalls = 0;
  let externalCalls = 0;
  const states: Record<string, number> = {};
  let slowest: Summary["slowest"];
  for (const [id, run] of runs) {
    states[run.state] = (states[run.state] ?? 0) + 1;
    const root = run.root_node_run_id as string;
    const inStore = storeRoots.get(id) ?? [];
    if (inStore.length !== 1 || inStore[0] !== root) v.twoRoots.push(`${id}: root ${root}, roots in the store ${JSON.stringify(inStore)}`);
    const nrs = await call("GET", `${g2}/v1/runs/${id}/node-runs`);
    const apiRoots = (nrs.body ?? []).filter((n: Json) => !n.parent_node_run_id).map((n: Json) => n.node_run_id);
    if (apiRoots.length !== 1 || apiRoots[0] !== root) v.twoRoots.push(`${id}: root ${root}, roots listed ${JSON.stringify(apiRoots)}`);
    const other = await call("GET", `${g2}/v1/runs/${id}`);
    const named = new Set([root, other.body?.root_node_run_id, ...acks.filter((a) => a.run_id === id).map((a) => a.root_node_run_id)]);
    if (named.size !== 1) v.rootMismatch.push(`${id}: ${JSON.stringify([...named])}`);

    const ev = await readNdjson(`${g2}/v1/runs/${id}/events?follow=false`);
    const lines = ev.lines as Json[];
    if (ev.status !== 200) v.seqGaps.push(`${id}: events answered ${ev.status}`);
    const seqs = lines.map((e) => e.seq);
    if (seqs.some((s, i) => s !== i)) v.seqGaps.push(`${id}: ${JSON.stringify(seqs)}`);
    for (let i = 1; i < lines.length; i++)
      if (Date.parse(lines[i].time) < Date.parse(lines[i - 1].time)) {
        v.timeBack.push(`${id}: seq ${lines[i].seq} (${lines[i].type}) at ${lines[i].time} after ${lines[i - 1].time}`);
        break;
      }
    const starts = lines.filter((e) => e.type === "run_started").length;
    if (starts !== 1) v.twoStarts.push(`${id}: ${starts} run_started`);
    const endings = lines.filter((e) => e.type === "run_completed");
    if (endings.length !== 1 || lines.at(-1)?.type !== "run_completed" || endings[0].data?.state !== run.state)
      v.twoEndings.push(`${id}: ${endings.length} run_completed (${endings.map((e) => e.data?.state).join(",")}), last ${lines.at(-1)?.type}, run ${run.state}`);
    firstPass.set(id, { run, events: lines.length });
    const took = lines.length > 0 ? Date.parse(lines.at(-1)!.time) - Date.parse(lines[0].time) : 0;
    if (!slowest || took > slowest.ms) slowest = { run_id: id, ms: took, events: lines.map((e) => `${e.time.slice(11, 23)} ${e.type}${e.data?.reason ? `(${e.data.reason})` : ""}${e.data?.error?.code ? `(${e.data.error.code})` : ""}`) };

    const calls = fabrics.upstream.calls.get(id) ?? 0;
    const external = Number(run.extensions?.["nodefabric.usage"]?.external_calls ?? 0);
    upstreamCalls += calls;
    externalCalls += external;
    if ((run.state === "completed" && calls < 1) || calls > external) v.upstream.push(`${id}: ${run.state}, upstream called ${calls} times, external_calls ${external}`);
    if (run.state === "completed" && run.extensions?.["nodefabric.outputs"]?.key !== id) v.upstream.push(`${id}: outputs ${JSON.stringify(run.extensions?.["nodefabric.outputs"])}`);
  }

  // Nothing changes after the end: a lease later, the runs and their event counts are as they were.
  await sleep(RUN_LEASE_MS * 2);
  for (const [id, first] of firstPass) {
    const again = await call("GET", `${g1}/v1/runs/${id}`);
    const ev = await readNdjson(`${g1}/v1/runs/${id}/events?follow=false`);
    if (JSON.stringify(again.body) !== JSON.stringify(first.run) || ev.lines.length !== first.events)
      v.changedAfterEnd.push(`${id}: ${first.run.state} → ${again.body?.state}, events ${first.events} → ${ev.lines.length}`);
  }
  v.exits = fabrics.unexpectedExits();
  return { violations: v, summary: { acked: ackedIds.length, runs: runs.size, states, upstreamCalls, externalCalls, endedInMs, slowest } };
}

/** The empty Violations, for `expect(violations).toEqual(NONE)` (every list named when it is not empty). */
export const NONE: Violations = { lost: [], unended: [], twoRoots: [], rootMismatch: [], twoStarts: [], twoEndings: [], changedAfterEnd: [], seqGaps: [], timeBack: [], upstream: [], exits: [] };

/** Polls GET /v1/health of `url` every 250 ms until `stop()`; the answers, with the checks that were not ok. */
export function watchHealth(url: string): { stop: () => Promise<Array<{ status: number; health?: string; down: string[] }>> } {
  const seen: Array<{ status: number; health?: string; down: string[] }> = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const at = Date.now();
      try {
        const r = await request(`${url}/v1/health`, { reset: true, headersTimeout: 5_000, bodyTimeout: 5_000 });
        const body = (await r.body.json().catch(() => undefined)) as Json | undefined;
        // A service that is down answers 503 with an ErrorEnvelope whose details.health is the Health.
        const h = r.statusCode === 200 ? body : body?.error?.details?.health;
        seen.push({ status: r.statusCode, health: h?.status, down: (h?.checks ?? []).filter((c: Json) => c.status !== "ok").map((c: Json) => `${c.name}:${c.status}`) });
      } catch (err) {
        seen.push({ status: 0, down: [String((err as { code?: string }).code ?? err)] });
      }
      await sleep(Math.max(0, 250 - (Date.now() - at)));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return seen;
    },
  };
}
