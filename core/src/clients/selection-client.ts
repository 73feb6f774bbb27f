/**
 * Typed client of the Selection service (`/v1/candidate-sets`).
 */
import type { CandidateSet, CandidateSetRequest } from "@nodefabric/schemas";
import { HttpClient, type HttpClientOptions } from "./http-client.js";

/** Talks to a Selection service over HTTP. */
export class SelectionClient {
  readonly http: HttpClient;

  constructor(baseUrl: string, options?: HttpClientOptions) {
    this.http = new HttpClient(baseUrl, options);
  }

  /** Asks for a bounded, ranked CandidateSet for a subtask; the set is stored by Selection. */
  createCandidateSet(request: CandidateSetRequest): Promise<CandidateSet> {
    return this.http.json<CandidateSet>("POST", "/v1/candidate-sets", request);
  }

  /** A stored CandidateSet (404 candidate_set_not_found when unknown). */
  getCandidateSet(candidateSetId: string): Promise<CandidateSet> {
    return this.http.json<CandidateSet>("GET", `/v1/candidate-sets/${encodeURIComponent(candidateSetId)}`);
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
