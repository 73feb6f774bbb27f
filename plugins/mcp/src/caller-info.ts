/**
 * Who calls the MCP server, as the route found it: a module of its own so the server, its tasks, its search mode and
 * the policy filter can all name the caller without importing each other.
 */
import type { GatewayCaller } from "./gateway-calls.js";

/** Who calls, as the route found it (each handler reads it from its request's pass-through authInfo). */
export interface CallerInfo extends GatewayCaller {
  /** The verified principal (undefined when authentication is disabled). */
  principal?: { sub?: string; iss?: string; tenant_id?: string; scopes: ReadonlySet<string> };
  /** The digest a task is bound to. */
  digest: string;
  /** Whether the caller may start runs (runs:write, or authentication disabled). */
  mayRun: boolean;
}
