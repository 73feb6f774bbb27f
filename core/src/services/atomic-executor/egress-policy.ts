/**
 * The executor's egress policy: which addresses an egress-checked upstream connection (`ctx.egress.fetch`, used by
 * `http.request`) may reach. By default every address that is not public is refused: loopback, private, link-local,
 * cloud metadata, unspecified, CGNAT, multicast, documentation and other reserved ranges, in IPv4 and IPv6, with the
 * IPv6 forms that carry an IPv4 address (IPv4-mapped, NAT64, 6to4) judged by the IPv4 address they carry. The
 * operator widens it in the executor's configuration, never a node type.
 *
 * The check runs when a socket connects (see `createEgressDispatcher`): the addresses a name resolves to are checked
 * in the resolver the socket itself uses, so a name that answers differently the next time (DNS rebinding) is judged
 * by the address actually connected to, and a literal address is checked before its socket is opened.
 */
import dns from "node:dns";
import { Agent, buildConnector, fetch as undiciFetch, type Dispatcher } from "undici";
import { checkAllowHost, inRange, parseCidr, parseIp, type Ip, type Range } from "../../http/ip-ranges.js";

export { checkAllowHost, parseCidr, parseIp } from "../../http/ip-ranges.js";

/** Why an address is not public. */
export type AddressCategory =
  | "loopback"
  | "private"
  | "link_local"
  | "metadata"
  | "unspecified"
  | "shared"
  | "multicast"
  | "broadcast"
  | "documentation"
  | "benchmarking"
  | "reserved";

/** Categories `allow_private` allows. Metadata, unspecified and the reserved kinds stay refused unless a CIDR allows them. */
const PRIVATE_CATEGORIES: ReadonlySet<AddressCategory> = new Set(["loopback", "private", "link_local", "shared"]);

const CATEGORY_TEXT: Record<AddressCategory, string> = {
  loopback: "a loopback address",
  private: "a private address",
  link_local: "a link-local address",
  metadata: "a cloud metadata address",
  unspecified: "an unspecified address",
  shared: "a carrier-grade NAT (shared) address",
  multicast: "a multicast address",
  broadcast: "the broadcast address",
  documentation: "a documentation address",
  benchmarking: "a benchmarking address",
  reserved: "a reserved address",
};

function table(entries: Array<[string, AddressCategory]>): Array<{ range: Range; category: AddressCategory }> {
  return entries.map(([cidr, category]) => ({ range: parseCidr(cidr), category }));
}

// Most specific first: the first match names the category.
const IPV4_RANGES = table([
  ["169.254.169.254/32", "metadata"], // AWS, GCP, Azure, OpenStack…
  ["169.254.169.253/32", "metadata"], // AWS DNS
  ["169.254.170.2/32", "metadata"], // AWS ECS task metadata
  ["169.254.170.23/32", "metadata"], // AWS EKS pod identity
  ["100.100.100.200/32", "metadata"], // Alibaba Cloud
  ["192.0.0.192/32", "metadata"], // Oracle Cloud
  ["0.0.0.0/8", "unspecified"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "shared"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link_local"],
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "reserved"],
  ["192.0.2.0/24", "documentation"],
  ["192.88.99.0/24", "reserved"],
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "benchmarking"],
  ["198.51.100.0/24", "documentation"],
  ["203.0.113.0/24", "documentation"],
  ["224.0.0.0/4", "multicast"],
  ["255.255.255.255/32", "broadcast"],
  ["240.0.0.0/4", "reserved"],
]);

const IPV6_RANGES = table([
  ["fd00:ec2::254/128", "metadata"], // AWS over IPv6
  ["fd00:ec2::23/128", "metadata"], // AWS EKS pod identity over IPv6
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["64:ff9b:1::/48", "private"], // local-use NAT64
  ["100::/64", "reserved"], // discard-only
  ["2001:db8::/32", "documentation"],
  ["2001::/23", "reserved"], // IETF protocol assignments, Teredo among them
  ["3fff::/20", "documentation"],
  ["fc00::/7", "private"], // unique local
  ["fe80::/10", "link_local"],
  ["fec0::/10", "private"], // site-local, deprecated
  ["ff00::/8", "multicast"],
]);

const GLOBAL_UNICAST_V6 = parseCidr("2000::/3");
const MAPPED_V6 = parseCidr("::ffff:0:0/96");
const NAT64_V6 = parseCidr("64:ff9b::/96");
const SIX_TO_FOUR_V6 = parseCidr("2002::/16");

/** Host names of cloud metadata services, refused before they are even resolved. */
const METADATA_NAMES = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal", "metadata.azure.internal"]);

/** What makes an address not public: its category, the range it is in, and the IPv4 address an IPv6 form carries. */
export interface Classification {
  category: AddressCategory;
  range: string;
  /** For an IPv6 address carrying an IPv4 one (mapped, NAT64, 6to4): how, and the IPv4 address. */
  embedded?: { form: string; address: string };
}

function v4Text(bytes: Uint8Array): string {
  return Array.from(bytes).join(".");
}

function classifyV4(bytes: Uint8Array): Classification | undefined {
  const ip: Ip = { family: 4, bytes };
  const hit = IPV4_RANGES.find((r) => inRange(ip, r.range));
  return hit && { category: hit.category, range: hit.range.text };
}

/** The category of a non-public address, or undefined for a public one. */
function classify(ip: Ip): Classification | undefined {
  if (ip.family === 4) return classifyV4(ip.bytes);
  for (const [range, form, at] of [
    [MAPPED_V6, "IPv4-mapped", 12],
    [NAT64_V6, "NAT64", 12],
    [SIX_TO_FOUR_V6, "6to4", 2],
  ] as const) {
    if (inRange(ip, range)) {
      const v4 = ip.bytes.slice(at, at + 4);
      const inner = classifyV4(v4);
      return inner && { ...inner, embedded: { form, address: v4Text(v4) } };
    }
  }
  const hit = IPV6_RANGES.find((r) => inRange(ip, r.range));
  if (hit) return { category: hit.category, range: hit.range.text };
  // Outside global unicast, nothing is public (the IPv4-compatible ::/96 included).
  if (!inRange(ip, GLOBAL_UNICAST_V6)) return { category: "reserved", range: "outside 2000::/3" };
  return undefined;
}

/** Why a connection was refused: thrown (as the socket's error) by the egress-checked dispatcher. */
export class EgressDeniedError extends Error {
  /** Lets `ctx.egress.fetch` recognise it in a cause chain, whatever copy of this module made it. */
  readonly code = "ERR_NODEFABRIC_EGRESS_DENIED";
  constructor(
    /** The host name or literal address that was asked for. */
    readonly host: string,
    /** The address refused (undefined when the name itself is refused). */
    readonly address: string | undefined,
    readonly category: AddressCategory,
    readonly range: string | undefined,
    /** What to change in the executor's configuration to allow it. */
    readonly remedy: string,
    reason: string,
  ) {
    super(reason);
    this.name = "EgressDeniedError";
  }
}

/** What the operator allows beyond public addresses (the executor's `executor.egress`). */
export interface EgressOptions {
  /** Allows loopback, private (RFC 1918, unique local), link-local and CGNAT addresses; never metadata ones. */
  allowPrivate?: boolean;
  /** Ranges (or single addresses) allowed whatever they are, metadata included: "127.0.0.1/32", "10.1.0.0/16". */
  allowCidrs?: readonly string[];
  /** Host names (or `*.domain`) whose addresses are not checked, for internal APIs reached by name. */
  allowHosts?: readonly string[];
  /**
   * Resolves a host name to every address it has (default: the system resolver, `dns.lookup` with `all: true`).
   * The egress check runs on what this answers, and the socket connects to exactly those addresses.
   */
  lookup?: (hostname: string) => Promise<Array<{ address: string; family: number }>>;
}

function hostMatches(hostname: string, entries: readonly string[]): boolean {
  return entries.some((e) => (e.startsWith("*.") ? hostname.endsWith(e.slice(1)) : hostname === e));
}

/** The executor's egress policy, compiled from its options. */
export class EgressPolicy {
  readonly allowPrivate: boolean;
  private readonly cidrs: Range[];
  private readonly hosts: string[];
  readonly resolve: (hostname: string) => Promise<Array<{ address: string; family: number }>>;

  constructor(options: EgressOptions = {}) {
    this.allowPrivate = options.allowPrivate === true;
    this.cidrs = (options.allowCidrs ?? []).map((c) => parseCidr(c));
    this.hosts = (options.allowHosts ?? []).map((h) => {
      const problem = checkAllowHost(h);
      if (problem) throw new Error(`egress allow_hosts: ${problem}`);
      return h.trim().toLowerCase();
    });
    this.resolve = options.lookup ?? ((hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true }));
  }

  /** True when the operator allowed this host name, so its addresses are not checked. */
  hostAllowed(hostname: string): boolean {
    return hostMatches(normalizeName(hostname), this.hosts);
  }

  /** The refusal of connecting to `address` (asked for as `host`), or undefined when it is allowed. */
  checkAddress(host: string, address: string): EgressDeniedError | undefined {
    const parsed = parseIp(address);
    if (!parsed) return new EgressDeniedError(host, address, "reserved", undefined, REMEDY_CIDR, `${address} is not an IP address`);
    // An IPv4-mapped address is an IPv4 address: allow-listed ranges are compared in that form.
    const ip: Ip = parsed.family === 6 && inRange(parsed, MAPPED_V6) ? { family: 4, bytes: parsed.bytes.slice(12) } : parsed;
    const found = classify(parsed);
    if (!found) return undefined;
    if (this.cidrs.some((r) => inRange(ip, r) || inRange(parsed, r))) return undefined;
    if (this.allowPrivate && PRIVATE_CATEGORIES.has(found.category)) return undefined;
    const what = found.embedded
      ? `the ${found.embedded.form} form of ${found.embedded.address}, ${CATEGORY_TEXT[found.category]} (${found.range})`
      : `${CATEGORY_TEXT[found.category]} (${found.range})`;
    const reason = stripBrackets(host) === address ? `${address} is ${what}` : `${host} resolved to ${address}, ${what}`;
    return new EgressDeniedError(host, address, found.category, found.range, PRIVATE_CATEGORIES.has(found.category) ? REMEDY_PRIVATE : REMEDY_CIDR, reason);
  }

  /** The refusal of a host name before it is resolved (cloud metadata names), or undefined. */
  checkName(hostname: string): EgressDeniedError | undefined {
    const name = normalizeName(hostname);
    if (METADATA_NAMES.has(name) && !this.hostAllowed(name)) {
      return new EgressDeniedError(hostname, undefined, "metadata", undefined, REMEDY_HOST, `${hostname} is a cloud metadata service`);
    }
    return undefined;
  }
}

const REMEDY_PRIVATE =
  "an operator can allow it in the executor's configuration: executor.egress.allow_private, allow_cidrs or allow_hosts " +
  "(FABRIC_EXECUTOR_EGRESS_ALLOW_PRIVATE, _ALLOW_CIDRS, _ALLOW_HOSTS), never in a node type";
const REMEDY_CIDR =
  "an operator can allow it in the executor's configuration: executor.egress.allow_cidrs or allow_hosts " +
  "(FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS, _ALLOW_HOSTS), never in a node type";
const REMEDY_HOST = "an operator can allow it in the executor's configuration: executor.egress.allow_hosts (FABRIC_EXECUTOR_EGRESS_ALLOW_HOSTS), never in a node type";

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function normalizeName(hostname: string): string {
  return hostname.toLowerCase().replace(/\.$/, "");
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A dispatcher whose every connection is checked by `policy`: a literal address before its socket opens, a host name
 * in the resolver the socket uses (every address it resolves to is checked; one refused address refuses the
 * connection). Redirects followed through it are checked the same way, since each hop connects anew.
 */
export function createEgressDispatcher(policy: EgressPolicy, options: { connections?: number; keepAliveTimeout?: number } = {}): Dispatcher {
  const lookup = (hostname: string, opts: dns.LookupOptions, callback: LookupCallback): void => {
    policy.resolve(hostname).then(
      (found) => {
        const family = opts.family === 4 || opts.family === "IPv4" ? 4 : opts.family === 6 || opts.family === "IPv6" ? 6 : 0;
        const addresses = found.filter((a) => family === 0 || a.family === family);
        if (addresses.length === 0) {
          const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
          err.code = "ENOTFOUND";
          return callback(err, "");
        }
        if (!policy.hostAllowed(hostname)) {
          for (const a of addresses) {
            const denied = policy.checkAddress(hostname, a.address);
            if (denied) return callback(denied as unknown as NodeJS.ErrnoException, "");
          }
        }
        if (opts.all) return callback(null, addresses.map((a) => ({ address: a.address, family: a.family })));
        callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ""),
    );
  };
  const base = buildConnector({ lookup } as buildConnector.BuildOptions);
  return new Agent({
    keepAliveTimeout: options.keepAliveTimeout ?? 10_000,
    connections: options.connections ?? 512,
    connect: (opts, callback) => {
      // undici gives IPv6 literals without brackets.
      const host = opts.hostname;
      const denied = parseIp(host) ? (policy.hostAllowed(host) ? undefined : policy.checkAddress(host, stripBrackets(host))) : policy.checkName(host);
      if (denied) {
        callback(denied, null);
        return;
      }
      base(opts, callback);
    },
  });
}

/**
 * A fetch whose every connection is checked by `policy` (through `createEgressDispatcher`), for what the fabric sends
 * to an address a caller gave (the A2A server's push notifications), which the operator's egress rules bound as they
 * bound `http.request`. `close` ends its connections.
 */
export function egressFetch(policy: EgressPolicy): { fetch: (url: string, init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal }) => Promise<{ status: number; text(): Promise<string> }>; close(): Promise<void> } {
  const dispatcher = createEgressDispatcher(policy, { connections: 16 });
  return {
    fetch: (url, init) => undiciFetch(url, { ...init, redirect: "manual", dispatcher }),
    close: () => dispatcher.close(),
  };
}
