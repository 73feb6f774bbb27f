/**
 * Typed client of a PDP (`POST /v1/policy:decide`).
 */
import type { PolicyDecision, PolicyDecisionRequest } from "@nodefabric/schemas";
import { HttpClient, type HttpClientOptions } from "./http-client.js";
import type { PolicyClient } from "../engine-ports.js";

/** Asks a PDP over HTTP; throws when it cannot be reached or answers an error. */
export class HttpPolicyClient implements PolicyClient {
  readonly http: HttpClient;

  constructor(baseUrl: string, options: HttpClientOptions = {}) {
    this.http = new HttpClient(baseUrl, { headersTimeoutMs: 5_000, ...options });
  }

  decide(request: PolicyDecisionRequest): Promise<PolicyDecision> {
    return this.http.json<PolicyDecision>("POST", "/v1/policy:decide", request);
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
