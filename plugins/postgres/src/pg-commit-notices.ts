/**
 * Commit notices between the processes that share one PostgreSQL schema (SharedRunStore.onCommit): a batch that
 * wrote events sends, in its own transaction, its writer and each run's last seq with pg_notify on the schema's
 * channel; every store hears the others' on one LISTEN connection of its own, probed, and reconnected with backoff.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { whenReady, type PgTarget } from "./connect.js";

/** Told of another process's commit: the run and its last seq, or (null, -1) when notices may have been missed. */
export type CommitListener = (runId: string | null, seq: number) => void;

/** How often the LISTEN connection is probed, and how long the probe may take before the connection is dropped (ms). */
const LISTEN_PROBE_EVERY_MS = 15_000;
const LISTEN_PROBE_TIMEOUT_MS = 5_000;

/** pg_notify refuses payloads of 8000 bytes or more; chunks stay below with room to spare. */
const NOTIFY_LIMIT = 7900;

/** The LISTEN channel of a schema: channels are per database, so stores of two schemas must not hear each other. */
export function channelOf(schema: string): string {
  return `nf_commit_${createHash("sha256").update(schema).digest("hex").slice(0, 24)}`;
}

/** Commit notices of one batch: the writer, then "run_id seq" per run (its last seq), in chunks pg_notify accepts. */
export function notices(owner: string, next: Map<string, number>): string[] {
  const out: string[] = [];
  let chunk = owner;
  let size = Buffer.byteLength(owner);
  for (const [runId, after] of next) {
    const line = `\n${runId} ${after - 1}`;
    const n = Buffer.byteLength(line);
    if (size + n > NOTIFY_LIMIT && chunk !== owner) {
      out.push(chunk);
      chunk = owner;
      size = Buffer.byteLength(owner);
    }
    chunk += line;
    size += n;
  }
  if (chunk !== owner) out.push(chunk);
  return out;
}

/** The commit notices one store hears: its LISTEN connection and the listeners it tells. */
export class PgCommitNotices {
  /** The LISTEN channel (channelOf the store's schema), known once the database was reached. */
  channel = "";
  private readonly listeners = new Set<CommitListener>();
  private listenClient: pg.Client | undefined;
  private listenProbe: NodeJS.Timeout | undefined;
  private listening = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;

  /** `writer()`: the coordinator the store is attached to, whose own commits are not news to it. */
  constructor(
    private readonly pool: pg.Pool,
    private readonly target: PgTarget,
    private readonly writer: () => string | undefined,
  ) {}

  onCommit(listener: CommitListener): () => void {
    this.listeners.add(listener);
    if (!this.listening && !this.closed) {
      this.listening = true;
      void this.connectListener(false, 100);
    }
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Opens the LISTEN connection, retrying with backoff; after a reconnect, tells the listeners they may have missed notices. */
  private async connectListener(reconnect: boolean, delayMs: number): Promise<void> {
    // A store opened while the database was down listens once it is reached (its channel is known then).
    await whenReady(this.pool);
    if (this.closed) return;
    const client = new pg.Client(this.target.config);
    let gone = false;
    const lost = () => {
      if (gone) return;
      gone = true;
      clearInterval(this.listenProbe);
      if (this.listenClient === client) this.listenClient = undefined;
      void client.end().catch(() => {});
      this.scheduleReconnect(delayMs);
    };
    client.on("error", lost);
    client.on("end", lost);
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
    } catch {
      lost();
      return;
    }
    if (this.closed) {
      gone = true;
      await client.end().catch(() => {});
      return;
    }
    this.listenClient = client;
    client.on("notification", (msg) => {
      if (msg.channel === this.channel && msg.payload) this.deliver(msg.payload);
    });
    if (reconnect) this.emit(null, -1);
    // A connection that stays up resets the backoff.
    delayMs = 100;
    // The connection only listens, so nothing else would notice a network that holds its packets: a probe that
    // gets no answer in time drops it, and the reconnect (with its catch-up notice) follows.
    clearInterval(this.listenProbe);
    const heartbeat = setInterval(() => {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("no answer")), LISTEN_PROBE_TIMEOUT_MS)));
      Promise.race([client.query("SELECT 1"), deadline])
        .catch(() => {
          (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
          lost();
        })
        .finally(() => clearTimeout(timer));
    }, LISTEN_PROBE_EVERY_MS);
    heartbeat.unref();
    this.listenProbe = heartbeat;
  }

  private scheduleReconnect(delayMs: number): void {
    if (this.closed || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connectListener(true, Math.min(delayMs * 2, 5_000));
    }, delayMs);
    this.reconnectTimer.unref?.();
  }

  private deliver(payload: string): void {
    const lines = payload.split("\n");
    // The first line names the writer; a store's own commits are not news to it.
    if (lines[0] === this.writer()) return;
    for (let i = 1; i < lines.length; i++) {
      const at = lines[i].lastIndexOf(" ");
      if (at <= 0) continue;
      this.emit(lines[i].slice(0, at), Number(lines[i].slice(at + 1)));
    }
  }

  private emit(runId: string | null, seq: number): void {
    for (const l of [...this.listeners]) {
      try {
        l(runId, seq);
      } catch {
        // One listener's failure must not keep the notice from the others.
      }
    }
  }

  /** Resolves once the LISTEN connection is up (after the first onCommit); tests wait on it before committing. */
  async whenListening(timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!this.listenClient) {
      if (this.closed || Date.now() > until) throw new Error("the commit listener is not connected");
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /**
   * Stops listening for good: the LISTEN connection is ended at once, and the answer resolves once it has (a
   * connection the network holds is dropped after a second).
   */
  close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    clearInterval(this.listenProbe);
    const client = this.listenClient;
    this.listenClient = undefined;
    return (async () => {
      if (client) {
        client.removeAllListeners("end");
        client.removeAllListeners("error");
        client.on("error", () => {});
        // A connection the network holds would never finish ending: given a second, then dropped.
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([client.end().catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, 1_000)))]);
        clearTimeout(timer);
        (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      }
    })();
  }
}
