/**
 * Typed client of the Node Registry (`/v1/node-types`).
 */
import type { NodeType } from "@nodefabric/schemas";
import { HttpClient, errorFromResponse, type HttpClientOptions } from "./http-client.js";

export interface NodeTypeListQuery {
  q?: string;
  kind?: "atomic" | "composite";
  limit?: number;
  page_token?: string;
}

/** Talks to a Node Registry over HTTP. */
export class RegistryClient {
  readonly http: HttpClient;

  constructor(baseUrl: string, options?: HttpClientOptions) {
    this.http = new HttpClient(baseUrl, options);
  }

  /** Publishes one NodeType version (200 when new or identical, 409 node_type_version_conflict otherwise). */
  publish(nodeType: NodeType): Promise<NodeType> {
    return this.http.json<NodeType>("POST", "/v1/node-types", { node_type: nodeType });
  }

  /** The highest version by semver, or the exact `version`. */
  get(nodeTypeId: string, version?: string): Promise<NodeType> {
    return this.http.json<NodeType>("GET", `/v1/node-types/${encodeURIComponent(nodeTypeId)}`, undefined, { query: { version } });
  }

  /** One page of node types, with the token of the next page when more remain. */
  async listPage(query: NodeTypeListQuery = {}): Promise<{ items: NodeType[]; nextPageToken?: string }> {
    const res = await this.http.request<NodeType[]>("GET", "/v1/node-types", undefined, { query: { ...query } });
    if (res.status !== 200) {
      throw errorFromResponse(this.http.baseUrl, res.status, res.body, res.headers);
    }
    const next = res.headers["x-next-page-token"];
    return { items: res.body, nextPageToken: typeof next === "string" && next ? next : undefined };
  }

  /** Every node type matching the query, following page tokens. */
  async listAll(query: Omit<NodeTypeListQuery, "page_token"> = {}): Promise<NodeType[]> {
    const out: NodeType[] = [];
    let token: string | undefined;
    do {
      const page = await this.listPage({ ...query, page_token: token });
      out.push(...page.items);
      token = page.nextPageToken;
    } while (token);
    return out;
  }

  /** The versions published for an id. */
  versions(nodeTypeId: string): Promise<string[]> {
    return this.http.json<string[]>("GET", `/v1/node-types/${encodeURIComponent(nodeTypeId)}/versions`);
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
