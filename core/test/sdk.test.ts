import { describe, it, expect } from "vitest";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { validatorFor } from "@nodefabric/schemas";
import { defineAtomic, HandlerError, isAtomicDefinition, isDefinition, SDK_VERSION } from "@nodefabric/core/sdk";

const corePkg = JSON.parse(readFileSync(fileURLToPath(new URL("../package.json", import.meta.url)), "utf8")) as { version: string };

const nodeType = {
  node_type_id: "sdk.test",
  version: "2.3.4",
  description: "a test node type",
  input_schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
  output_schema: { type: "object" },
  constraints: { gates: { side_effect_class: "read" as const } },
};

describe("defineAtomic", () => {
  it("returns a branded atomic definition whose nodeType is a valid v1 NodeType with kind atomic", () => {
    const handler = (inputs: { n: number }) => ({ doubled: inputs.n * 2 });
    const def = defineAtomic({ nodeType, handler });
    expect(def.kind).toBe("atomic");
    expect(def.sdkVersion).toBe(SDK_VERSION);
    expect(def.handler).toBe(handler);
    expect(def.nodeType).toEqual({ ...nodeType, kind: "atomic" });
    expect(validatorFor("node_type")(def.nodeType)).toBe(true);
    expect((def as unknown as Record<symbol, unknown>)[Symbol.for("nodefabric.definition")]).toBe(true);
    expect(isAtomicDefinition(def)).toBe(true);
    expect(isDefinition(def)).toBe(true);
    // The caller's object is not changed: kind is added to a copy.
    expect("kind" in nodeType).toBe(false);
  });

  it("carries the SDK version, which is core's package version", () => {
    expect(SDK_VERSION).toBe(corePkg.version);
  });

  it("recognises definitions made by another copy of the SDK, and nothing else", () => {
    const foreign = { kind: "atomic", sdkVersion: SDK_VERSION, nodeType: { ...nodeType, kind: "atomic" }, handler: () => ({}) };
    expect(isAtomicDefinition(foreign)).toBe(false);
    Object.defineProperty(foreign, Symbol.for("nodefabric.definition"), { value: true });
    expect(isAtomicDefinition(foreign)).toBe(true);
    expect(isAtomicDefinition({ ...nodeType })).toBe(false);
    expect(isAtomicDefinition(null)).toBe(false);
    expect(isAtomicDefinition("demo.echo")).toBe(false);
  });

  it("refuses a definition without id, version or handler, naming what is missing", () => {
    expect(() => defineAtomic({ nodeType: { ...nodeType, node_type_id: "" }, handler: () => ({}) })).toThrow(/node_type_id/);
    expect(() => defineAtomic({ nodeType: { ...nodeType, version: "" }, handler: () => ({}) })).toThrow(/version of sdk\.test/);
    expect(() => defineAtomic({ nodeType, handler: undefined as never })).toThrow(/handler of sdk\.test must be a function/);
  });
});

describe("HandlerError", () => {
  it("keeps code, message, retryable, details and cause", () => {
    const cause = new Error("socket hang up");
    const err = new HandlerError("upstream_error", "weather API answered 503", { retryable: true, details: { status: 503 }, cause });
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("HandlerError");
    expect(err.code).toBe("upstream_error");
    expect(err.message).toBe("weather API answered 503");
    expect(err.retryable).toBe(true);
    expect(err.details).toEqual({ status: 503 });
    expect(err.cause).toBe(cause);
    expect(HandlerError.is(err)).toBe(true);
  });

  it("leaves retryable and details out when not given", () => {
    const err = new HandlerError("bad_city", "no such city");
    expect("retryable" in err).toBe(false);
    expect("details" in err).toBe(false);
  });

  it("is recognised across a second copy of the SDK (same Symbol.for brand), and plain errors are not", () => {
    // What another installed copy of the SDK would make: a different class, the same global symbol.
    class OtherCopyHandlerError extends Error {
      readonly code = "quota_exceeded";
      readonly retryable = false;
    }
    const other = new OtherCopyHandlerError("over quota");
    expect(HandlerError.is(other)).toBe(false);
    Object.defineProperty(other, Symbol.for("nodefabric.HandlerError"), { value: true });
    expect(HandlerError.is(other)).toBe(true);
    expect(other instanceof HandlerError).toBe(false);

    const plain = Object.assign(new Error("boom"), { code: "x" });
    expect(HandlerError.is(plain)).toBe(false);
    expect(HandlerError.is(undefined)).toBe(false);
    expect(HandlerError.is({ [Symbol.for("nodefabric.HandlerError")]: true })).toBe(false);
  });

  it("refuses an empty code and non-object details", () => {
    expect(() => new HandlerError("", "x")).toThrow(/code must be a non-empty string/);
    expect(() => new HandlerError("c", "x", { details: [1, 2] as never })).toThrow(/details must be a plain object/);
  });
});

describe("the SDK stays light", () => {
  it("imports nothing heavy: no fastify, undici, better-sqlite3, ajv or store", () => {
    const dir = fileURLToPath(new URL("../../sdk/src/", import.meta.url));
    const files = ["index.ts", "define-atomic.ts", "handler-error.ts", "types.ts"];
    const version = readFileSync(fileURLToPath(new URL("../../sdk/src/version.ts", import.meta.url)), "utf8");
    for (const source of [...files.map((f) => readFileSync(dir + f, "utf8")), version]) {
      const imports = [...source.matchAll(/^import\s+(?!type\b)[^;]*?from\s+"([^"]+)"/gm)].map((m) => m[1]);
      for (const spec of imports) {
        expect(spec, `runtime import ${spec}`).toMatch(/^\.\.?\//);
      }
    }
  });
});
