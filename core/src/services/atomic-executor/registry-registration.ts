/**
 * Announces an executor to the Node Registry: publishes every node type it serves (POST /v1/node-types), then registers
 * itself (PUT /v1/executors/{id}). Runs in the background with backoff, because the registry may come up later;
 * listening never waits for it. Registering takes `executors:register`, a scope of the executors' own service tokens;
 * the endpoint registered is also the one the executor's auth accepts tokens bound to (bindExecutorEndpoint).
 */
import { hostname } from "node:os";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { NodeType } from "@nodefabric/schemas";
import { FabricError } from "../../http/errors.js";
import type { HealthCheck } from "../../http/service.js";
import { bindExecutorEndpoint } from "../../http/auth-plugin.js";
import { bearerHeaders, type ServiceTokens } from "../../clients/service-tokens.js";
import { RegistryClient, type ExecutorRegistration } from "../../clients/registry-client.js";

export interface RegistrationOptions {
  registryUrl: string;
  /** The executor's tokens for the registry. */
  tokens?: ServiceTokens;
  kind: "atomic" | "composite";
  nodeTypes: NodeType[];
  logger: FastifyBaseLogger;
  /** Stable id of this executor (default: `<kind>-<hostname>-<port>`). */
  executorInstanceId?: string;
  /** URL the coordinator reaches this executor at (default: derived from the listening address). */
  publicUrl?: string;
  /** First retry delay in ms (default 250), doubled up to `maxRetryDelayMs` (default 30 s). */
  initialRetryDelayMs?: number;
  maxRetryDelayMs?: number;
}

type Phase = "idle" | "pending" | "registered" | "failed";

/** True for a refusal that repeating the same request cannot fix. */
function isPermanent(err: unknown): boolean {
  return FabricError.is(err) && err.statusCode >= 400 && err.statusCode < 500 && err.statusCode !== 408 && err.statusCode !== 429;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The background registration of one executor, with its state for GET /v1/health. */
export class RegistryRegistration {
  private phase: Phase = "idle";
  private attempts = 0;
  private lastError?: string;
  private readonly problems: string[] = [];
  private readonly client: RegistryClient;
  private stopped = false;
  /** Aborts a request in flight when the executor closes, so closing never waits on a slow registry. */
  private readonly abort = new AbortController();
  private wake?: () => void;
  private loop?: Promise<void>;
  private executorInstanceId?: string;
  private endpoint?: string;

  constructor(private readonly options: RegistrationOptions) {
    this.client = new RegistryClient(options.registryUrl, { connections: 2, headersTimeoutMs: 10_000, headers: bearerHeaders(options.tokens, "node-registry") });
  }

  /** Starts registering in the background, once the executor's address is known. */
  start(address: { host: string; port: number }): void {
    if (this.loop || this.stopped) return;
    const host = address.host === "0.0.0.0" || address.host === "::" ? "127.0.0.1" : address.host;
    this.endpoint = this.options.publicUrl ?? `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
    const safeHost = hostname().replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 100) || "localhost";
    this.executorInstanceId = this.options.executorInstanceId ?? `${this.options.kind}-${safeHost}-${address.port}`;
    this.phase = "pending";
    this.loop = this.run();
  }

  /** The base URL this executor registers, once it listens. */
  get advertisedEndpoint(): string | undefined {
    return this.endpoint;
  }

  /** Resolves when registration ended, successfully or not (tests and the CLI). */
  async settled(): Promise<void> {
    await this.loop;
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
      node_types: this.options.nodeTypes.length,
      attempts: this.attempts,
    };
    if (this.executorInstanceId) details.executor_instance_id = this.executorInstanceId;
    if (this.endpoint) details.endpoint = this.endpoint;
    if (this.problems.length > 0) details.problems = [...this.problems];
    switch (this.phase) {
      case "registered":
        return this.problems.length === 0
          ? { name: "registry_registration", status: "ok", details }
          : { name: "registry_registration", status: "degraded", message: `registered, but the registry refused some node types: ${this.problems.join("; ")}`, details };
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

  private async run(): Promise<void> {
    const log = this.options.logger;
    const toPublish = [...this.options.nodeTypes];
    let delay = this.options.initialRetryDelayMs ?? 250;
    const maxDelay = this.options.maxRetryDelayMs ?? 30_000;
    while (!this.stopped) {
      this.attempts++;
      try {
        while (toPublish.length > 0) {
          const nt = toPublish[0]!;
          try {
            await this.client.http.json("POST", "/v1/node-types", { node_type: nt }, { signal: this.abort.signal });
          } catch (err) {
            if (!isPermanent(err)) throw err;
            const code = FabricError.is(err) ? err.code : "error";
            // A version conflict means different content was published under this version: someone must bump it.
            const problem = `${nt.node_type_id}@${nt.version}: ${code}: ${messageOf(err)}`;
            this.problems.push(problem);
            log.error({ node_type_id: nt.node_type_id, version: nt.version, code }, `the registry refused node type ${problem}`);
          }
          toPublish.shift();
        }
        const registration: ExecutorRegistration = {
          endpoint: this.endpoint!,
          kind: this.options.kind,
          node_types: this.options.nodeTypes.map((nt) => ({ node_type_id: nt.node_type_id, version: nt.version })),
        };
        // Through `http` rather than registerExecutor(), to pass the abort signal.
        await this.client.http.json("PUT", `/v1/executors/${encodeURIComponent(this.executorInstanceId!)}`, registration, { signal: this.abort.signal });
        this.phase = "registered";
        this.lastError = undefined;
        log.info({ executor_instance_id: this.executorInstanceId, endpoint: this.endpoint, node_types: this.options.nodeTypes.length }, "registered with the node registry");
        return;
      } catch (err) {
        if (this.stopped) return;
        this.lastError = messageOf(err);
        if (isPermanent(err)) {
          this.phase = "failed";
          log.error({ err, executor_instance_id: this.executorInstanceId }, "the node registry refused this executor's registration");
          return;
        }
        log.warn({ attempt: this.attempts, retry_in_ms: delay, error: this.lastError }, "node registry not reachable yet; will retry");
        await this.sleep(delay * (0.8 + Math.random() * 0.4));
        delay = Math.min(delay * 2, maxDelay);
      }
    }
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
