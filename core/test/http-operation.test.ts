import { describe, it, expect, afterEach, beforeEach, vi } from "vitest";
import nock from "nock";
import {
  buildOperationRequest,
  callHttpOperation,
  defineAtomic,
  HandlerError,
  operationDescriptorOf,
  readOperationAnswer,
  type HttpOperationDescriptor,
  type JsonObject,
  type OperationParameter,
  type OperationRequestOptions,
} from "@nodefabric/core/sdk";
import { runHandler } from "@nodefabric/core/testing";
import { forgetOAuthTokens } from "../../sdk/src/oauth2-client-credentials.js";

// The runtime of node types made from OpenAPI operations: the request (parameter styles from the OpenAPI 3.1 style
// examples table, base URL, bodies, security schemes) and the answer. End to end through a real in-process executor
// (runHandler); the API upstream and its OAuth 2 token endpoint are someone else's, so nock serves them.

const API = "https://petstore.test";

/** Petstore's getPetById, changed by `over`. */
function descriptor(over: Partial<HttpOperationDescriptor> = {}): HttpOperationDescriptor {
  return {
    api: { title: "Petstore", version: "1.0.0" },
    operation_id: "getPetById",
    method: "GET",
    path: "/pet/{petId}",
    server: { url: `${API}/v3` },
    settings: { base_url: "PETSTORE_BASE_URL" },
    parameters: [{ input: "petId", name: "petId", in: "path", style: "simple", explode: false }],
    security_schemes: {},
    security: [],
    response: { status: 200, outputs: "object", media_type: "application/json" },
    ...over,
  };
}

/** A node type whose handler is callHttpOperation, as a generated package declares it. */
function operationType(op: HttpOperationDescriptor, id = "petstore.op") {
  return defineAtomic({
    nodeType: {
      node_type_id: id,
      version: "1.0.0",
      description: `calls ${op.operation_id}`,
      input_schema: { type: "object" },
      output_schema: { type: "object" },
      constraints: { gates: { side_effect_class: "read" } },
      extensions: { "nodefabric.openapi": op },
    },
    handler: (inputs: JsonObject, ctx) => callHttpOperation(inputs, ctx),
  });
}

const noSettings: OperationRequestOptions = { setting: () => undefined, secret: () => undefined };

/** Options reading settings and secrets from `values`. */
function withValues(values: Record<string, string>, extra: Partial<OperationRequestOptions> = {}): OperationRequestOptions {
  return { setting: (n) => values[n], secret: (n) => values[n], ...extra };
}

interface Seen {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** Serves every request to `origin` with `answer`, recording what was sent. */
function upstream(origin: string, answer: (seen: Seen) => [number, unknown?, Record<string, string>?]) {
  const seen: Seen[] = [];
  const scope = nock(origin).persist();
  for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
    scope.intercept(() => true, method).reply(function (path, body) {
      const request: Seen = { method, path, headers: this.req.headers, body: typeof body === "string" ? body : JSON.stringify(body) };
      seen.push(request);
      return answer(request) as [number, string];
    });
  }
  return { seen, scope };
}

afterEach(() => {
  nock.cleanAll();
  nock.enableNetConnect();
  forgetOAuthTokens();
  vi.useRealTimers();
});
beforeEach(() => {
  nock.disableNetConnect();
});

describe("parameters, by the OpenAPI style examples table", () => {
  // The table's values: an empty value, a string, an array and an object.
  const values = { empty: "", string: "blue", array: ["blue", "black", "brown"], object: { R: 100, G: 200, B: 150 } } as const;
  type Column = keyof typeof values;

  async function sent(p: Omit<OperationParameter, "input" | "name">, column: Column, path = p.in === "path" ? "/c/{color}" : "/c") {
    const op = descriptor({ path, parameters: [{ input: "color", name: "color", ...p }] });
    return buildOperationRequest(op, { color: values[column] as never }, noSettings);
  }
  const pathOf = async (style: OperationParameter["style"], explode: boolean, column: Column) => (await sent({ in: "path", style, explode }, column)).url.pathname.slice("/v3/c/".length);
  const queryOf = async (style: OperationParameter["style"], explode: boolean, column: Column) => (await sent({ in: "query", style, explode }, column)).url.search.slice(1);

  it.each([
    ["matrix", false, { string: ";color=blue", array: ";color=blue,black,brown", object: ";color=R,100,G,200,B,150" }],
    ["matrix", true, { string: ";color=blue", array: ";color=blue;color=black;color=brown", object: ";R=100;G=200;B=150" }],
    ["label", false, { string: ".blue", array: ".blue,black,brown", object: ".R,100,G,200,B,150" }],
    ["label", true, { string: ".blue", array: ".blue.black.brown", object: ".R=100.G=200.B=150" }],
    ["simple", false, { string: "blue", array: "blue,black,brown", object: "R,100,G,200,B,150" }],
    ["simple", true, { string: "blue", array: "blue,black,brown", object: "R=100,G=200,B=150" }],
  ] as const)("path %s explode=%s", async (style, explode, expected) => {
    for (const [column, text] of Object.entries(expected)) expect(await pathOf(style, explode, column as Column), `${column}`).toBe(text);
  });

  it("path: an empty matrix value is ;color; an empty label value is refused as a '.' segment, an empty simple value as empty", async () => {
    expect(await pathOf("matrix", false, "empty")).toBe(";color");
    expect(await pathOf("matrix", true, "empty")).toBe(";color");
    // "." would be removed by URL parsing; in a segment of its own it cannot be sent.
    await expect(pathOf("label", false, "empty")).rejects.toMatchObject({ code: "invalid_inputs" });
    await expect(pathOf("simple", false, "empty")).rejects.toMatchObject({ code: "invalid_inputs", message: "the path parameter color of getPetById cannot be empty" });
    // Inside a segment, the label prefix is fine.
    const op = descriptor({ path: "/c{color}", parameters: [{ input: "color", name: "color", in: "path", style: "label", explode: false }] });
    expect((await buildOperationRequest(op, { color: "" }, noSettings)).url.pathname).toBe("/v3/c.");
  });

  it.each([
    ["form", false, { empty: "color=", string: "color=blue", array: "color=blue,black,brown", object: "color=R,100,G,200,B,150" }],
    ["form", true, { empty: "color=", string: "color=blue", array: "color=blue&color=black&color=brown", object: "R=100&G=200&B=150" }],
    ["spaceDelimited", false, { array: "color=blue%20black%20brown", object: "color=R%20100%20G%20200%20B%20150" }],
    ["pipeDelimited", false, { array: "color=blue|black|brown", object: "color=R|100|G|200|B|150" }],
    ["deepObject", true, { object: "color[R]=100&color[G]=200&color[B]=150" }],
  ] as const)("query %s explode=%s", async (style, explode, expected) => {
    for (const [column, text] of Object.entries(expected)) expect(await queryOf(style, explode, column as Column), `${column}`).toBe(text);
  });

  it("query: where the table says n/a, a value is sent as form exploded", async () => {
    expect(await queryOf("spaceDelimited", true, "array")).toBe("color=blue&color=black&color=brown");
    expect(await queryOf("pipeDelimited", false, "string")).toBe("color=blue");
    expect(await queryOf("deepObject", true, "string")).toBe("color=blue");
    const op = descriptor({ path: "/c", parameters: [{ input: "f", name: "filter", in: "query", style: "deepObject", explode: true }] });
    const r = await buildOperationRequest(op, { f: { owner: { name: "Ann" }, tags: ["a", "b"] } }, noSettings);
    expect(r.url.search).toBe("?filter[owner][name]=Ann&filter[tags]=a&filter[tags]=b");
  });

  it("header simple, exploded or not", async () => {
    const headerOf = async (explode: boolean, column: Column) => (await sent({ in: "header", style: "simple", explode }, column)).headers.color;
    expect(await headerOf(false, "string")).toBe("blue");
    expect(await headerOf(false, "array")).toBe("blue,black,brown");
    expect(await headerOf(true, "array")).toBe("blue,black,brown");
    expect(await headerOf(false, "object")).toBe("R,100,G,200,B,150");
    expect(await headerOf(true, "object")).toBe("R=100,G=200,B=150");
  });

  it("cookie form: every cookie parameter in one cookie header", async () => {
    const cookieOf = async (explode: boolean, column: Column) => (await sent({ in: "cookie", style: "form", explode }, column)).headers.cookie;
    expect(await cookieOf(false, "string")).toBe("color=blue");
    expect(await cookieOf(false, "array")).toBe("color=blue,black,brown");
    expect(await cookieOf(true, "array")).toBe("color=blue; color=black; color=brown");
    expect(await cookieOf(false, "object")).toBe("color=R,100,G,200,B,150");
    expect(await cookieOf(true, "object")).toBe("R=100; G=200; B=150");
    const op = descriptor({
      path: "/c",
      parameters: [
        { input: "session", name: "session", in: "cookie", style: "form", explode: true },
        { input: "theme", name: "theme", in: "cookie", style: "form", explode: true },
      ],
    });
    expect((await buildOperationRequest(op, { session: "a b;c", theme: "dark" }, noSettings)).headers.cookie).toBe("session=a%20b%3Bc; theme=dark");
  });

  it("percent-encodes path values (/ as %2F) and query values, except reserved characters with allow_reserved", async () => {
    const op = descriptor({
      path: "/city/{city}",
      parameters: [
        { input: "city", name: "city", in: "path", style: "simple", explode: false },
        { input: "q", name: "q", in: "query", style: "form", explode: true },
        { input: "raw", name: "raw", in: "query", style: "form", explode: true, allow_reserved: true },
      ],
    });
    const r = await buildOperationRequest(op, { city: "São Paulo/Centro", q: "a/b?c:d&e=f g", raw: "a/b?c:d&e=f g%41%" }, noSettings);
    expect(r.url.pathname).toBe("/v3/city/S%C3%A3o%20Paulo%2FCentro");
    expect(r.url.search).toBe("?q=a%2Fb%3Fc%3Ad%26e%3Df%20g&raw=a/b?c:d&e=f%20g%41%25");
  });

  it("sends a content parameter as JSON, leaves out missing optional inputs, and refuses a missing path parameter", async () => {
    const op = descriptor({
      path: "/pets/{petId}",
      parameters: [
        { input: "petId", name: "petId", in: "path", style: "simple", explode: false },
        { input: "filter", name: "filter", in: "query", style: "form", explode: true, content_type: "application/json" },
        { input: "limit", name: "limit", in: "query", style: "form", explode: true },
        { input: "trace", name: "X-Trace", in: "header", style: "simple", explode: false, content_type: "application/json" },
      ],
    });
    const r = await buildOperationRequest(op, { petId: 7, filter: { status: ["sold"] }, trace: { id: 1 } }, noSettings);
    expect(r.url.href).toBe(`${API}/v3/pets/7?filter=%7B%22status%22%3A%5B%22sold%22%5D%7D`);
    expect(r.headers["x-trace"]).toBe('{"id":1}');
    await expect(buildOperationRequest(op, { limit: 3 }, noSettings)).rejects.toMatchObject({
      code: "invalid_inputs",
      retryable: false,
      message: "the path parameter petId of getPetById needs the input petId",
      details: { field: "petId" },
    });
  });

  it("refuses a header value with a line break, and a path value of '..'", async () => {
    const op = descriptor({ path: "/f/{name}", parameters: [{ input: "name", name: "name", in: "path", style: "simple", explode: false }, { input: "h", name: "X-H", in: "header", style: "simple", explode: false }] });
    await expect(buildOperationRequest(op, { name: "x", h: "a\r\nb: c" }, noSettings)).rejects.toMatchObject({ code: "invalid_inputs", details: { field: "h" } });
    await expect(buildOperationRequest(op, { name: ".." }, noSettings)).rejects.toMatchObject({ code: "invalid_inputs" });
  });
});

describe("base URL", () => {
  const regional = descriptor({
    path: "/pets",
    parameters: [],
    server: { url: "https://{region}.api.test/{version}/", variables: { region: { default: "eu", enum: ["eu", "us"] }, version: { default: "v1" } } },
    settings: { base_url: "PETS_BASE_URL", server_variables: { region: "PETS_REGION", version: "PETS_VERSION" } },
  });

  it("fills server variables from their settings, else their defaults, and checks an enum", async () => {
    expect((await buildOperationRequest(regional, {}, noSettings)).url.href).toBe("https://eu.api.test/v1/pets");
    expect((await buildOperationRequest(regional, {}, withValues({ PETS_REGION: "us", PETS_VERSION: "v2" }))).url.href).toBe("https://us.api.test/v2/pets");
    await expect(buildOperationRequest(regional, {}, withValues({ PETS_REGION: "ap" }))).rejects.toMatchObject({
      code: "invalid_configuration",
      retryable: false,
      message: "PETS_REGION must be one of eu, us",
    });
  });

  it("takes the base URL setting over the server, with or without a trailing slash, keeping its path and query", async () => {
    expect((await buildOperationRequest(regional, {}, withValues({ PETS_BASE_URL: "http://localhost:8080/api/" }))).url.href).toBe("http://localhost:8080/api/pets");
    expect((await buildOperationRequest(regional, {}, withValues({ PETS_BASE_URL: "http://localhost:8080" }))).url.href).toBe("http://localhost:8080/pets");
    expect((await buildOperationRequest(regional, {}, withValues({ PETS_BASE_URL: "https://x.test/v1?tenant=a" }))).url.href).toBe("https://x.test/v1/pets?tenant=a");
  });

  it("refuses a base URL setting that is not an absolute http(s) URL, naming the setting but not its value", async () => {
    const err = await buildOperationRequest(regional, {}, withValues({ PETS_BASE_URL: "ftp://files.test/secret-ish" })).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "invalid_configuration", retryable: false, message: "PETS_BASE_URL must be an absolute http(s) URL, such as https://api.example.com/v1" });
    expect((err as Error).message).not.toContain("secret-ish");
  });

  it("with no server URL and no setting: invalid_configuration saying what to set", async () => {
    const op = descriptor({ server: { url: "" } });
    await expect(buildOperationRequest(op, { petId: 1 }, noSettings)).rejects.toMatchObject({
      code: "invalid_configuration",
      retryable: false,
      message: "no base URL for getPetById: set PETSTORE_BASE_URL to the API's URL, such as https://api.example.com/v1",
    });
    const result = await runHandler(operationType(op), { petId: 1 });
    expect(result).toMatchObject({ state: "failed", error: { code: "invalid_configuration", retryable: false } });
  });

  it("reads the setting from the executor's secrets, then the environment", async () => {
    const { seen } = upstream("https://configured.test", () => [200, { id: 1 }]);
    const def = operationType(descriptor({ server: { url: "" } }));
    expect(await runHandler(def, { petId: 1 }, { secrets: { PETSTORE_BASE_URL: "https://configured.test/base" } })).toMatchObject({ state: "completed", outputs: { id: 1 } });
    vi.stubEnv("PETSTORE_BASE_URL", "https://configured.test/env");
    try {
      expect(await runHandler(def, { petId: 2 })).toMatchObject({ state: "completed" });
    } finally {
      vi.unstubAllEnvs();
    }
    expect(seen.map((s) => s.path)).toEqual(["/base/pet/1", "/env/pet/2"]);
  });
});

describe("request bodies, through an executor", () => {
  const post = (body: HttpOperationDescriptor["body"]) => descriptor({ operation_id: "addPet", method: "POST", path: "/pet", parameters: [], body });

  it("json: any JSON value, a primitive too", async () => {
    const { seen } = upstream(API, () => [200, { ok: true }]);
    const def = operationType(post({ input: "body", media_type: "application/json", encoding: "json", required: true }));
    expect(await runHandler(def, { body: { name: "Rex", tags: ["good"] } })).toMatchObject({ state: "completed", outputs: { ok: true } });
    expect(await runHandler(def, { body: 42 })).toMatchObject({ state: "completed" });
    expect(seen.map((s) => [s.method, s.path, s.headers["content-type"], s.body])).toEqual([
      ["POST", "/v3/pet", "application/json", '{"name":"Rex","tags":["good"]}'],
      ["POST", "/v3/pet", "application/json", "42"],
    ]);
  });

  it("form: application/x-www-form-urlencoded, each property by its style", async () => {
    const { seen } = upstream(API, () => [200, {}]);
    const def = operationType(
      post({
        input: "body",
        media_type: "application/x-www-form-urlencoded",
        encoding: "form",
        required: true,
        properties: { tags: { explode: false }, ids: { style: "pipeDelimited", explode: false }, meta: { content_type: "application/json" } },
      }),
    );
    const result = await runHandler(def, { body: { name: "Rex the dog", status: ["a", "b"], tags: ["x", "y"], ids: [1, 2], meta: { k: 1 } } });
    expect(result.state).toBe("completed");
    expect(seen[0]!.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    expect(Object.fromEntries([...new URLSearchParams(seen[0]!.body)].map(([k], i, all) => [k, all.filter(([n]) => n === k).map(([, v]) => v)]))).toEqual({
      name: ["Rex the dog"],
      status: ["a", "b"],
      tags: ["x,y"],
      ids: ["1|2"],
      meta: ['{"k":1}'],
    });
    expect(seen[0]!.body).toContain("name=Rex+the+dog");
  });

  it("multipart: text parts, JSON parts for objects, file parts decoded from base64", async () => {
    const bodies: Buffer[] = [];
    const scope = nock(API)
      .post("/v3/pet/1/uploadImage")
      .reply(function (_path, body) {
        // nock hands a body that is not UTF-8 over as hex.
        bodies.push(Buffer.from(body as string, /^[0-9a-f]+$/.test(body as string) ? "hex" : "utf8"));
        bodies.push(Buffer.from(String(this.req.headers["content-type"])));
        return [200, { code: 200 }];
      });
    const def = operationType(
      descriptor({
        operation_id: "uploadFile",
        method: "POST",
        path: "/pet/{petId}/uploadImage",
        body: { input: "body", media_type: "multipart/form-data", encoding: "multipart", required: true, binary_fields: ["file"], properties: { file: { content_type: "image/png" } } },
      }),
    );
    const file = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff]);
    const result = await runHandler(def, { petId: 1, body: { note: "front view", tags: ["a", "b"], meta: { w: 2 }, file: file.toString("base64") } });
    expect(result).toMatchObject({ state: "completed", outputs: { code: 200 } });
    expect(scope.isDone()).toBe(true);
    const contentType = bodies[1]!.toString();
    const boundary = /^multipart\/form-data; boundary=(.+)$/.exec(contentType)?.[1];
    expect(boundary).toBeTruthy();
    const parts = bodies[0]!.toString("latin1").split(`--${boundary}`);
    expect(parts.at(-1)).toBe("--\r\n");
    const [note, tagA, tagB, meta, filePart] = parts.slice(1, -1);
    expect(note).toBe('\r\nContent-Disposition: form-data; name="note"\r\n\r\nfront view\r\n');
    expect(tagA).toBe('\r\nContent-Disposition: form-data; name="tags"\r\n\r\na\r\n');
    expect(tagB).toBe('\r\nContent-Disposition: form-data; name="tags"\r\n\r\nb\r\n');
    expect(meta).toBe('\r\nContent-Disposition: form-data; name="meta"\r\nContent-Type: application/json\r\n\r\n{"w":2}\r\n');
    expect(filePart).toBe(`\r\nContent-Disposition: form-data; name="file"; filename="file"\r\nContent-Type: image/png\r\n\r\n${file.toString("latin1")}\r\n`);
  });

  it("text as is, binary from base64, and a missing required body refused", async () => {
    const { seen } = upstream(API, () => [200, {}]);
    const text = operationType(post({ input: "body", media_type: "text/plain", encoding: "text", required: true }), "petstore.text");
    expect(await runHandler(text, { body: "just words" })).toMatchObject({ state: "completed" });
    expect(seen[0]).toMatchObject({ headers: { "content-type": "text/plain" }, body: "just words" });
    expect(await runHandler(text, { body: 3 })).toMatchObject({ state: "failed", error: { code: "invalid_inputs" } });

    const bytes = await buildOperationRequest(post({ input: "body", media_type: "application/octet-stream", encoding: "binary", required: true }), { body: Buffer.from([1, 2, 250]).toString("base64") }, noSettings);
    expect(bytes.headers["content-type"]).toBe("application/octet-stream");
    expect([...(bytes.body as Uint8Array)]).toEqual([1, 2, 250]);
    await expect(buildOperationRequest(post({ input: "body", media_type: "application/octet-stream", encoding: "binary", required: true }), { body: "not base64!" }, noSettings)).rejects.toMatchObject({
      code: "invalid_inputs",
    });

    const missing = await runHandler(text, {});
    expect(missing).toMatchObject({ state: "failed", error: { code: "invalid_inputs", retryable: false, message: "addPet needs a request body: the input body" } });
    const optional = await buildOperationRequest(post({ input: "body", media_type: "application/json", encoding: "json", required: false }), {}, noSettings);
    expect(optional.body).toBeUndefined();
    expect(optional.headers["content-type"]).toBeUndefined();
  });

  it("asks for the response's media type, else JSON", async () => {
    expect((await buildOperationRequest(descriptor(), { petId: 1 }, noSettings)).headers.accept).toBe("application/json");
    expect((await buildOperationRequest(descriptor({ response: { status: 200, outputs: "result", media_type: "text/csv" } }), { petId: 1 }, noSettings)).headers.accept).toBe("text/csv");
    expect((await buildOperationRequest(descriptor({ response: { status: 204, outputs: "none" } }), { petId: 1 }, noSettings)).headers.accept).toBe("application/json");
  });
});

describe("security schemes", () => {
  const schemes: HttpOperationDescriptor["security_schemes"] = {
    api_key: { type: "apiKey", in: "header", name: "api_key", secret: "PETSTORE_API_KEY" },
    query_key: { type: "apiKey", in: "query", name: "key", secret: "PETSTORE_QUERY_KEY" },
    cookie_key: { type: "apiKey", in: "cookie", name: "sid", secret: "PETSTORE_SID" },
    bearer: { type: "http", scheme: "bearer", secret: "PETSTORE_TOKEN" },
    basic: { type: "http", scheme: "basic", username_secret: "PETSTORE_USER", password_secret: "PETSTORE_PASSWORD" },
    digest: { type: "http", scheme: "Digest", secret: "PETSTORE_DIGEST" },
    petstore_auth: {
      type: "oauth2",
      token_url: "https://auth.petstore.test/oauth/token",
      scopes: ["read:pets", "write:pets"],
      client_id_secret: "PETSTORE_OAUTH_CLIENT_ID",
      client_secret_secret: "PETSTORE_OAUTH_CLIENT_SECRET",
      access_token_secret: "PETSTORE_OAUTH_ACCESS_TOKEN",
    },
  };
  const secured = (security: string[][]) => descriptor({ security_schemes: schemes, security });
  const build = (security: string[][], values: Record<string, string>, extra: Partial<OperationRequestOptions> = {}) =>
    buildOperationRequest(secured(security), { petId: 1 }, withValues(values, extra));

  it("apiKey in a header, the query or a cookie", async () => {
    const r = await build([["api_key", "query_key", "cookie_key"]], { PETSTORE_API_KEY: "k1", PETSTORE_QUERY_KEY: "a+b/c=", PETSTORE_SID: "s-9" });
    expect(r.headers.api_key).toBe("k1");
    expect(r.url.search).toBe("?key=a%2Bb%2Fc%3D");
    expect(r.headers.cookie).toBe("sid=s-9");
    expect(r.sensitiveHeaders.sort()).toEqual(["api_key", "cookie"]);
  });

  it("http bearer, basic (base64 of user:password) and other schemes", async () => {
    expect((await build([["bearer"]], { PETSTORE_TOKEN: "t-1" })).headers.authorization).toBe("Bearer t-1");
    expect((await build([["basic"]], { PETSTORE_USER: "ann", PETSTORE_PASSWORD: "pä:ss" })).headers.authorization).toBe(`Basic ${Buffer.from("ann:pä:ss").toString("base64")}`);
    expect((await build([["digest"]], { PETSTORE_DIGEST: 'username="ann", nonce="x"' })).headers.authorization).toBe('Digest username="ann", nonce="x"');
  });

  it("uses the first alternative whose secrets are all set; an empty alternative needs none", async () => {
    const security = [["api_key", "bearer"], ["basic"], ["petstore_auth"]];
    const onlyToken = await build(security, { PETSTORE_API_KEY: "k1", PETSTORE_OAUTH_ACCESS_TOKEN: "at-1" });
    expect(onlyToken.headers).toMatchObject({ authorization: "Bearer at-1" });
    expect(onlyToken.headers.api_key).toBeUndefined();
    const both = await build(security, { PETSTORE_API_KEY: "k1", PETSTORE_TOKEN: "t", PETSTORE_OAUTH_ACCESS_TOKEN: "at-1" });
    expect(both.headers).toMatchObject({ api_key: "k1", authorization: "Bearer t" });
    const optional = await build([["api_key"], []], {});
    expect(optional.headers.api_key).toBeUndefined();
    expect(optional.headers.authorization).toBeUndefined();
  });

  it("no alternative satisfied: invalid_configuration naming the secrets to set", async () => {
    const op = descriptor({ security_schemes: schemes, security: [["api_key"], ["petstore_auth"]] });
    const result = await runHandler(operationType(op), { petId: 1 });
    expect(result).toMatchObject({
      state: "failed",
      error: {
        code: "invalid_configuration",
        retryable: false,
        message:
          "getPetById needs credentials: set PETSTORE_API_KEY (apiKey api_key), or PETSTORE_OAUTH_ACCESS_TOKEN (oauth2 petstore_auth), " +
          "or PETSTORE_OAUTH_CLIENT_ID and PETSTORE_OAUTH_CLIENT_SECRET (oauth2 petstore_auth, client credentials)",
        details: { secrets: ["PETSTORE_API_KEY", "PETSTORE_OAUTH_ACCESS_TOKEN", "PETSTORE_OAUTH_CLIENT_ID", "PETSTORE_OAUTH_CLIENT_SECRET"] },
      },
    });
  });

  it("sends the credentials through an executor", async () => {
    const { seen } = upstream(API, () => [200, { id: 1 }]);
    const result = await runHandler(operationType(secured([["api_key"]])), { petId: 1 }, { secrets: { PETSTORE_API_KEY: "k-123" } });
    expect(result).toMatchObject({ state: "completed", outputs: { id: 1 } });
    expect(seen[0]!.headers.api_key).toBe("k-123");
  });

  describe("OAuth 2 client credentials", () => {
    const clientSecrets = { PETSTORE_OAUTH_CLIENT_ID: "client one", PETSTORE_OAUTH_CLIENT_SECRET: "s3cr:t" };
    const tokenEndpoint = (answers: Array<[number, unknown, Record<string, string>?]>) => {
      const seen: Seen[] = [];
      nock("https://auth.petstore.test")
        .persist()
        .post("/oauth/token")
        .reply(function (path, body) {
          seen.push({ method: "POST", path, headers: this.req.headers, body: body as string });
          return (answers[seen.length - 1] ?? answers.at(-1)!) as [number, string];
        });
      return seen;
    };

    it("asks the token URL with HTTP basic client authentication and the scopes, then sends the token", async () => {
      const token = tokenEndpoint([[200, { access_token: "tok-1", token_type: "bearer", expires_in: 3600 }]]);
      const api = upstream(API, () => [200, { id: 1 }]);
      const result = await runHandler(operationType(secured([["petstore_auth"]])), { petId: 1 }, { secrets: clientSecrets });
      expect(result).toMatchObject({ state: "completed", outputs: { id: 1 } });
      expect(token).toHaveLength(1);
      // RFC 6749 §2.3.1: id and secret form-encoded, then base64 of id:secret.
      expect(token[0]!.headers.authorization).toBe(`Basic ${Buffer.from("client+one:s3cr%3At").toString("base64")}`);
      expect(token[0]!.headers["content-type"]).toBe("application/x-www-form-urlencoded");
      expect(Object.fromEntries(new URLSearchParams(token[0]!.body))).toEqual({ grant_type: "client_credentials", scope: "read:pets write:pets" });
      expect(api.seen[0]!.headers.authorization).toBe("Bearer tok-1");
    });

    it("reuses the token until shortly before it expires", async () => {
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(new Date("2026-11-24T10:00:00Z"));
      const token = tokenEndpoint([
        [200, { access_token: "tok-1", expires_in: 600 }],
        [200, { access_token: "tok-2", expires_in: 600 }],
      ]);
      const fetchOnce = async () => (await build([["petstore_auth"]], clientSecrets)).headers.authorization;
      // Two at once share one token request.
      expect(await Promise.all([fetchOnce(), fetchOnce()])).toEqual(["Bearer tok-1", "Bearer tok-1"]);
      vi.setSystemTime(new Date("2026-11-24T10:08:59Z"));
      expect(await fetchOnce()).toBe("Bearer tok-1");
      expect(token).toHaveLength(1);
      // 600 s tokens are asked for again a minute before they expire.
      vi.setSystemTime(new Date("2026-11-24T10:09:00Z"));
      expect(await fetchOnce()).toBe("Bearer tok-2");
      expect(token).toHaveLength(2);
      // Another set of scopes is another token.
      const narrower = descriptor({ security_schemes: { petstore_auth: { ...schemes.petstore_auth!, scopes: ["read:pets"] } as never }, security: [["petstore_auth"]] });
      expect((await buildOperationRequest(narrower, { petId: 1 }, withValues(clientSecrets))).headers.authorization).toBe("Bearer tok-2");
      expect(token).toHaveLength(3);
      expect(new URLSearchParams(token[2]!.body).get("scope")).toBe("read:pets");
      // So is another client secret: a token is reused only by whoever could have asked for it.
      await build([["petstore_auth"]], { ...clientSecrets, PETSTORE_OAUTH_CLIENT_SECRET: "other" });
      expect(token).toHaveLength(4);
    });

    it("prefers a configured access token over the flow", async () => {
      const token = tokenEndpoint([[200, { access_token: "tok-1", expires_in: 600 }]]);
      expect((await build([["petstore_auth"]], { ...clientSecrets, PETSTORE_OAUTH_ACCESS_TOKEN: "given" })).headers.authorization).toBe("Bearer given");
      expect(token).toHaveLength(0);
    });

    it("a failed token request is upstream_error naming the token URL, retryable for a 5xx only", async () => {
      tokenEndpoint([
        [503, { error: "busy" }, { "retry-after": "2" }],
        [401, { error: "invalid_client" }],
        [200, { token_type: "bearer" }],
      ]);
      const op = secured([["petstore_auth"]]);
      const run = () => runHandler(operationType(op), { petId: 1 }, { secrets: clientSecrets });
      expect(await run()).toMatchObject({
        state: "failed",
        error: {
          code: "upstream_error",
          retryable: true,
          message: "the OAuth 2 token request to https://auth.petstore.test/oauth/token answered 503",
          details: { token_url: "https://auth.petstore.test/oauth/token", status: 503, retry_after_ms: 2000 },
        },
      });
      expect(await run()).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: false, details: { status: 401, body: '{"error":"invalid_client"}' } } });
      expect(await run()).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: false, message: "the OAuth 2 token request to https://auth.petstore.test/oauth/token answered 200 without an access_token" } });
    });

    it("a token URL that cannot be reached is a retryable upstream_unavailable naming its host and port", async () => {
      const err = await build([["petstore_auth"]], clientSecrets, {
        fetch: async () => {
          throw new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
        },
      }).catch((e: unknown) => e);
      expect(HandlerError.is(err)).toBe(true);
      expect(err).toMatchObject({
        code: "upstream_unavailable",
        retryable: true,
        message: "connection refused by auth.petstore.test:443 (ECONNREFUSED)",
        details: { reason: "connection_refused", code: "ECONNREFUSED", host: "auth.petstore.test", port: 443 },
      });
    });

    it("reads the client credentials for the token URL, and for the operation's URL the token goes to", async () => {
      tokenEndpoint([[200, { access_token: "tok-1", expires_in: 600 }]]);
      const asked: string[] = [];
      await build([["petstore_auth"]], clientSecrets, {
        secret: (name, url) => {
          asked.push(`${name}@${url.host}`);
          return (clientSecrets as Record<string, string>)[name];
        },
      });
      expect(asked).toEqual([
        "PETSTORE_OAUTH_ACCESS_TOKEN@petstore.test",
        "PETSTORE_OAUTH_CLIENT_ID@auth.petstore.test",
        "PETSTORE_OAUTH_CLIENT_SECRET@auth.petstore.test",
        "PETSTORE_OAUTH_CLIENT_ID@petstore.test",
        "PETSTORE_OAUTH_CLIENT_SECRET@petstore.test",
      ]);
    });
  });
});

describe("answers", () => {
  const answerOf = async (op: HttpOperationDescriptor, status: number, body: unknown, headers: Record<string, string> = {}) => {
    nock(API)
      .get(/.*/)
      .reply(status, body as string, headers);
    return runHandler(operationType(op), { petId: 1 });
  };

  it("a JSON object is the outputs as it is", async () => {
    expect(await answerOf(descriptor(), 200, { id: 1, name: "Rex" }, { "content-type": "application/json" })).toMatchObject({ state: "completed", outputs: { id: 1, name: "Rex" } });
  });

  it("a JSON string (Petstore's loginUser) or number is { result }", async () => {
    const login = descriptor({ operation_id: "loginUser", path: "/user/login", parameters: [], response: { status: 200, outputs: "result", media_type: "application/json" } });
    expect(await answerOf(login, 200, '"logged in user session: 1764"', { "content-type": "application/json" })).toMatchObject({
      state: "completed",
      outputs: { result: "logged in user session: 1764" },
    });
    expect(await answerOf(login, 200, "42", { "content-type": "application/json" })).toMatchObject({ outputs: { result: 42 } });
    // Plain text under a JSON media type is the result as it is.
    expect(await answerOf(login, 200, "logged in user session: 1764", { "content-type": "application/json" })).toMatchObject({ outputs: { result: "logged in user session: 1764" } });
  });

  it("a text answer is { result } of its text; a binary one, of its base64", async () => {
    const text = descriptor({ response: { status: 200, outputs: "result", media_type: "text/plain" } });
    expect(await answerOf(text, 200, "[1, 2]", { "content-type": "text/plain; charset=utf-8" })).toMatchObject({ outputs: { result: "[1, 2]" } });
    const op = descriptor({ response: { status: 200, outputs: "result", media_type: "image/png" } });
    expect(readOperationAnswer(op, 200, { "content-type": "image/png" }, new Uint8Array([0x89, 0x50, 0xff]))).toEqual({ result: Buffer.from([0x89, 0x50, 0xff]).toString("base64") });
  });

  it("an empty body, or an operation that describes none, is {}", async () => {
    expect(await answerOf(descriptor(), 204, "")).toMatchObject({ state: "completed", outputs: {} });
    expect(await answerOf(descriptor({ response: { status: 200, outputs: "none" } }), 200, "<p>ok</p>", { "content-type": "text/html" })).toMatchObject({ state: "completed", outputs: {} });
  });

  it("a body that is not JSON, or JSON that is not an object, where an object is needed: non-retryable upstream_error", async () => {
    expect(await answerOf(descriptor(), 200, "<html>maintenance</html>", { "content-type": "text/html" })).toMatchObject({
      state: "failed",
      error: { code: "upstream_error", retryable: false, message: "getPetById answered 200 with a body that is not JSON (text/html)", details: { status: 200, body: "<html>maintenance</html>" } },
    });
    expect(await answerOf(descriptor(), 200, [1, 2])).toMatchObject({
      state: "failed",
      error: { code: "upstream_error", retryable: false, message: "getPetById answered 200 with JSON that is not an object (an array)" },
    });
  });

  it("a non-2xx is upstream_error with the status and the first 2 KiB of the body, retryable for 5xx, 408 and 429", async () => {
    const big = "x".repeat(5000);
    const notFound = await answerOf(descriptor(), 404, big);
    expect(notFound).toMatchObject({ state: "failed", error: { code: "upstream_error", retryable: false, message: "getPetById answered 404", details: { status: 404 } } });
    expect((notFound.error!.details as { body: string }).body).toBe("x".repeat(2048));
    expect(await answerOf(descriptor(), 500, { error: "boom" })).toMatchObject({ error: { code: "upstream_error", retryable: true, details: { status: 500, body: '{"error":"boom"}' } } });
    expect(await answerOf(descriptor(), 408, "")).toMatchObject({ error: { code: "upstream_error", retryable: true } });
  });

  it("429 with Retry-After gives details.retry_after_ms", async () => {
    expect(await answerOf(descriptor(), 429, { error: "slow down" }, { "retry-after": "7" })).toMatchObject({
      state: "failed",
      error: { code: "upstream_error", retryable: true, details: { status: 429, retry_after_ms: 7000 } },
    });
    const at = new Date(Date.now() + 30_000).toUTCString();
    const err = (() => {
      try {
        readOperationAnswer(descriptor(), 503, new Headers({ "retry-after": at }), "");
      } catch (e) {
        return e as HandlerError;
      }
    })();
    expect(err?.details?.retry_after_ms).toBeGreaterThan(25_000);
  });

  it("follows a redirect, dropping credentials when it leaves the origin", async () => {
    const op = descriptor({ security_schemes: { api_key: { type: "apiKey", in: "header", name: "x-api-key", secret: "K" } }, security: [["api_key"]] });
    nock(API).get("/v3/pet/1").reply(302, "", { location: "https://mirror.test/pet/1" });
    const mirror = upstream("https://mirror.test", () => [200, { id: 1, from: "mirror" }]);
    expect(await runHandler(operationType(op), { petId: 1 }, { secrets: { K: "k-1" } })).toMatchObject({ state: "completed", outputs: { from: "mirror" } });
    expect(mirror.seen[0]!.headers["x-api-key"]).toBeUndefined();
  });

  it("a node type without a usable descriptor fails with invalid_configuration", async () => {
    const def = defineAtomic({
      nodeType: { node_type_id: "petstore.broken", version: "1.0.0", input_schema: { type: "object" }, output_schema: { type: "object" }, extensions: { "nodefabric.openapi": { operation_id: "x" } } },
      handler: (inputs: JsonObject, ctx) => callHttpOperation(inputs, ctx),
    });
    expect(await runHandler(def, {})).toMatchObject({
      state: "failed",
      error: { code: "invalid_configuration", retryable: false, message: 'petstore.broken@1.0.0: extensions["nodefabric.openapi"] has no upper-case method' },
    });
    const of = (op: unknown) => () => operationDescriptorOf({ node_type_id: "t", version: "1", extensions: { "nodefabric.openapi": op } });
    expect(of(descriptor())).not.toThrow();
    expect(of({ ...descriptor(), body: { input: "body", media_type: "application/json", encoding: "json", required: false } })).toThrow("has a body, which cannot be sent with GET");
    expect(of({ ...descriptor(), path: "/pet/{id}" })).toThrow("has no path parameter for {id} of its path");
    expect(of({ ...descriptor(), security: [["missing"]] })).toThrow('names the security scheme "missing", which security_schemes does not describe');
    expect(of({ ...descriptor(), parameters: [...descriptor().parameters, { input: "h", name: "bad header", in: "header", style: "simple", explode: false }] })).toThrow("not a valid header name");
  });
});
