/**
 * Where llm.chat's endpoint, model and key come from: FABRIC_LLM_* (or the ARP_LLM_* aliases), named profiles and
 * prices in a configuration file, and the clear errors a bad configuration gets. Also the strict form of a schema
 * that json_schema mode sends, and the error bodies of the servers llm.chat talks to.
 */
import { describe, it, expect, afterEach } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "@nodefabric/core";
import { costOf, dropStrictNulls, loadLlmConfig, priceOf, profileFor, readErrorBody, strictSchema } from "../src/index.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), "llm-config-"));
  dirs.push(d);
  return d;
}

describe("loadLlmConfig", () => {
  it("makes the profile default from FABRIC_LLM_*, and takes ARP_LLM_* as aliases", () => {
    const cwd = tmp();
    const fabric = loadLlmConfig({ FABRIC_LLM_BASE_URL: "https://api.openai.com/v1/", FABRIC_LLM_MODEL: "gpt-4o-mini", FABRIC_LLM_API_KEY: "sk-1" }, cwd);
    expect(profileFor(fabric, undefined)).toMatchObject({ name: "default", base_url: "https://api.openai.com/v1", model: "gpt-4o-mini", api_key: "sk-1", structured_output: "json_schema" });
    const arp = loadLlmConfig({ ARP_LLM_BASE_URL: "http://127.0.0.1:11434/v1", ARP_LLM_MODEL: "llama3.1" }, cwd);
    expect(profileFor(arp, undefined)).toMatchObject({ name: "default", base_url: "http://127.0.0.1:11434/v1", model: "llama3.1" });
    expect(profileFor(arp, undefined).api_key).toBeUndefined();
  });

  it("reads named profiles and prices from the file, keys from the variables it names, and FABRIC_LLM_PROFILE picks one", () => {
    const cwd = tmp();
    writeFileSync(
      path.join(cwd, "fabric.llm.json"),
      JSON.stringify({
        default_profile: "fast",
        profiles: { fast: { base_url: "https://api.openai.com/v1", model: "gpt-4o-mini", api_key_env: "OPENAI_API_KEY" }, local: { base_url: "http://127.0.0.1:8000/v1", model: "qwen", structured_output: "json_object" } },
        prices: { "gpt-4o-mini": { input_per_million: 0.15, output_per_million: 0.6 } },
      }),
    );
    const config = loadLlmConfig({ OPENAI_API_KEY: "sk-file" }, cwd);
    expect(profileFor(config, undefined)).toMatchObject({ name: "fast", api_key: "sk-file" });
    expect(profileFor(config, "local")).toMatchObject({ structured_output: "json_object" });
    expect(profileFor(loadLlmConfig({ FABRIC_LLM_PROFILE: "local" }, cwd), undefined).name).toBe("local");
    // A dated model version takes the price of the longest entry it starts with.
    expect(priceOf(config.prices, "gpt-4o-mini-2024-07-18")).toEqual({ input_per_million: 0.15, output_per_million: 0.6 });
    expect(costOf(priceOf(config.prices, "gpt-4o-mini"), 1_000_000, 1_000_000)).toBeCloseTo(0.75, 10);
    expect(costOf(priceOf(config.prices, "unknown"), 10, 10)).toBe(0);
  });

  it("reads the llm section of ./fabric.config.json, or of the fabric config FABRIC_LLM_CONFIG names", () => {
    const cwd = tmp();
    const section = { profiles: { local: { base_url: "http://127.0.0.1:11434/v1", model: "llama3.1" } }, default_profile: "local" };
    writeFileSync(path.join(cwd, "fabric.config.json"), JSON.stringify({ log_level: "info", llm: section }));
    expect(profileFor(loadLlmConfig({}, cwd), undefined)).toMatchObject({ name: "local", model: "llama3.1" });
    // The fabric takes the section as its own configuration's.
    expect(loadConfig({ cwd, env: {} }).llm).toEqual(section);
    const other = path.join(cwd, "prod.json");
    writeFileSync(other, JSON.stringify({ port_base: 9000, llm: { ...section, default_profile: undefined, profiles: { big: { base_url: "https://llm.example/v1", model: "big" } } } }));
    expect(profileFor(loadLlmConfig({ FABRIC_LLM_CONFIG: other }, cwd), "big").base_url).toBe("https://llm.example/v1");
  });

  it("names what is wrong: no endpoint, an unknown profile, a bad URL, a URL with credentials, a bad price", () => {
    const cwd = tmp();
    expect(() => profileFor(loadLlmConfig({}, cwd), undefined)).toThrow(/no LLM endpoint is configured: set FABRIC_LLM_BASE_URL/);
    expect(() => profileFor(loadLlmConfig({ FABRIC_LLM_BASE_URL: "http://h/v1", FABRIC_LLM_MODEL: "m" }, cwd), "nope")).toThrow(/no LLM profile is named "nope"; the configured ones are: default, scripted/);
    expect(() => loadLlmConfig({ FABRIC_LLM_BASE_URL: "ftp://h" }, cwd)).toThrow(/FABRIC_LLM_BASE_URL must be an http or https URL/);
    expect(() => loadLlmConfig({ FABRIC_LLM_BASE_URL: "https://user:pw@h/v1" }, cwd)).toThrow(/must not carry credentials/);
    const file = path.join(cwd, "bad.json");
    writeFileSync(file, JSON.stringify({ prices: { m: { input_per_million: -1, output_per_million: 1 } } }));
    expect(() => loadLlmConfig({ FABRIC_LLM_CONFIG: file }, cwd)).toThrow(/prices\.m in .*bad\.json must be/);
    writeFileSync(file, "{ not json");
    expect(() => loadLlmConfig({ FABRIC_LLM_CONFIG: file }, cwd)).toThrow(/could not be read as JSON/);
  });
});

describe("strictSchema", () => {
  it("requires every property, makes the optional ones nullable, and closes every object", () => {
    const { schema, strict } = strictSchema({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { a: { type: "string", default: "x" }, b: { type: "object", properties: { c: { enum: ["x", "y"] } } }, d: { type: "array", items: { type: "object", properties: { e: { type: "integer" } }, required: ["e"] } } },
      required: ["a"],
    });
    expect(strict).toBe(true);
    expect(schema).toEqual({
      type: "object",
      properties: {
        a: { type: "string" },
        b: { type: ["object", "null"], properties: { c: { anyOf: [{ enum: ["x", "y"] }, { type: "null" }] } }, required: ["c"], additionalProperties: false },
        d: { type: ["array", "null"], items: { type: "object", properties: { e: { type: "integer" } }, required: ["e"], additionalProperties: false } },
      },
      required: ["a", "b", "d"],
      additionalProperties: false,
    });
    expect(dropStrictNulls({ a: "x", b: null, d: [{ e: 1 }] }, { type: "object", properties: { a: {}, b: { type: "object" }, d: { type: "array" } }, required: ["a"] })).toEqual({ a: "x", d: [{ e: 1 }] });
  });

  it("is not strict for a free-form object", () => {
    expect(strictSchema({ type: "object", properties: { meta: { type: "object" } } }).strict).toBe(false);
    expect(strictSchema({ type: "object" }).strict).toBe(false);
  });
});

describe("readErrorBody", () => {
  it("reads OpenAI's, llama.cpp's, Ollama's and vLLM's shapes, and plain text", () => {
    expect(readErrorBody(JSON.stringify({ error: { message: "Incorrect API key provided", type: "invalid_request_error", param: null, code: "invalid_api_key" } }))).toEqual({ message: "Incorrect API key provided", type: "invalid_request_error", code: "invalid_api_key" });
    expect(readErrorBody(JSON.stringify({ error: { code: 401, message: "Invalid API Key", type: "authentication_error" } }))).toEqual({ message: "Invalid API Key", type: "authentication_error", code: 401 });
    expect(readErrorBody(JSON.stringify({ error: "model 'x' not found" }))).toEqual({ message: "model 'x' not found" });
    expect(readErrorBody(JSON.stringify({ object: "error", message: "bad", type: "BadRequestError", param: "response_format", code: 400 }))).toEqual({ message: "bad", type: "BadRequestError", param: "response_format", code: 400 });
    expect(readErrorBody("upstream connect error")).toEqual({ message: "upstream connect error" });
  });
});
