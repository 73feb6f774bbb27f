/**
 * loadOpenApi: OpenAPI documents read from files and URLs, JSON and YAML, with external $refs brought in and internal
 * ones kept, Swagger 2.0 converted, small faults noted, and unusable documents refused with a clear message.
 */
import { createServer, type Server } from "node:http";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadOpenApi, OpenApiImportError } from "../src/load.js";

const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
const templateFixtures = path.join(repoRoot, "templates/create-fabric-handler/test/fixtures");

/** Every `$ref` string in `value`. */
function refsOf(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) refsOf(item, out);
  else if (typeof value === "object" && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      if (key === "$ref" && typeof child === "string") out.push(child);
      else refsOf(child, out);
    }
  }
  return out;
}

describe("loadOpenApi: files", () => {
  it("reads YAML relative to cwd, keeps internal $refs and brings external ones in", async () => {
    const progress: string[] = [];
    const loaded = await loadOpenApi("shop.yaml", { cwd: fixtures, onProgress: (m) => progress.push(m) });

    expect(loaded.location).toBe(path.join(fixtures, "shop.yaml"));
    expect(loaded.convertedFrom).toBeUndefined();
    expect(loaded.document.info).toMatchObject({ title: "Corner Shop", version: "1.4" });
    const refs = refsOf(loaded.document);
    // The internal parameter $ref is kept, not replaced by a copy.
    expect(refs).toContain("#/components/parameters/Limit");
    // No $ref names another file any more, and each one resolves inside the document.
    expect(refs.length).toBeGreaterThan(0);
    expect(refs.every((ref) => ref.startsWith("#"))).toBe(true);
    const paths = loaded.document.paths as Record<string, any>;
    const item = paths["/items"].get.responses["200"].content["application/json"].schema.items;
    expect(item.type === "object" || typeof item.$ref === "string").toBe(true);
    expect(loaded.notes.some((n) => /external \$refs? (was|were) brought into the document/.test(n))).toBe(true);
    // A small document reports no progress.
    expect(progress).toEqual([]);
  });

  it("reads JSON from an absolute path and from a file: URL", async () => {
    const file = path.join(fixtures, "tiny.json");
    const byPath = await loadOpenApi(file);
    const byUrl = await loadOpenApi(pathToFileURL(file).href);

    expect(byPath.document.openapi).toBe("3.1.0");
    expect(byPath.document.info.title).toBe("Tiny");
    expect(byUrl.document).toEqual(byPath.document);
    expect(byPath.notes).toEqual([]);
  });

  it("goes on when an external $ref names a file that is not there, leaving those $refs as they are", async () => {
    const loaded = await loadOpenApi(path.join(fixtures, "dangling.yaml"));
    const paths = loaded.document.paths as Record<string, any>;

    expect(paths["/things"].get.responses["200"].content["application/json"].schema).toEqual({ $ref: "./not-there.yaml#/Thing" });
    expect(paths["/elsewhere"]).toEqual({ $ref: "./not-there.yaml#/paths/elsewhere" });
    // The example's literal value is not a $ref to follow.
    expect(paths["/things"].get.responses["200"].content["application/json"].examples.sample.value).toEqual({ $ref: "./also-not-there.yaml" });
    // The file that is there is brought in.
    expect(refsOf(paths["/items"]).every((ref) => ref.startsWith("#"))).toBe(true);
    expect(loaded.notes).toEqual(["2 $refs name what cannot be read (not-there.yaml); they are left as they are", "1 external $ref was brought into the document"]);
    expect(JSON.stringify(loaded.document)).not.toContain("x-nodefabric-unreadable");
  });

  it("converts Swagger 2.0 to OpenAPI 3.0 and says so", async () => {
    const progress: string[] = [];
    const loaded = await loadOpenApi(path.join(fixtures, "kennel-swagger2.yaml"), { onProgress: (m) => progress.push(m) });
    const doc = loaded.document as Record<string, any>;

    expect(loaded.convertedFrom).toBe("2.0");
    expect(doc.openapi).toMatch(/^3\.0\./);
    expect(doc.swagger).toBeUndefined();
    expect(doc.servers).toEqual([{ url: "https://kennel.example.com/v2" }]);
    expect(doc.components.schemas.Dog.properties.name).toEqual({ type: "string" });
    expect(doc.paths["/dogs"].post.requestBody.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Dog" });
    expect(Object.keys(doc.paths["/dogs/{dogId}/photo"].post.requestBody.content)).toEqual(["multipart/form-data"]);
    expect(doc.components.securitySchemes.kennel_oauth.flows.clientCredentials.tokenUrl).toBe("https://auth.kennel.example.com/token");
    expect(loaded.notes.some((n) => n.startsWith("converted from Swagger 2.0 to OpenAPI 3.0"))).toBe(true);
    expect(progress).toContain("converted Swagger 2.0");
  });

  it("uses a title from the file name when info.title is missing, and reads a numeric version as text", async () => {
    const loaded = await loadOpenApi(path.join(fixtures, "untitled.yaml"));

    expect(loaded.document.info).toMatchObject({ title: "untitled", version: "2" });
    expect(loaded.notes).toEqual(expect.arrayContaining([expect.stringContaining('no info.title; "untitled" is used'), expect.stringContaining('read as "2"')]));
  });

  it("reads the create-fabric-handler fixtures", async () => {
    const files = readdirSync(templateFixtures).filter((f) => /\.(ya?ml|json)$/.test(f));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const loaded = await loadOpenApi(path.join(templateFixtures, file));
      expect(loaded.document.openapi, file).toMatch(/^3\.[01]\./);
      expect(Object.keys(loaded.document.paths ?? {}).length, file).toBeGreaterThan(0);
    }
  });

  it("reads every real-world document of test/fixtures/openapi that is there", async () => {
    const corpus = path.join(repoRoot, "test/fixtures/openapi");
    const files = existsSync(corpus) ? readdirSync(corpus).filter((f) => /\.(ya?ml|json)$/.test(f) && f !== "corpus.json") : [];
    for (const file of files) {
      const loaded = await loadOpenApi(path.join(corpus, file));
      expect(loaded.document.openapi, file).toMatch(/^3\.[01]/);
      expect(typeof loaded.document.info.title, file).toBe("string");
      expect(refsOf(loaded.document).every((ref) => ref.startsWith("#")), file).toBe(true);
    }
  }, 120_000);
});

describe("loadOpenApi: refusals", () => {
  it("refuses a missing file", async () => {
    await expect(loadOpenApi("no-such-document.yaml", { cwd: fixtures })).rejects.toThrow(
      new OpenApiImportError("cannot read the OpenAPI document no-such-document.yaml: no such file"),
    );
  });

  it("refuses a directory", async () => {
    await expect(loadOpenApi(fixtures)).rejects.toThrow(/it is not a file/);
  });

  it("refuses a file that is not YAML", async () => {
    const error = await loadOpenApi(path.join(fixtures, "broken.yaml")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenApiImportError);
    expect((error as Error).message).toMatch(/^cannot read the OpenAPI document .*broken\.yaml: /);
  });

  it("refuses OpenAPI 4 by its version", async () => {
    await expect(loadOpenApi(path.join(fixtures, "future-openapi4.yaml"))).rejects.toThrow(
      /future-openapi4\.yaml is OpenAPI "4\.0\.0", which is not supported: NodeFabric reads Swagger 2\.0 and OpenAPI 3\.0 and 3\.1/,
    );
  });

  it("refuses an unknown Swagger version, plain text, a list, and a document without paths", async () => {
    const server = await serve({
      "/swagger1.json": JSON.stringify({ swagger: "1.2", info: { title: "Old" } }),
      "/text.txt": "just some words",
      "/list.json": "[1, 2]",
      "/nothing.json": JSON.stringify({ info: { title: "x" }, paths: {} }),
      "/hooks.json": JSON.stringify({ openapi: "3.1.0", info: { title: "Hooks", version: "1" }, webhooks: { ping: {} } }),
    });
    try {
      await expect(loadOpenApi(`${server.url}/swagger1.json`)).rejects.toThrow(/is Swagger "1\.2", which is not supported/);
      await expect(loadOpenApi(`${server.url}/text.txt`)).rejects.toThrow(/is not an OpenAPI document: expected a JSON or YAML object, found plain text/);
      await expect(loadOpenApi(`${server.url}/list.json`)).rejects.toThrow(/found a list/);
      await expect(loadOpenApi(`${server.url}/nothing.json`)).rejects.toThrow(/has neither an "openapi" nor a "swagger" field/);
      await expect(loadOpenApi(`${server.url}/hooks.json`)).rejects.toThrow(/has no paths: .*only webhooks/);
    } finally {
      await server.close();
    }
  });

  it("refuses schemes other than files and http(s)", async () => {
    await expect(loadOpenApi("ftp://example.com/openapi.yaml")).rejects.toThrow(/only files and http\(s\) URLs are read/);
  });
});

describe("loadOpenApi: URLs", () => {
  let server: Served;
  beforeAll(async () => {
    server = await serve({
      "/specs/shop.yaml": readFileSync(path.join(fixtures, "shop.yaml"), "utf8"),
      "/specs/shop-common.yaml": readFileSync(path.join(fixtures, "shop-common.yaml"), "utf8"),
      "/specs/openapi": JSON.stringify({
        openapi: "3.0.1",
        info: { title: "Served", version: "1" },
        servers: [{ url: "/api/{version}", variables: { version: { default: "v3" } } }, { url: "https://elsewhere.example.com" }],
        paths: { "/x": { get: { servers: [{ url: "../other" }], responses: { "204": { description: "ok" } } } } },
      }),
    });
  });
  afterAll(() => server.close());

  it("fetches from loopback, as the person at the keyboard asked, with external $refs from the same server", async () => {
    const loaded = await loadOpenApi(`${server.url}/specs/shop.yaml`);

    expect(loaded.location).toBe(`${server.url}/specs/shop.yaml`);
    expect(loaded.document.info.title).toBe("Corner Shop");
    expect(refsOf(loaded.document).every((ref) => ref.startsWith("#"))).toBe(true);
    // The relative server URL is resolved against the document's URL, port kept.
    expect(loaded.document.servers).toEqual([{ url: `${server.url}/api/v1` }]);
    expect(loaded.notes).toContain(`relative server URL resolved against the document's URL: /api/v1 → ${server.url}/api/v1`);
  });

  it("reads a URL without an extension, resolving relative server URLs everywhere and keeping {variables}", async () => {
    const loaded = await loadOpenApi(`${server.url}/specs/openapi`);
    const doc = loaded.document as Record<string, any>;

    expect(doc.servers[0].url).toBe(`${server.url}/api/{version}`);
    expect(doc.servers[1].url).toBe("https://elsewhere.example.com");
    expect(doc.paths["/x"].get.servers[0].url).toBe(`${server.url}/other`);
  });

  it("says when the server answers an error", async () => {
    await expect(loadOpenApi(`${server.url}/specs/missing.yaml`)).rejects.toThrow(/^cannot read the OpenAPI document http:\/\/127\.0\.0\.1:\d+\/specs\/missing\.yaml: /);
  });
});

interface Served {
  url: string;
  close(): Promise<void>;
}

/** A loopback HTTP server answering fixed bodies by path, 404 otherwise. */
async function serve(files: Record<string, string>): Promise<Served> {
  const server: Server = createServer((req, res) => {
    const body = files[req.url ?? ""];
    if (body === undefined) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": req.url!.endsWith(".json") ? "application/json" : "text/plain" }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
