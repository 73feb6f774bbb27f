/**
 * The logger of every service: pino through fastify, one JSON object per line where the lines go to a pipe or a
 * collector, and readable lines (pino-pretty) on a terminal. `FABRIC_LOG_FORMAT=json|pretty` overrides the choice.
 * Each line written while an OpenTelemetry span is active carries that span's `trace_id` and `span_id`.
 */
import pinoPretty from "pino-pretty";
import { ConfigError } from "../config-error.js";
import { activeTraceFields } from "./tracing.js";

export const LOG_FORMATS = ["json", "pretty"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * The format of the log lines: `FABRIC_LOG_FORMAT` when set, else pretty when stdout (where the lines go) is a
 * terminal and JSON otherwise. An unknown `FABRIC_LOG_FORMAT` is a ConfigError.
 */
export function logFormatOf(env: NodeJS.ProcessEnv = process.env, stdoutIsTTY: boolean = process.stdout.isTTY === true): LogFormat {
  const asked = env.FABRIC_LOG_FORMAT?.trim().toLowerCase();
  if (asked === undefined || asked === "") return stdoutIsTTY ? "pretty" : "json";
  if ((LOG_FORMATS as readonly string[]).includes(asked)) return asked as LogFormat;
  throw new ConfigError(`FABRIC_LOG_FORMAT: expected one of ${LOG_FORMATS.join(", ")}, got ${JSON.stringify(env.FABRIC_LOG_FORMAT)}`);
}

/**
 * Adds the active span's ids to a line (pino `mixin`). Nothing is added with no span active, nor when the line or
 * its logger's bindings (a child logger made for a run) name a trace already, which would repeat the key. A fresh
 * object each time: pino merges the line into it.
 */
export function traceMixin(mergeObject: object, _level?: number, logger?: { bindings?: () => Record<string, unknown> }): Record<string, string> {
  const active = activeTraceFields();
  if (!active.trace_id) return {};
  const named = (mergeObject as { trace_id?: unknown }).trace_id;
  if (named !== undefined) return named === active.trace_id ? { span_id: active.span_id! } : {};
  if (logger?.bindings?.().trace_id !== undefined) return {};
  return active as Record<string, string>;
}

let prettyStream: ReturnType<typeof pinoPretty> | undefined;

/**
 * One pretty stream for every service of the process, written synchronously so no line is lost when the process
 * exits: time as HH:MM:ss.l (local), the level, the service before the message, no pid or hostname.
 */
function sharedPrettyStream(): ReturnType<typeof pinoPretty> {
  prettyStream ??= pinoPretty({
    sync: true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname,service",
    // The service goes before the message, where the eye finds it; the other fields follow on lines of their own.
    messageFormat: (log, messageKey) => {
      const service = log.service;
      const msg = log[messageKey];
      const text = typeof msg === "string" ? msg : msg === undefined ? "" : JSON.stringify(msg);
      return typeof service === "string" ? `(${service}) ${text}` : text;
    },
  });
  return prettyStream;
}

/** The fastify `logger` option of one service. */
export function serviceLoggerOptions(o: { level: string; service: string; format?: LogFormat }): Record<string, unknown> {
  const options: Record<string, unknown> = { level: o.level, base: { service: o.service }, mixin: traceMixin };
  if ((o.format ?? logFormatOf()) === "pretty") options.stream = sharedPrettyStream();
  return options;
}
