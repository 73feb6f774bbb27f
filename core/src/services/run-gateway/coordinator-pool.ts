/**
 * The coordinators a gateway spreads requests over. They share one store, so any live one can take any request:
 * requests go round robin over those considered up; one that fails at the transport level is passed over until a
 * background probe of its /v1/health finds it again, and the request moves on to the next one when that is safe.
 */
import type { Dispatcher } from "undici";
import { HttpClient, transportError, type HttpClientOptions, type JsonResponse, type RequestOptions } from "../../clients/http-client.js";
import { FabricError } from "../../http/errors.js";
import type { HealthStatus } from "../../http/service.js";
import { probeCoordinator } from "./coordinator-health.js";

/** Connect-phase failures: nothing of the request reached the coordinator, so any request may go elsewhere. */
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "UND_ERR_CONNECT_TIMEOUT", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

/** Whether a transport failure happened before any byte of the request went out. */
function notSent(err: unknown): boolean {
  const cause = (err as { cause?: { code?: unknown } }).cause;
  return typeof cause?.code === "string" && NOT_SENT_CODES.has(cause.code);
}

export interface PoolTimings {
  /** First pause before a down coordinator is probed again (ms, default 1 s); it doubles on each failed probe. */
  downInitialMs?: number;
  /** Longest pause between probes of a down coordinator (ms, default 10 s). */
  downMaxMs?: number;
  /** How long a probe's /v1/health may take (ms). */
  probeTimeoutMs: number;
}

interface Member {
  readonly client: HttpClient;
  down: boolean;
  /** The pause before the next probe while down. */
  backoffMs: number;
  timer?: NodeJS.Timeout;
}

/** What a caller may replay on another coordinator: only connect failures (`unsent`), or any transport failure. */
export type Replay = "unsent" | "any";

export class CoordinatorPool {
  private readonly members: Member[];
  private next = 0;
  private closed = false;
  private readonly initialMs: number;
  private readonly maxMs: number;

  constructor(urls: readonly string[], clientOptions: HttpClientOptions, private readonly timings: PoolTimings) {
    if (urls.length === 0) throw new Error("the run gateway needs at least one coordinator URL");
    this.initialMs = timings.downInitialMs ?? 1_000;
    this.maxMs = timings.downMaxMs ?? 10_000;
    this.members = urls.map((u) => ({ client: new HttpClient(u, clientOptions), down: false, backoffMs: this.initialMs }));
  }

  get urls(): string[] {
    return this.members.map((m) => m.client.baseUrl);
  }

  /**
   * The order to try coordinators in for one request: those up, starting at the round-robin position. When every
   * one is down they are all tried anyway, so a request answers with the real failure (or finds one back early).
   */
  private order(): Member[] {
    const up = this.members.filter((m) => !m.down);
    const list = up.length > 0 ? up : this.members;
    const start = this.next++ % list.length;
    return [...list.slice(start), ...list.slice(0, start)];
  }

  private markDown(m: Member): void {
    if (m.down || this.closed) return;
    m.down = true;
    m.backoffMs = this.initialMs;
    this.scheduleProbe(m);
  }

  private markUp(m: Member): void {
    m.down = false;
    m.backoffMs = this.initialMs;
    if (m.timer) clearTimeout(m.timer);
    m.timer = undefined;
  }

  private scheduleProbe(m: Member): void {
    if (this.closed) return;
    m.timer = setTimeout(() => void this.probe(m), m.backoffMs);
    m.timer.unref();
  }

  private async probe(m: Member): Promise<void> {
    m.timer = undefined;
    if (this.closed || !m.down) return;
    const p = await probeCoordinator(m.client, this.timings.probeTimeoutMs);
    if (this.closed || !m.down) return;
    if (p.reachable) {
      this.markUp(m);
    } else {
      m.backoffMs = Math.min(m.backoffMs * 2, this.maxMs);
      this.scheduleProbe(m);
    }
  }

  /**
   * Runs `attempt` on one coordinator after another until one answers. A transport failure marks that coordinator
   * down; the next one is tried when `replay` allows it, otherwise the failure is the answer.
   */
  private async attempt<T>(replay: Replay, signal: AbortSignal | undefined, run: (client: HttpClient) => Promise<T>): Promise<{ value: T; baseUrl: string }> {
    let last: unknown;
    for (const m of this.order()) {
      try {
        const value = await run(m.client);
        if (m.down) this.markUp(m);
        return { value, baseUrl: m.client.baseUrl };
      } catch (err) {
        // A FabricError without a cause is about the answer (too large, not JSON): the coordinator is alive.
        if (FabricError.is(err) && err.cause === undefined) throw err;
        // Our own abort (the client left): nothing is wrong with the coordinator.
        if (signal?.aborted) throw FabricError.is(err) ? err : transportError(m.client.baseUrl, err);
        const failure = FabricError.is(err) ? err : transportError(m.client.baseUrl, err);
        this.markDown(m);
        last = failure;
        if (!(replay === "any" || notSent(failure))) throw failure;
      }
    }
    throw last;
  }

  /** Sends one JSON request to a live coordinator. */
  request<T = unknown>(method: Dispatcher.HttpMethod, path: string, body: unknown, options: RequestOptions, replay: Replay): Promise<{ value: JsonResponse<T>; baseUrl: string }> {
    return this.attempt(replay, options.signal, (c) => c.request<T>(method, path, body, options));
  }

  /** Opens an event stream on a live coordinator (a GET: safe to open elsewhere). */
  stream(path: string, options: RequestOptions): Promise<{ value: Dispatcher.ResponseData; baseUrl: string }> {
    return this.attempt("any", options.signal, (c) => c.stream(path, options));
  }

  /**
   * Each coordinator's own health, asked now; the answers also bring a down coordinator back (or mark one down)
   * without waiting for its probe.
   */
  async health(timeoutMs: number): Promise<Array<{ url: string; status: HealthStatus; message?: string }>> {
    return Promise.all(
      this.members.map(async (m) => {
        const p = await probeCoordinator(m.client, timeoutMs);
        if (p.reachable && m.down) this.markUp(m);
        if (!p.reachable && !m.down) this.markDown(m);
        return { url: m.client.baseUrl, status: p.status, ...(p.message ? { message: p.message } : {}) };
      }),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const m of this.members) if (m.timer) clearTimeout(m.timer);
    await Promise.all(this.members.map((m) => m.client.close()));
  }
}
