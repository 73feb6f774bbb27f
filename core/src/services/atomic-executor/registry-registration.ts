/**
 * Announces an executor to the Node Registry: publishes every node type it serves, then registers itself
 * (PUT /v1/executors/{id}). Runs in the background with backoff, because the registry may come up later; listening
 * never waits for it. Registering takes `executors:register`, a scope of the executors' own service tokens; the
 * endpoint registered is also the one the executor's auth accepts tokens bound to (bindExecutorEndpoint).
 *
 * Node types go in batches (`POST /v1/node-types:batch`, all or nothing on the registry's side), read from their
 * source batch by batch so a package of thousands of generated node types is never held whole. A node type the
 * registry refuses is reported and left out of the registration; the others still register. A registry without the
 * batch endpoint gets one POST /v1/node-types per node type.
 *
 * Once registered, the executor sends a heartbeat (POST /v1/executors/{id}:heartbeat) every `heartbeatMs`, or every
 * third of the registry's TTL when that is shorter, so the registry lists it only while it lives. A registry that
 * answers 404 has lost it (restarted empty, or pruned it after a long outage): it publishes and registers again. A
 * failing heartbeat is logged once per outage and retried at the same pace.
 */
import { hostname } from "node:os";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { NodeType } from "@nodefabric/schemas";
import { FabricError } from "../../http/errors.js";
import type { HealthCheck } from "../../http/service.js";
import { bindExecutorEndpoint } from "../../http/auth-plugin.js";
import { bearerHeaders, type ServiceTokens } from "../../clients/service-tokens.js";
import { RegistryClient, executorTtlOf, isBatchUnsupported, type ExecutorRegistration } from "../../clients/registry-client.js";
import { errorFromResponse } from "../../clients/http-client.js";
import { clock } from "../../clock.js";
import type { NodeTypeStream } from "./handler-loader.js";

/** Node types per batch, by default. */
export const DEFAULT_BATCH_SIZE = 200;
/** The largest batch body sent, by default: under the registry's default body limit (1 MiB) with room to spare. */
export const DEFAULT_BATCH_BYTES = 512 * 1024;
/** Time between heartbeats, by default (the registry's default TTL is 10 s). */
export const DEFAULT_HEARTBEAT_MS = 3_000;
/** The shortest time between heartbeats, whatever the registry's TTL. */
const MIN_HEARTBEAT_MS = 50;

export interface RegistrationOptions {
  registryUrl: string;
  /** The executor's tokens for the registry. */
  tokens?: ServiceTokens;
  kind: "atomic" | "composite";
  /** The node types to publish: an array, or a stream read as it is published (a set's NodeType files). */
  nodeTypes: readonly NodeType[] | NodeTypeStream;
  logger: FastifyBaseLogger;
  /** Node types per batch (default 200, at most 500) and the largest body of one batch in bytes (default 512 KiB). */
  batchSize?: number;
  batchBytes?: number;
  /** Stable id of this executor (default: `<kind>-<hostname>-<port>`). */
  executorInstanceId?: string;
  /** URL the coordinator reaches this executor at (default: derived from the listening address). */
  publicUrl?: string;
  /** First retry delay in ms (default 250), doubled up to `maxRetryDelayMs` (default 30 s). */
  initialRetryDelayMs?: number;
  maxRetryDelayMs?: number;
  /** Time between heartbeats once registered (default 3 s); a third of the registry's TTL when that is shorter. */
  heartbeatMs?: number;
}

type Phase = "idle" | "pending" | "registered" | "failed";

/** True for a refusal that repeating the same request cannot fix. */
function isPermanent(err: unknown): boolean {
  return FabricError.is(err) && err.statusCode >= 400 && err.statusCode < 500 && err.statusCode !== 408 && err.statusCode !== 429;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** How many node types `source` holds. */
function countOf(source: readonly NodeType[] | NodeTypeStream): number {
  return Array.isArray(source) ? source.length : (source as NodeTypeStream).count;
}

/** The indexes of a batch that a registry's refusal names: `/node_types/<i>/…` in a 400, `conflicts[].index` in a 409. */
function refusedIndexes(err: FabricError, size: number): Map<number, string> {
  const out = new Map<number, string>();
  const add = (i: number, why: string) => {
    if (Number.isInteger(i) && i >= 0 && i < size) out.set(i, out.has(i) ? `${out.get(i)}; ${why}` : why);
  };
  const details = err.details ?? {};
  if (err.code === "node_type_version_conflict" && Array.isArray(details.conflicts)) {
    for (const c of details.conflicts as Array<{ index?: unknown }>) add(Number(c.index), "published already with different content; publish a new version");
  } else if (Array.isArray(details.errors)) {
    for (const e of details.errors as Array<{ path?: unknown; message?: unknown }>) {
      const m = /^\/node_types\/(\d+)(\/.*)?$/.exec(String(e.path));
      if (m) add(Number(m[1]), `${m[2] ?? "/"} ${String(e.message)}`);
    }
  }
  return out;
}

/** One node type of a batch, with its size on the wire. */
interface Item {
  nodeType: NodeType;
  bytes: number;
}

/** The background registration of one executor, with its state for GET /v1/health. */
export class RegistryRegistration {
  private phase: Phase = "idle";
  private attempts = 0;
  private lastError?: string;
  /** Refusals by node type (`id@version`), so a batch sent again after a network error does not list one twice. */
  private readonly problems = new Map<string, string>();
  private readonly total: number;
  /** What the registry holds of ours, by `id@version` (a batch sent again after a network error adds nothing twice). */
  private readonly published = new Map<string, { node_type_id: string; version: string }>();
  private batchSupported = true;
  private readonly client: RegistryClient;
  private stopped = false;
  /** Aborts a request in flight when the executor closes, so closing never waits on a slow registry. */
  private readonly abort = new AbortController();
  private wake?: () => void;
  private loop?: Promise<void>;
  private executorInstanceId?: string;
  private endpoint?: string;
  /** The registry's executor TTL, as its last answer told it. */
  private registryTtlMs?: number;
  /** When heartbeats started failing (ms), and why; unset while they get through. */
  private heartbeatFailingSince?: number;
  private heartbeatError?: string;
  private heartbeats = 0;
  /** Resolves when the first registration ended, registered or not. */
  private first?: Promise<void>;
  private firstEnded?: () => void;

  constructor(private readonly options: RegistrationOptions) {
    this.client = new RegistryClient(options.registryUrl, { connections: 2, headersTimeoutMs: 30_000, headers: bearerHeaders(options.tokens, "node-registry") });
    this.total = countOf(options.nodeTypes);
  }

  /** Starts registering in the background, once the executor's address is known. */
  start(address: { host: string; port: number }): void {
    if (this.loop || this.stopped) return;
    const host = address.host === "0.0.0.0" || address.host === "::" ? "127.0.0.1" : address.host;
    this.endpoint = this.options.publicUrl ?? `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
    const safeHost = hostname().replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 100) || "localhost";
    this.executorInstanceId = this.options.executorInstanceId ?? `${this.options.kind}-${safeHost}-${address.port}`;
    this.phase = "pending";
    this.first = new Promise<void>((resolve) => (this.firstEnded = resolve));
    this.loop = this.run().finally(() => this.firstEnded?.());
  }

  /** The base URL this executor registers, once it listens. */
  get advertisedEndpoint(): string | undefined {
    return this.endpoint;
  }

  /** Resolves when the first registration ended, successfully or not (tests and the CLI); heartbeats go on. */
  async settled(): Promise<void> {
    await this.first;
  }

  /** The time between heartbeats now: `heartbeatMs`, or a third of the registry's TTL when shorter. */
  get heartbeatIntervalMs(): number {
    const configured = Math.max(MIN_HEARTBEAT_MS, this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS);
    return this.registryTtlMs === undefined ? configured : Math.max(MIN_HEARTBEAT_MS, Math.min(configured, Math.floor(this.registryTtlMs / 3)));
  }

  /** Stops retrying and closes the client. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.wake?.();
    await this.loop?.catch(() => undefined);
    await this.client.close().catch(() => undefined);
  }

  /** The `registry_registration` health check. */
  check(): HealthCheck {
    const details: Record<string, unknown> = {
      registry_url: this.options.registryUrl,
      node_types: this.total,
      published: this.published.size,
      attempts: this.attempts,
      heartbeats: this.heartbeats,
      heartbeat_ms: this.heartbeatIntervalMs,
    };
    if (this.executorInstanceId) details.executor_instance_id = this.executorInstanceId;
    if (this.endpoint) details.endpoint = this.endpoint;
    const problems = [...this.problems.values()];
    if (problems.length > 0) details.problems = problems;
    switch (this.phase) {
      case "registered":
        if (this.heartbeatFailingSince !== undefined) {
          details.heartbeat_failing_since = new Date(this.heartbeatFailingSince).toISOString();
          return {
            name: "registry_registration",
            status: "degraded",
            message: `registered, but heartbeats to ${this.options.registryUrl} fail (the registry stops listing this executor after its TTL): ${this.heartbeatError ?? "unknown error"}`,
            details,
          };
        }
        return problems.length === 0
          ? { name: "registry_registration", status: "ok", details }
          : {
              name: "registry_registration",
              status: "degraded",
              message: `registered, but the registry refused ${problems.length} node type(s), which are not registered: ${problems.slice(0, 10).join("; ")}${problems.length > 10 ? `; and ${problems.length - 10} more` : ""}`,
              details,
            };
      case "failed":
        return { name: "registry_registration", status: "degraded", message: `registration failed: ${this.lastError ?? "unknown error"}`, details };
      case "idle":
        return { name: "registry_registration", status: "degraded", message: "waiting for the executor to listen", details };
      default:
        return {
          name: "registry_registration",
          status: "degraded",
          message: this.lastError ? `registering with ${this.options.registryUrl}; last attempt failed: ${this.lastError}` : `registering with ${this.options.registryUrl}`,
          details,
        };
    }
  }

  private async sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      t.unref();
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
    this.wake = undefined;
  }

  /** Registers, then beats until stopped; registers again whenever the registry has lost this executor. */
  private async run(): Promise<void> {
    for (let pass = 0; !this.stopped; pass++) {
      if (pass > 0) {
        // What the registry held of ours is gone with the executor's entry (a registry restarted empty, say).
        this.published.clear();
        this.phase = "pending";
      }
      if (!(await this.register())) return;
      this.firstEnded?.();
      if (!(await this.beat())) return;
    }
  }

  /**
   * Sends heartbeats until stopped (false) or until the registry no longer holds this executor (true: register
   * again). Failures are logged when an outage starts and when it ends, not at every beat.
   */
  private async beat(): Promise<boolean> {
    const log = this.options.logger;
    while (!this.stopped) {
      await this.sleep(this.heartbeatIntervalMs);
      if (this.stopped) return false;
      try {
        const answer = await this.client.heartbeat(this.executorInstanceId!, { signal: this.abort.signal });
        if (answer.registered) {
          if (answer.ttlMs !== undefined) this.registryTtlMs = answer.ttlMs;
        } else if (answer.unsupported) {
          // A registry older than heartbeats: registering again is what keeps the entry fresh there.
          await this.putRegistration();
        } else {
          log.warn({ executor_instance_id: this.executorInstanceId, registry_url: this.options.registryUrl }, "the node registry no longer lists this executor; registering again");
          this.recovered();
          return true;
        }
        this.heartbeats++;
        this.recovered();
      } catch (err) {
        if (this.stopped) return false;
        this.heartbeatError = messageOf(err);
        if (this.heartbeatFailingSince === undefined) {
          this.heartbeatFailingSince = clock.now();
          log.warn(
            { executor_instance_id: this.executorInstanceId, registry_url: this.options.registryUrl, error: this.heartbeatError, retry_every_ms: this.heartbeatIntervalMs },
            "heartbeat to the node registry failed; retrying (logged once until it gets through)",
          );
        }
      }
    }
    return false;
  }

  /** Ends an outage of heartbeats, saying so once. */
  private recovered(): void {
    if (this.heartbeatFailingSince === undefined) return;
    this.options.logger.info(
      { executor_instance_id: this.executorInstanceId, failed_for_ms: clock.now() - this.heartbeatFailingSince },
      "heartbeats reach the node registry again",
    );
    this.heartbeatFailingSince = undefined;
    this.heartbeatError = undefined;
  }

  /** PUT /v1/executors/{id} with what the registry holds of ours; remembers the TTL its answer tells. */
  private async putRegistration(): Promise<void> {
    const registration: ExecutorRegistration = {
      endpoint: this.endpoint!,
      kind: this.options.kind,
      node_types: [...this.published.values()],
    };
    // Through `http` rather than registerExecutor(), to pass the abort signal and read the TTL header.
    const res = await this.client.http.request("PUT", `/v1/executors/${encodeURIComponent(this.executorInstanceId!)}`, registration, { signal: this.abort.signal });
    if (res.status < 200 || res.status >= 300) throw errorFromResponse(this.client.http.baseUrl, res.status, res.body, res.headers);
    const ttl = executorTtlOf(res.headers);
    if (ttl !== undefined) this.registryTtlMs = ttl;
  }

  /** One registration: publishes the node types, then registers; true once registered, false when refused or stopped. */
  private async register(): Promise<boolean> {
    const log = this.options.logger;
    const batchSize = Math.min(Math.max(1, this.options.batchSize ?? DEFAULT_BATCH_SIZE), 500);
    const batchBytes = Math.max(1, this.options.batchBytes ?? DEFAULT_BATCH_BYTES);
    // One pass over the source: a batch that fails to send is kept and sent again, never read again.
    const source = this.options.nodeTypes[Symbol.iterator]();
    let carry: Item | undefined;
    const nextBatch = (): Item[] => {
      const batch: Item[] = [];
      let bytes = 0;
      while (batch.length < batchSize) {
        let item = carry;
        carry = undefined;
        if (!item) {
          const next = source.next();
          if (next.done) break;
          item = { nodeType: next.value, bytes: Buffer.byteLength(JSON.stringify(next.value)) };
        }
        if (batch.length > 0 && bytes + item.bytes > batchBytes) {
          carry = item;
          break;
        }
        batch.push(item);
        bytes += item.bytes;
      }
      return batch;
    };
    const started = performance.now();
    let pending: Item[] = [];
    let done = 0;
    let delay = this.options.initialRetryDelayMs ?? 250;
    const maxDelay = this.options.maxRetryDelayMs ?? 30_000;
    while (!this.stopped) {
      this.attempts++;
      try {
        for (;;) {
          if (pending.length === 0) pending = nextBatch();
          if (pending.length === 0) break;
          await this.publishBatch(pending);
          done += pending.length;
          pending = [];
          if (this.total > batchSize) {
            log.info({ published: this.published.size, done, node_types: this.total }, `published ${done.toLocaleString("en-US")} of ${this.total.toLocaleString("en-US")} node types`);
          }
        }
        await this.putRegistration();
        this.phase = "registered";
        this.lastError = undefined;
        log.info(
          { executor_instance_id: this.executorInstanceId, endpoint: this.endpoint, node_types: this.published.size, refused: this.problems.size, ms: Math.round(performance.now() - started) },
          "registered with the node registry",
        );
        return true;
      } catch (err) {
        if (this.stopped) return false;
        this.lastError = messageOf(err);
        if (isPermanent(err)) {
          this.phase = "failed";
          log.error({ err, executor_instance_id: this.executorInstanceId }, "the node registry refused this executor's registration");
          return false;
        }
        log.warn({ attempt: this.attempts, retry_in_ms: delay, error: this.lastError }, "node registry not reachable yet; will retry");
        await this.sleep(delay * (0.8 + Math.random() * 0.4));
        delay = Math.min(delay * 2, maxDelay);
      }
    }
    return false;
  }

  /** Records that the registry refused a node type: reported, and left out of the registration. */
  private refuse(nt: NodeType, code: string, why: string): void {
    const name = `${nt.node_type_id}@${nt.version}`;
    // A version conflict means different content was published under this version: someone must bump it.
    const problem = `${name}: ${code}: ${why}`;
    if (this.problems.has(name)) return;
    this.problems.set(name, problem);
    this.options.logger.error({ node_type_id: nt.node_type_id, version: nt.version, code }, `the registry refused node type ${problem}`);
  }

  /**
   * Publishes one batch: whole when the registry takes it, else without the node types it refuses (each reported),
   * halved when it is too large, one by one on a registry without the batch endpoint. Throws what must be retried or
   * stops the registration (a network error, 401, 403).
   */
  private async publishBatch(batch: Item[]): Promise<void> {
    if (batch.length === 0) return;
    if (!this.batchSupported) return this.publishOneByOne(batch);
    try {
      await this.client.http.json("POST", "/v1/node-types:batch", { node_types: batch.map((i) => i.nodeType) }, { signal: this.abort.signal });
    } catch (err) {
      if (!FabricError.is(err) || !isPermanent(err) || err.statusCode === 401 || err.statusCode === 403) throw err;
      if (isBatchUnsupported(err)) {
        this.batchSupported = false;
        this.options.logger.info({ registry_url: this.options.registryUrl }, "the node registry has no POST /v1/node-types:batch; publishing node types one by one");
        return this.publishOneByOne(batch);
      }
      if (err.statusCode === 413) {
        if (batch.length === 1) return this.refuse(batch[0]!.nodeType, err.code, messageOf(err));
        const half = Math.ceil(batch.length / 2);
        await this.publishBatch(batch.slice(0, half));
        return this.publishBatch(batch.slice(half));
      }
      const refused = refusedIndexes(err, batch.length);
      // A refusal that names no node type of the batch: find the ones at fault by sending each alone.
      if (refused.size === 0) return this.publishOneByOne(batch);
      for (const [i, why] of refused) this.refuse(batch[i]!.nodeType, err.code, why);
      return this.publishBatch(batch.filter((_, i) => !refused.has(i)));
    }
    for (const { nodeType } of batch) this.markPublished(nodeType);
  }

  private async publishOneByOne(batch: Item[]): Promise<void> {
    for (const { nodeType } of batch) {
      try {
        await this.client.http.json("POST", "/v1/node-types", { node_type: nodeType }, { signal: this.abort.signal });
      } catch (err) {
        if (!isPermanent(err) || (err as FabricError).statusCode === 401 || (err as FabricError).statusCode === 403) throw err;
        this.refuse(nodeType, (err as FabricError).code, messageOf(err));
        continue;
      }
      this.markPublished(nodeType);
    }
  }

  private markPublished(nt: NodeType): void {
    this.published.set(`${nt.node_type_id}@${nt.version}`, { node_type_id: nt.node_type_id, version: nt.version });
  }
}

/** Creates the registration of an executor's node types and starts it once `app` listens (its address is known then). */
export function registerOnListen(app: FastifyInstance, options: Omit<RegistrationOptions, "logger">): RegistryRegistration {
  const registration = new RegistryRegistration({ ...options, logger: app.log });
  app.addHook("onListen", async () => {
    const addr = app.server.address();
    if (typeof addr === "object" && addr) registration.start({ host: addr.address, port: addr.port });
    // The coordinator calls this executor at the endpoint it registers, with tokens bound to that endpoint.
    if (registration.advertisedEndpoint) bindExecutorEndpoint(app, registration.advertisedEndpoint);
  });
  return registration;
}
