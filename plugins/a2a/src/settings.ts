/**
 * The A2A server's settings: the entry's options (for a fabric built in code) over FABRIC_A2A_* environment
 * variables, over the defaults, all from one table (A2A_SETTINGS).
 */
import { defineSettings, setting, type SettingsValues } from "@nodefabric/core";

/** The A2A server's settings, each also an option of the entry (`a2aRoutes`) named as here. */
export const A2A_SETTINGS = defineSettings(
  "@nodefabric/plugin-a2a",
  {
    path: setting.string({ doc: "Where A2A's JSON-RPC binding is served on the gateway (HTTP+JSON under `<path>/rest`).", env: "FABRIC_A2A_PATH", default: "/a2a" }),
    include: setting.list({ doc: "node_type_id patterns (`*` any characters) to offer as skills; none: every one.", env: "FABRIC_A2A_INCLUDE", default: [] }),
    exclude: setting.list({ doc: "node_type_id patterns never offered; they win over include.", env: "FABRIC_A2A_EXCLUDE", default: [] }),
    maxSkills: setting.integer({ doc: "Most skills a card lists: a caller's catalogue larger than this is served in search mode (`mode: auto`), or, with `mode: skills`, listed in part (any node type may still be named).", env: "FABRIC_A2A_MAX_SKILLS", default: 200, min: 1, max: 10_000 }),
    mode: setting.oneOf(["auto", "skills", "search"], {
      doc: "`skills` (the card lists each node type as a skill), `search` (the card lists a `fabric.search` skill that finds node types through Selection, and the planner and agent when present) or `auto` (search when the caller's catalogue is larger than `maxSkills`), as MCP's FABRIC_MCP_MODE.",
      env: "FABRIC_A2A_MODE",
      default: "auto",
    }),
    refreshMs: setting.integer({ doc: "How long one read of the registry is reused (ms).", env: "FABRIC_A2A_REFRESH_MS", default: 2000, min: 0, max: 3_600_000 }),
    maxMessageBytes: setting.integer({ doc: "Largest A2A request body (bytes); a larger one is refused and starts nothing.", env: "FABRIC_A2A_MAX_MESSAGE_BYTES", default: 1_048_576, min: 1024, max: 67_108_864 }),
    planner: setting.oneOf(["auto", "on", "off"], {
      doc: "Whether a message naming no skill is a goal for `llm.planner`: `auto` when it is a skill and the environment names a model (FABRIC_LLM_BASE_URL and FABRIC_LLM_MODEL, FABRIC_LLM_CONFIG or FABRIC_LLM_PROFILE).",
      env: "FABRIC_A2A_PLANNER",
      default: "auto",
    }),
    policyFilter: setting.boolean({
      doc: "Ask the PDP which node types each caller may start, and list only those as skills (`off`, `false`, `0` or `no` turns it off).",
      env: "FABRIC_A2A_POLICY_FILTER",
      default: true,
      parse: (text) => !/^(off|false|0|no)$/i.test(text),
    }),
  },
  { intro: "The A2A server on the gateway ([a2a.md](a2a.md)). A fabric built in code gives the same settings as options of `a2aRoutes`, over these variables." },
);

export type A2aSettings = SettingsValues<(typeof A2A_SETTINGS)["fields"]> & {
  /** Longest a blocking SendMessage holds (s, at most 60); an option only. */
  waitSeconds: number;
};

/** Whether the environment names a model for handler-llm (docs/llm.md), for `planner: auto`. */
export function modelConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean((env.FABRIC_LLM_BASE_URL && env.FABRIC_LLM_MODEL) || env.FABRIC_LLM_CONFIG || env.FABRIC_LLM_PROFILE);
}

/** The entry's options over the FABRIC_A2A_* variables, over the defaults. */
export function a2aSettings(options: Partial<A2aSettings> = {}, env: NodeJS.ProcessEnv = process.env): A2aSettings {
  const given = Object.fromEntries(Object.entries(options).filter(([k, v]) => k in A2A_SETTINGS.fields && v !== undefined)) as Partial<A2aSettings>;
  const settings: A2aSettings = { ...A2A_SETTINGS.read(env), ...given, waitSeconds: Math.min(60, options.waitSeconds ?? 60) };
  const { path } = settings;
  if (!/^\/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]$/.test(path)) throw new Error(`the A2A path must start with "/" and not end with one, not ${JSON.stringify(path)}`);
  return settings;
}
