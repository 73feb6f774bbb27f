import { describe, it, expect, beforeAll } from "vitest";
import { existsSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { buildAtomicExecutor, handlersFromDefinitions } from "@nodefabric/core";
import { defineAtomic as defineAtomicHere, HandlerError as HandlerErrorHere } from "@nodefabric/sdk";
import { runHandler } from "@nodefabric/sdk/testing";

// A handler package may bring its own copy of the SDK (its devDependency, a bundled build) while the executor uses
// another. Definitions and HandlerErrors are branded with Symbol.for, so each copy recognises the other's. Here the
// second copy is the built sdk/dist, and the executor is core's, loaded from source.
const distIndex = fileURLToPath(new URL("../dist/index.js", import.meta.url));
type Sdk = typeof import("@nodefabric/sdk");
let other: Sdk;

beforeAll(async () => {
  if (!existsSync(distIndex)) throw new Error("sdk/dist is not built: run `npm run build -w @nodefabric/sdk` first");
  other = (await import(pathToFileURL(distIndex).href)) as Sdk;
});

const nodeType = (node_type_id: string) => ({
  node_type_id,
  version: "1.0.0",
  input_schema: { type: "object" },
  output_schema: { type: "object" },
  constraints: { gates: { side_effect_class: "read" as const } },
});

describe("two copies of the SDK", () => {
  it("are two copies: the dist's classes are not the source's", () => {
    expect(other.HandlerError).not.toBe(HandlerErrorHere);
    const err = new other.HandlerError("quota_exceeded", "over quota");
    expect(err instanceof HandlerErrorHere).toBe(false);
    expect(HandlerErrorHere.is(err)).toBe(true);
  });

  it("core's executor maps a HandlerError thrown from the other copy to its code, retryable and details", async () => {
    const definition = defineAtomicHere({
      nodeType: nodeType("copies.throws"),
      handler: () => {
        throw new other.HandlerError("quota_exceeded", "the API's daily quota is spent", { retryable: true, details: { resets_at: "00:00Z" } });
      },
    });
    const app = await buildAtomicExecutor({ logger: false, handlers: handlersFromDefinitions([definition]) });
    try {
      const res = await app.inject({
        method: "POST",
        url: "/v1/atomic-node-runs:execute",
        payload: { run_id: "run_copies", node_run_id: "nr_copies", node_type_ref: { node_type_id: "copies.throws", version: "1.0.0" }, inputs: {} },
      });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        state: "failed",
        error: { code: "quota_exceeded", message: "the API's daily quota is spent", retryable: true, details: { resets_at: "00:00Z" } },
      });
    } finally {
      await app.close();
    }
  });

  it("core's loader and the harness take a definition made by the other copy", async () => {
    const definition = other.defineAtomic({ nodeType: nodeType("copies.echo"), handler: (inputs: Record<string, unknown>) => ({ echoed: inputs }) });
    const handlers = handlersFromDefinitions([definition]);
    expect(handlers.find("copies.echo", "1.0.0")?.definition).toBe(definition);
    const result = await runHandler(definition, { hi: 1 });
    expect(result).toMatchObject({ state: "completed", outputs: { echoed: { hi: 1 } } });
  });
});
