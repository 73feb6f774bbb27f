/**
 * The console's settings, read when it is registered so a bad value stops the start (docs/configuration.md is
 * generated from this table).
 */
import { defineSettings, setting } from "@nodefabric/core";
import { parseTraceUrl, TRACE_URL_VARIABLE } from "./trace-url.js";
import { parseRedactRules, REDACT_VARIABLE } from "./redact-rule.js";

export const CONSOLE_SETTINGS = defineSettings(
  "@nodefabric/plugin-console",
  {
    traceUrl: setting.custom<string>()({
      doc: "Where the run page links a run's trace: an http(s) URL template holding `{trace_id}`, such as Jaeger's http://127.0.0.1:16686/trace/{trace_id}.",
      env: TRACE_URL_VARIABLE,
      parse: parseTraceUrl,
      schema: { type: "string" },
    }),
    redact: setting.custom<string[]>()({
      doc: 'What the node panel hides of inputs, outputs and errors: a regular expression, or a JSON array of up to 50; matches become "[redacted]".',
      env: REDACT_VARIABLE,
      default: [],
      parse: parseRedactRules,
      schema: { type: "array", items: { type: "string" } },
    }),
  },
  { intro: "The run console in the browser ([its README](../plugins/console/README.md))." },
);

/** The trace URL template from the environment, or null when the variable is unset or empty; throws a sentence naming the variable when it is bad. */
export function traceUrlTemplate(env: NodeJS.ProcessEnv): string | null {
  return CONSOLE_SETTINGS.read(env).traceUrl ?? null;
}

/** The expressions in the environment ([] when unset or empty); throws a sentence naming the variable when one is bad. */
export function redactRules(env: NodeJS.ProcessEnv): string[] {
  return CONSOLE_SETTINGS.read(env).redact;
}
