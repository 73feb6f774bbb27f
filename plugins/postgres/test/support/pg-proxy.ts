/**
 * A TCP proxy on loopback in front of a PostgreSQL server, for making the database go away without touching the
 * server others use: `cut()` resets every connection through it and refuses new ones (as a server that is down),
 * `restore()` accepts again, `stall()` holds every byte both ways without closing anything (a network that drops
 * packets), `unstall()` lets them through, and `terminateBackends()` has the server end every connection that came
 * through the proxy (`pg_terminate_backend`, as an administrator or a server restart would).
 */
import net from "node:net";
import pg from "pg";
import { PG_URL } from "./pg.js";

interface Pair {
  client: net.Socket;
  upstream: net.Socket | undefined;
}

export class PgProxy {
  private server: net.Server | undefined;
  private readonly pairs = new Set<Pair>();
  private stalled = false;
  /** Connections accepted while stalled: connected upstream on unstall. */
  private readonly held: Pair[] = [];

  private constructor(
    readonly port: number,
    private readonly upstream: { host: string; port: number },
  ) {}

  /** Starts a proxy on a free loopback port in front of `upstreamUrl` (the tests' server by default). */
  static async start(upstreamUrl = PG_URL): Promise<PgProxy> {
    const u = new URL(upstreamUrl);
    const proxy = new PgProxy(0, { host: u.hostname, port: Number(u.port || 5432) });
    await proxy.listen(0);
    return proxy;
  }

  /** `url` (the tests' server by default) with its host and port replaced by the proxy's. */
  url(url: string | URL = PG_URL): URL {
    const u = new URL(url.toString());
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u;
  }

  /** Connections open through the proxy now. */
  get connections(): number {
    return this.pairs.size;
  }

  private listen(port: number): Promise<void> {
    const server = net.createServer((client) => this.accept(client));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        (this as { port: number }).port = (server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  }

  private accept(client: net.Socket): void {
    const pair: Pair = { client, upstream: undefined };
    this.pairs.add(pair);
    client.on("error", () => {});
    client.on("close", () => this.drop(pair));
    client.pause();
    if (this.stalled) this.held.push(pair);
    else this.connect(pair);
  }

  private connect(pair: Pair): void {
    const up = net.connect(this.upstream.port, this.upstream.host);
    pair.upstream = up;
    up.on("error", () => {});
    up.on("close", () => this.drop(pair));
    this.forward(pair.client, up);
    this.forward(up, pair.client);
    if (!this.stalled) {
      pair.client.resume();
      up.resume();
    }
  }

  /** Copies `from` to `to`, with backpressure; nothing moves while the proxy is stalled. */
  private forward(from: net.Socket, to: net.Socket): void {
    from.on("data", (chunk) => {
      if (!to.write(chunk)) from.pause();
    });
    to.on("drain", () => {
      if (!this.stalled) from.resume();
    });
  }

  private drop(pair: Pair): void {
    if (!this.pairs.delete(pair)) return;
    pair.client.destroy();
    pair.upstream?.destroy();
  }

  /** Resets every connection through the proxy and refuses new ones (ECONNREFUSED) until `restore`. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const pair of [...this.pairs]) {
      pair.client.resetAndDestroy();
      pair.upstream?.resetAndDestroy();
      this.drop(pair);
    }
    this.held.length = 0;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Accepts connections again, on the same port. */
  async restore(): Promise<void> {
    if (this.server) return;
    await this.listen(this.port);
  }

  /** Holds every byte both ways, and every new connection, without closing anything. */
  stall(): void {
    this.stalled = true;
    for (const pair of this.pairs) {
      pair.client.pause();
      pair.upstream?.pause();
    }
  }

  /** Lets traffic through again. */
  unstall(): void {
    this.stalled = false;
    for (const pair of this.held.splice(0)) if (this.pairs.has(pair)) this.connect(pair);
    for (const pair of this.pairs) {
      pair.client.resume();
      pair.upstream?.resume();
    }
  }

  /** Has the server terminate every backend connected through the proxy; resolves with how many it ended. */
  async terminateBackends(): Promise<number> {
    const ports = [...this.pairs].map((p) => p.upstream?.localPort).filter((p): p is number => p !== undefined);
    if (ports.length === 0) return 0;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ ended: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()`,
        [ports],
      );
      return rows.filter((r) => r.ended).length;
    } finally {
      await admin.end();
    }
  }

  /** Stops the proxy and everything through it. */
  async close(): Promise<void> {
    this.stalled = false;
    await this.cut();
  }
}
