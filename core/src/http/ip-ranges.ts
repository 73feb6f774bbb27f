/**
 * IP addresses, CIDR ranges and host-name entries as the egress settings (`executor.egress`) write them: parsed and
 * checked here, below both the configuration's checks and the atomic executor's egress policy that use them.
 */
import net from "node:net";

/** A parsed address: 4 bytes (IPv4) or 16 bytes (IPv6). */
export interface Ip {
  family: 4 | 6;
  bytes: Uint8Array;
}

/** A CIDR range. */
export interface Range extends Ip {
  prefix: number;
  text: string;
}

function parseIPv4(text: string): Uint8Array | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    if (!/^\d{1,3}$/.test(parts[i]!)) return undefined;
    const n = Number(parts[i]);
    if (n > 255) return undefined;
    bytes[i] = n;
  }
  return bytes;
}

function parseIPv6(text: string): Uint8Array | undefined {
  let s = text;
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  // A dotted IPv4 tail (::ffff:1.2.3.4) stands for the last two groups.
  let tail: Uint8Array | undefined;
  const lastColon = s.lastIndexOf(":");
  if (s.slice(lastColon + 1).includes(".")) {
    tail = parseIPv4(s.slice(lastColon + 1));
    if (!tail) return undefined;
    s = `${s.slice(0, lastColon + 1)}0:0`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (part: string): string[] => (part === "" ? [] : part.split(":"));
  const head = groups(halves[0]!);
  const rest = halves.length === 2 ? groups(halves[1]!) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const all = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  const bytes = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    if (!/^[0-9a-f]{1,4}$/i.test(all[i]!)) return undefined;
    const n = parseInt(all[i]!, 16);
    bytes[2 * i] = n >> 8;
    bytes[2 * i + 1] = n & 0xff;
  }
  if (tail) bytes.set(tail, 12);
  return bytes;
}

/** Parses an IPv4 or IPv6 address (brackets and a zone id allowed); undefined when `text` is not one. */
export function parseIp(text: string): Ip | undefined {
  const s = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  const kind = net.isIP(s.replace(/%.*$/, ""));
  if (kind === 4) {
    const bytes = parseIPv4(s);
    return bytes && { family: 4, bytes };
  }
  if (kind === 6) {
    const bytes = parseIPv6(s);
    return bytes && { family: 6, bytes };
  }
  return undefined;
}

/** Parses `a.b.c.d/n`, `v6/n`, or a single address (a /32 or /128). Throws an Error naming the problem. */
export function parseCidr(text: string): Range {
  const [addr, prefixText, extra] = text.trim().split("/");
  const ip = extra === undefined && addr ? parseIp(addr) : undefined;
  if (!ip) throw new Error(`"${text}" is not an IP address or CIDR range, such as "10.1.0.0/16" or "fd12:3456::/48"`);
  const max = ip.family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
  if (!(prefix >= 0 && prefix <= max)) throw new Error(`"${text}" has a prefix length outside 0-${max}`);
  return { ...ip, prefix, text: text.trim() };
}

export function inRange(ip: Ip, range: Range): boolean {
  if (ip.family !== range.family) return false;
  let bits = range.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((ip.bytes[i]! & mask) !== (range.bytes[i]! & mask)) return false;
  }
  return true;
}

/** Checks a host name entry of `allow_hosts`: a name or `*.domain`, lower case, no port and no IP address. */
export function checkAllowHost(entry: string): string | undefined {
  const e = entry.trim().toLowerCase();
  if (parseIp(e)) return `"${entry}" is an IP address; allow addresses with allow_cidrs`;
  if (!/^(?:\*\.)?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/.test(e)) {
    return `"${entry}" is not a host name (such as "api.internal.example" or "*.internal.example", without a port)`;
  }
  return undefined;
}
