import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { HttpClient } from "../src/clients/http-client.js";
import { FabricError, isMalformedSuccess } from "../src/http/errors.js";

// A peer answers with whatever it likes; the client reads at most maxResponseBytes of it, so a broken or hostile
// executor cannot make the coordinator hold an answer of any size.
describe("the service client bounds the answers it reads", () => {
  let server: Server;
  let base: string;
  let sent = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      const size = Number(new URL(req.url!, "http://x").searchParams.get("size"));
      const chunked = req.url!.includes("chunked");
      res.writeHead(200, chunked ? { "content-type": "application/json" } : { "content-type": "application/json", "content-length": String(size + 2) });
      // A JSON string of `size` bytes, written in 64 KiB pieces, so a chunked answer has no length up front.
      res.write('"');
      let left = size;
      const piece = Buffer.alloc(64 * 1024, "a");
      const pump = () => {
        while (left > 0) {
          const n = Math.min(left, piece.length);
          left -= n;
          sent += n;
          if (!res.write(piece.subarray(0, n))) return void res.once("drain", pump);
        }
        res.end('"');
      };
      res.on("error", () => undefined);
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("reads an answer within the bound", async () => {
    const client = new HttpClient(base, { maxResponseBytes: 1024 * 1024 });
    const body = await client.json<string>("GET", "/?size=500000&chunked");
    expect(body.length).toBe(500_000);
    await client.close();
  });

  it("refuses a chunked answer past the bound without reading it all", async () => {
    const client = new HttpClient(base, { maxResponseBytes: 1024 * 1024 });
    sent = 0;
    const err = await client.json("GET", "/?size=50000000&chunked").catch((e) => e);
    expect(FabricError.is(err)).toBe(true);
    expect(err.details).toMatchObject({ status: 200, reason: "body_too_large", limit: 1024 * 1024 });
    expect(err.retryable).toBe(false);
    expect(isMalformedSuccess(err)).toBe(true);
    // The server stops once the client hangs up: far less than 50 MB went out.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(sent).toBeLessThan(20_000_000);
    await client.close();
  });

  it("refuses an answer whose Content-Length is past the bound before reading it", async () => {
    const client = new HttpClient(base, { maxResponseBytes: 1024 * 1024 });
    const err = await client.json("GET", "/?size=5000000").catch((e) => e);
    expect(err.details).toMatchObject({ status: 200, reason: "body_too_large" });
    expect(err.message).toContain("larger than 1048576 bytes");
    await client.close();
  });
});
