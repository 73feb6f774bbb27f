/**
 * The MCP servers of each protocol era, built once and reused. The SDK's serving entry (`createMcpHandler`) asks its
 * factory for an instance per exchange and connects it to a transport of that exchange alone; the SDK's `Server`
 * refuses a second transport while one is open, but may be connected again once that transport has closed. So an
 * instance serves one exchange at a time, and there are as many per era as exchanges of that era in flight at once, no
 * more: the factory hands out an idle one, building one only when every instance of the era is busy, and takes it back
 * when its exchange's transport closes.
 *
 * Nothing of one caller may stay on an instance for the next. The handlers read the caller from each request's own
 * context (the route's authInfo), never from the instance. What the SDK keeps on an instance per connection (the
 * client's identity and capabilities from an `initialize` or a request's envelope, the negotiated version, log levels)
 * is put back as a new instance has it when the instance comes back (server-pool.test.ts compares a returned instance
 * with a new one, so an SDK upgrade that keeps more per connection fails it).
 */
import type * as Sdk from "@modelcontextprotocol/server";
import type { CallerInfo } from "@nodefabric/core";

export type Era = "legacy" | "modern";

/** One exchange of the /mcp route, as the route passes it to the factory (authInfo.extra). */
export interface Exchange {
  caller: CallerInfo;
  /** Set once the instance serving it was taken back: the route may no longer abort it (the instance serves another). */
  ended?: boolean;
}

/** What a request handler is given: the exchange the request came in on, through the route's authInfo. */
export function exchangeOf(ctx: { http?: { authInfo?: Sdk.AuthInfo } } | Sdk.MessageExtraInfo | undefined): Exchange {
  const extra = (ctx as { http?: { authInfo?: Sdk.AuthInfo } } | undefined)?.http?.authInfo?.extra ?? (ctx as Sdk.MessageExtraInfo | undefined)?.authInfo?.extra;
  const exchange = extra as Partial<Exchange> | undefined;
  if (!exchange?.caller) throw new Error("the MCP route passes its exchange (and the caller) in authInfo.extra");
  return exchange as Exchange;
}

/** What the SDK keeps on a Server per connection, and what a new instance holds there. */
const PER_CONNECTION: ReadonlyArray<[string, () => unknown]> = [
  ["_clientCapabilities", () => undefined],
  ["_clientVersion", () => undefined],
  ["_negotiatedProtocolVersion", () => undefined],
  ["_boundFromTransport", () => false],
  ["_loggingLevels", () => new Map()],
];

/** An instance as the pool sees it: the SDK's Server, with its lease. */
export interface Pooled {
  /** The exchange it serves now (undefined: idle). */
  serving?: Exchange;
  /** Gives the instance back (its exchange ended): once per lease; later calls do nothing. */
  release(): void;
}

export class ServerPool<S extends Sdk.Server & Pooled> {
  private readonly idle: Record<Era, S[]> = { legacy: [], modern: [] };
  private readonly built: Record<Era, number> = { legacy: 0, modern: 0 };

  constructor(private readonly build: (era: Era) => S) {}

  /** An idle instance of the era for `exchange` (a new one when none is idle). */
  acquire(era: Era, exchange: Exchange): S {
    let server = this.idle[era].pop();
    if (!server) {
      server = this.build(era);
      this.built[era] += 1;
      const s = server;
      // The SDK calls onclose when the exchange's transport closes (createMcpHandler wraps it for the exchange and
      // puts it back after), and close() on an instance it never connected (a subscriptions/listen exchange).
      s.onclose = () => this.release(s, era);
      s.release = () => this.release(s, era);
    }
    server.serving = exchange;
    return server;
  }

  /** How many instances each era has (idle and busy): as many as its exchanges ever in flight at once. */
  size(): Record<Era, { built: number; idle: number }> {
    return { legacy: { built: this.built.legacy, idle: this.idle.legacy.length }, modern: { built: this.built.modern, idle: this.idle.modern.length } };
  }

  private release(server: S, era: Era): void {
    const exchange = server.serving;
    if (!exchange) return;
    server.serving = undefined;
    exchange.ended = true;
    const fields = server as unknown as Record<string, unknown>;
    for (const [name, fresh] of PER_CONNECTION) fields[name] = fresh();
    this.idle[era].push(server);
  }
}
