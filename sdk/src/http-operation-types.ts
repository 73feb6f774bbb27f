/**
 * The description of one HTTP operation that a node type calls: `extensions["nodefabric.openapi"]` of a NodeType made
 * from an OpenAPI operation. Plain JSON, so the same description drives a generated handler package
 * (`callHttpOperation` with `ctx.fetch` and `ctx.secrets`) and a node type published with no code and run by
 * `http.request` (through `ctx.egress`).
 */

/** The NodeType extension that holds an HttpOperationDescriptor. */
export const OPENAPI_EXTENSION = "nodefabric.openapi";

/** OpenAPI parameter serialisation styles. */
export type ParameterStyle = "simple" | "form" | "spaceDelimited" | "pipeDelimited" | "deepObject" | "matrix" | "label";

/** One input sent as a parameter of the request. */
export interface OperationParameter {
  /** The input property holding the value. */
  input: string;
  /** The parameter's name on the wire. */
  name: string;
  in: "path" | "query" | "header" | "cookie";
  /** As OpenAPI defaults it when the document is silent: path and header `simple`, query and cookie `form`. */
  style: ParameterStyle;
  /** As OpenAPI defaults it: true for `form`, false for the others. */
  explode: boolean;
  /** Query only: reserved characters (RFC 3986 `:/?#[]@!$&'()*+,;=`) are sent as they are. */
  allow_reserved?: boolean;
  /** Set when the document describes the parameter with `content` (not `schema`): the value is serialised as this media type (JSON). */
  content_type?: string;
}

/** How the `body` input becomes the request body. */
export interface OperationBody {
  /** The input holding the body (always `body`). */
  input: string;
  /** The Content-Type sent (for multipart, the boundary is added at run time). */
  media_type: string;
  /**
   * - `json`: any JSON value, sent as JSON;
   * - `form`: an object, sent as application/x-www-form-urlencoded;
   * - `multipart`: an object, one part per property (`binary_fields` are base64 strings sent as file parts);
   * - `text`: a string, sent as is;
   * - `binary`: a base64 string, sent as its bytes.
   */
  encoding: "json" | "form" | "multipart" | "text" | "binary";
  required: boolean;
  /** Multipart: the properties given as base64 and sent as bytes. */
  binary_fields?: string[];
  /** Form and multipart: per-property Encoding Object (content type of a part, style and explode of a form field). */
  properties?: Record<string, { content_type?: string; style?: ParameterStyle; explode?: boolean }>;
}

/**
 * A security scheme as the runtime applies it; each secret is read by name (`ctx.secrets`, then the environment, in a
 * generated package; the executor's host-bound secrets under `http.request`).
 */
export type OperationSecurityScheme =
  | { type: "apiKey"; in: "header" | "query" | "cookie"; name: string; secret: string }
  | { type: "http"; scheme: "bearer"; secret: string }
  | { type: "http"; scheme: "basic"; username_secret: string; password_secret: string }
  /** Another HTTP scheme (digest, hoba…): the secret is the whole credentials after the scheme name. */
  | { type: "http"; scheme: string; secret: string }
  /**
   * OAuth 2: a token from the client credentials flow (`token_url`, with `client_id_secret` and `client_secret_secret`),
   * cached until it expires; or, for any flow, an access token given directly as `access_token_secret`.
   */
  | { type: "oauth2"; token_url?: string; scopes: string[]; client_id_secret?: string; client_secret_secret?: string; access_token_secret: string };

/** The upstream server: the base URL, or a template with variables. */
export interface OperationServer {
  /** Absolute http(s) URL, possibly with `{variable}` parts; "" when the document names none. */
  url: string;
  variables?: Record<string, { default: string; enum?: string[]; description?: string }>;
}

/** One HTTP operation, as a node type calls it. */
export interface HttpOperationDescriptor {
  api: { title: string; version: string };
  /** The document's operationId, or the name made for an operation without one. */
  operation_id: string;
  /** Upper case. */
  method: string;
  /** Appended to the base URL; `{name}` stands for the path parameter `name`. No fragment. */
  path: string;
  server: OperationServer;
  /**
   * Names of settings read at run time (secrets, then environment variables, in a generated package):
   * `base_url` replaces the whole server URL; `server_variables` maps each server variable to its setting.
   */
  settings: { base_url: string; server_variables?: Record<string, string> };
  parameters: OperationParameter[];
  body?: OperationBody;
  /** The schemes named by `security`, by their name in the document. */
  security_schemes: Record<string, OperationSecurityScheme>;
  /**
   * Alternatives, the first whose secrets are all set is used; each lists schemes applied together. An empty
   * alternative (`[]`) means the operation may be called with no credentials. No alternatives: no security.
   */
  security: string[][];
  /** How a 2xx answer becomes the outputs: its JSON object as is, its JSON value as `{ result }`, or `{}` (nothing described). */
  response: { status: number; outputs: "object" | "result" | "none"; media_type?: string };
}
