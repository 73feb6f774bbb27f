/**
 * Where `llm.chat` sends its calls, read from the executor's environment and an optional configuration file, never
 * from a run: a run may pick a named profile, but it can never name an endpoint or see a key.
 *
 * - `FABRIC_LLM_BASE_URL`, `FABRIC_LLM_API_KEY`, `FABRIC_LLM_MODEL` (or `ARP_LLM_BASE_URL`, `ARP_LLM_API_KEY`,
 *   `ARP_LLM_MODEL`) make the profile `default`;
 * - `FABRIC_LLM_CONFIG` names a JSON file (default: `./fabric.llm.json`, else the `llm` section of
 *   `./fabric.config.json`) with named `profiles` and a per-model `prices` table;
 * - `FABRIC_LLM_PROFILE` (or `ARP_LLM_PROFILE`) chooses the profile used when a call names none. The profile
 *   `scripted` answers from `FABRIC_LLM_FIXTURES` (a JSON file) with no model at all.
 *
 * A key is sent only to the host of its profile's `base_url`: requests never follow redirects. A profile can instead
 * name an executor secret (`api_key_secret`), which the executor hands out only for the hosts the operator bound it to
 * (`executor.secret_hosts`).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { llmEnvironment } from "./settings.js";
import type { HandlerError } from "@nodefabric/sdk";
import { fail } from "./failure-codes.js";

/** Prices in the unit of the run's `max_cost`, per million tokens. */
export interface ModelPrice {
  input_per_million: number;
  output_per_million: number;
}

export type StructuredMode = "json_schema" | "json_object" | "tool";

export interface LlmProfile {
  name: string;
  /** The API's base URL, e.g. https://api.openai.com/v1; requests go to `<base_url>/chat/completions`. */
  base_url: string;
  model: string;
  /** The key itself (from the environment; a configuration file names a variable or a secret instead). */
  api_key?: string;
  /** The executor secret holding the key, handed out through ctx.egress only for hosts the operator bound it to. */
  api_key_secret?: string;
  /** The first structured-output mode to try (default json_schema); the call falls back from there. */
  structured_output: StructuredMode;
  /** Per-request timeout in ms (default 120000), within the execution's deadline. */
  timeout_ms: number;
  /** Answer from fixtures with no model (the `scripted` profile). */
  scripted?: { fixtures: unknown[] };
}

export interface LlmConfig {
  profiles: Map<string, LlmProfile>;
  default_profile?: string;
  prices: Record<string, ModelPrice>;
  /** Where the file came from, for messages. */
  source: string;
}

interface FileProfile {
  base_url?: string;
  model?: string;
  api_key_env?: string;
  api_key_secret?: string;
  structured_output?: StructuredMode;
  timeout_ms?: number;
  fixtures?: string;
}

interface FileConfig {
  default_profile?: string;
  profiles?: Record<string, FileProfile>;
  prices?: Record<string, ModelPrice>;
}

const MODES: StructuredMode[] = ["json_schema", "json_object", "tool"];
const DEFAULT_TIMEOUT_MS = 120_000;


function configError(message: string, details: Record<string, unknown> = {}): HandlerError {
  return fail("invalid_configuration", message, { retryable: false, details });
}

function checkBaseUrl(value: unknown, where: string): string {
  let url: URL | undefined;
  try {
    url = typeof value === "string" ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw configError(`${where} must be an http or https URL, such as https://api.openai.com/v1`, { field: where });
  if (url.username || url.password) throw configError(`${where} must not carry credentials; set the key in FABRIC_LLM_API_KEY or a secret`, { field: where });
  return url.href.replace(/\/+$/, "");
}

function readJson(file: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw configError(`${what} ${file} could not be read as JSON: ${(err as Error).message}`, { file });
  }
}

/** The fixtures of the scripted profile: FABRIC_LLM_FIXTURES, else the package's demo fixtures. */
function fixturesOf(file: string | undefined, baseDir: string): unknown[] {
  const resolved = file ? path.resolve(baseDir, file) : new URL("../scripted/demo-fixtures.json", import.meta.url).pathname;
  const data = readJson(resolved, "the scripted profile's fixtures file");
  const list = Array.isArray(data) ? data : (data as { fixtures?: unknown }).fixtures;
  if (!Array.isArray(list)) throw configError(`the fixtures file ${resolved} must hold an array of fixtures, or { "fixtures": [...] }`, { file: resolved });
  return list;
}

/** Reads the configuration from `e` (and the file it names); cached by the handler per environment snapshot. */
export function loadLlmConfig(e: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): LlmConfig {
  const profiles = new Map<string, LlmProfile>();
  const vars = llmEnvironment(e);
  const named = vars.config;
  // FABRIC_LLM_CONFIG, else ./fabric.llm.json, else the `llm` section of ./fabric.config.json. A file whose top level
  // has an `llm` object (a fabric.config.json) is read for that section.
  const candidates = named ? [path.resolve(cwd, named)] : [path.join(cwd, "fabric.llm.json"), path.join(cwd, "fabric.config.json")];
  const file = named ? candidates[0] : candidates.find((f) => existsSync(f)) ?? candidates[0];
  let fileConfig: FileConfig = {};
  let source = "the environment";
  if (named || existsSync(file)) {
    const data = readJson(file, "the LLM configuration file");
    if (typeof data !== "object" || data === null || Array.isArray(data)) throw configError(`the LLM configuration file ${file} must hold a JSON object`, { file });
    const section = (data as { llm?: unknown }).llm;
    if (section !== undefined && (typeof section !== "object" || section === null || Array.isArray(section))) throw configError(`llm in ${file} must be an object of profiles and prices`, { file });
    const isFabricConfig = path.basename(file) === "fabric.config.json" || section !== undefined;
    fileConfig = (isFabricConfig ? (section ?? {}) : data) as FileConfig;
    source = isFabricConfig ? `${file} (llm)` : file;
  }
  const baseDir = path.dirname(file);
  for (const [name, p] of Object.entries(fileConfig.profiles ?? {})) {
    const where = `profiles.${name}`;
    if (typeof p !== "object" || p === null) throw configError(`${where} in ${source} must be an object`, { field: where });
    if (p.structured_output !== undefined && !MODES.includes(p.structured_output)) throw configError(`${where}.structured_output must be one of ${MODES.join(", ")}`, { field: `${where}.structured_output` });
    if (name === "scripted" || p.fixtures !== undefined) {
      profiles.set(name, { name, base_url: "scripted://local", model: p.model ?? "scripted-model", structured_output: p.structured_output ?? "json_schema", timeout_ms: DEFAULT_TIMEOUT_MS, scripted: { fixtures: fixturesOf(p.fixtures, baseDir) } });
      continue;
    }
    if (typeof p.model !== "string" || p.model === "") throw configError(`${where}.model must name a model`, { field: `${where}.model` });
    const profile: LlmProfile = {
      name,
      base_url: checkBaseUrl(p.base_url, `${where}.base_url`),
      model: p.model,
      structured_output: p.structured_output ?? "json_schema",
      timeout_ms: typeof p.timeout_ms === "number" && p.timeout_ms > 0 ? p.timeout_ms : DEFAULT_TIMEOUT_MS,
    };
    if (p.api_key_env) profile.api_key = e[p.api_key_env];
    if (p.api_key_secret) profile.api_key_secret = p.api_key_secret;
    profiles.set(name, profile);
  }
  const baseUrl = vars.baseUrl;
  if (baseUrl) {
    const profile: LlmProfile = {
      name: "default",
      base_url: checkBaseUrl(baseUrl, e.FABRIC_LLM_BASE_URL ? "FABRIC_LLM_BASE_URL" : "ARP_LLM_BASE_URL"),
      model: vars.model ?? "",
      structured_output: vars.structuredOutput ?? "json_schema",
      timeout_ms: Number(vars.timeoutMs) > 0 ? Number(vars.timeoutMs) : DEFAULT_TIMEOUT_MS,
    };
    if (!MODES.includes(profile.structured_output)) throw configError(`FABRIC_LLM_STRUCTURED_OUTPUT must be one of ${MODES.join(", ")}`);
    const key = vars.apiKey;
    if (key) profile.api_key = key;
    profiles.set("default", profile);
  }
  if (!profiles.has("scripted")) {
    profiles.set("scripted", {
      name: "scripted",
      base_url: "scripted://local",
      model: "scripted-model",
      structured_output: "json_schema",
      timeout_ms: DEFAULT_TIMEOUT_MS,
      get scripted() {
        // Read on first use: a fabric that never uses the scripted profile never reads its fixtures.
        const value = { fixtures: fixturesOf(vars.fixtures, cwd) };
        Object.defineProperty(this, "scripted", { value });
        return value;
      },
    });
  }
  const prices: Record<string, ModelPrice> = {};
  for (const [model, price] of Object.entries(fileConfig.prices ?? {})) {
    if (typeof price?.input_per_million !== "number" || typeof price?.output_per_million !== "number" || price.input_per_million < 0 || price.output_per_million < 0) {
      throw configError(`prices.${model} in ${source} must be { "input_per_million": number ≥ 0, "output_per_million": number ≥ 0 }`, { field: `prices.${model}` });
    }
    prices[model] = price;
  }
  const chosen = vars.profile ?? fileConfig.default_profile ?? (profiles.has("default") ? "default" : undefined);
  return { profiles, default_profile: chosen, prices, source };
}

/** The profile a call uses: the one it names, else the configured default. */
export function profileFor(config: LlmConfig, asked: string | undefined): LlmProfile {
  const name = asked ?? config.default_profile;
  if (!name) {
    throw configError(
      "no LLM endpoint is configured: set FABRIC_LLM_BASE_URL and FABRIC_LLM_MODEL (and FABRIC_LLM_API_KEY), name profiles in FABRIC_LLM_CONFIG, or try FABRIC_LLM_PROFILE=scripted",
    );
  }
  const profile = config.profiles.get(name);
  if (!profile) {
    throw configError(`no LLM profile is named "${name}"; the configured ones are: ${[...config.profiles.keys()].join(", ")}`, { profile: name, profiles: [...config.profiles.keys()] });
  }
  return profile;
}

/** The price of a model: an exact entry, else the longest entry that prefixes it (dated model versions). */
export function priceOf(prices: Record<string, ModelPrice>, model: string): ModelPrice | undefined {
  if (prices[model]) return prices[model];
  let best: string | undefined;
  for (const k of Object.keys(prices)) if (model.startsWith(k) && (!best || k.length > best.length)) best = k;
  return best ? prices[best] : undefined;
}

export function costOf(price: ModelPrice | undefined, promptTokens: number, completionTokens: number): number {
  if (!price) return 0;
  return (promptTokens * price.input_per_million + completionTokens * price.output_per_million) / 1_000_000;
}
