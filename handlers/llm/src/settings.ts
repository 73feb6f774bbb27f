/**
 * The variables `llm.chat` reads for its endpoint (config.ts explains how they combine with a profiles file); each
 * also has an older `ARP_LLM_*` name. docs/configuration.md is generated from this table.
 */
import { defineSettings, setting } from "@nodefabric/sdk";

const alias = (name: string) => [`ARP_LLM_${name}`];

export const LLM_SETTINGS = defineSettings(
  "@nodefabric/handler-llm",
  {
    baseUrl: setting.string({ doc: "The OpenAI-compatible API's base URL; with it, the profile `default` exists.", env: "FABRIC_LLM_BASE_URL", envAliases: alias("BASE_URL") }),
    apiKey: setting.string({ doc: "The key of the `default` profile, sent only to its base URL's host.", env: "FABRIC_LLM_API_KEY", envAliases: alias("API_KEY") }),
    model: setting.string({ doc: "The model of the `default` profile.", env: "FABRIC_LLM_MODEL", envAliases: alias("MODEL") }),
    structuredOutput: setting.oneOf(["json_schema", "json_object", "tool"], {
      doc: "The first structured-output mode the `default` profile tries; calls fall back from there.",
      env: "FABRIC_LLM_STRUCTURED_OUTPUT",
      envAliases: alias("STRUCTURED_OUTPUT"),
      default: "json_schema",
    }),
    timeoutMs: setting.number({ doc: "The `default` profile's per-request timeout (ms), within the execution's deadline.", env: "FABRIC_LLM_TIMEOUT_MS", envAliases: alias("TIMEOUT_MS"), default: 120_000, min: 1 }),
    config: setting.string({
      doc: "A JSON file of named `profiles` and per-model `prices` (default: ./fabric.llm.json, else the `llm` section of ./fabric.config.json).",
      env: "FABRIC_LLM_CONFIG",
      envAliases: alias("CONFIG"),
    }),
    profile: setting.string({ doc: "The profile a call that names none uses; `scripted` answers from fixtures with no model.", env: "FABRIC_LLM_PROFILE", envAliases: alias("PROFILE") }),
    fixtures: setting.string({ doc: "The scripted profile's fixtures, a JSON file (default: the package's demo fixtures).", env: "FABRIC_LLM_FIXTURES", envAliases: alias("FIXTURES") }),
  },
  { intro: "`llm.chat` and `llm.planner` ([llm.md](llm.md)): where model calls go, read from the executor's environment, never from a run." },
);

/** What the environment sets; a value that is not of its type is kept as it is, for the caller's own message. */
export function llmEnvironment(env: NodeJS.ProcessEnv) {
  return LLM_SETTINGS.fromEnv(env, { invalid: "keep" });
}
