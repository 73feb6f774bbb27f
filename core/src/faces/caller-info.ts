/**
 * Who calls a protocol face (the MCP or A2A server on the gateway), as its route found them: a module of its own so a
 * face's server, its tasks, its search mode and the policy filter can all name the caller without importing each
 * other. With it, the digest a task is bound to and the random ids a face gives its runs.
 */
import { createHash, randomBytes } from "node:crypto";
import type { FaceCaller } from "./gateway-calls.js";

/** Who calls, as the route found it (each handler reads it from its request's pass-through authInfo). */
export interface CallerInfo extends FaceCaller {
  /** The verified principal (undefined when authentication is disabled). */
  principal?: { sub?: string; iss?: string; tenant_id?: string; scopes: ReadonlySet<string> };
  /** The digest a task is bound to. */
  digest: string;
  /** Whether the caller may start runs (runs:write, or authentication disabled). */
  mayRun: boolean;
}

/** Who a caller is, as a short digest: a task is bound to it (stored as a label on the run). */
export function callerDigest(p: { iss?: string; sub?: string; tenant_id?: string } | undefined): string {
  if (!p) return "anonymous";
  return createHash("sha256").update(`${p.iss ?? ""}\n${p.sub ?? ""}\n${p.tenant_id ?? ""}`).digest("hex").slice(0, 32);
}

/** Random bytes drawn 4 KiB at a time (one system call per 256 run ids, rather than one each). */
let entropy = Buffer.alloc(0);
let taken = 0;

/** A new run id for a face's task: `<prefix>-` and 128 random bits, so a task id (the run id) cannot be guessed. */
export function newFaceRunId(prefix: string): string {
  if (taken + 16 > entropy.length) {
    entropy = randomBytes(4096);
    taken = 0;
  }
  const id = `${prefix}-${entropy.toString("hex", taken, taken + 16)}`;
  taken += 16;
  return id;
}
