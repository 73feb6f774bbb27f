/**
 * What a service presents when it calls another: the face of its outbound tokens, and how a token is bound to one
 * executor. Declared here, below the clients that implement it (clients/service-tokens.ts), because the services'
 * security options (auth-plugin.ts) name it and http/ never imports from clients/.
 */
import type { ServiceName } from "../service-names.js";

/**
 * The claim binding a token to one executor: the base URL the coordinator called it at. An executor refuses a token
 * bound to any other executor, so a token sent to one executor cannot be replayed against another.
 */
export const EXECUTOR_BINDING_CLAIM = "executor_endpoint";

/** Bearer tokens for one service's calls to the others. */
export interface ServiceTokens {
  /**
   * A token for calls to `target`. With `executor` (the endpoint an executor is called at), the token is bound to
   * that one executor (EXECUTOR_BINDING_CLAIM), where the issuer can say so.
   */
  token(target: ServiceName, executor?: string): Promise<string>;
}

/**
 * An executor endpoint as tokens name it: scheme, host and port as the URL parser writes them (lowercase host, no
 * default port), and the path without a trailing slash. The coordinator and the executor both compare this form.
 */
export function executorBinding(endpoint: string): string {
  let u: URL;
  try {
    u = new URL(endpoint);
  } catch {
    return endpoint;
  }
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
}
