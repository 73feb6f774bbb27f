/**
 * FABRIC_CONSOLE_TRACE_URL: where the run page links a run's trace, as a URL template with `{trace_id}` (Jaeger's
 * `http://127.0.0.1:16686/trace/{trace_id}`, or a Grafana Tempo explore URL). The page fills it with the trace id
 * of the Run's run_context, URL-encoded. Read when the console is registered, so a bad value stops the start.
 */

/** The variable's name, as the errors and the README spell it. */
export const TRACE_URL_VARIABLE = "FABRIC_CONSOLE_TRACE_URL";
/** What the page puts the trace id in place of. */
export const TRACE_ID_PLACEHOLDER = "{trace_id}";

/**
 * The trace URL template in a variable's text, or undefined when it is blank (CONSOLE_SETTINGS reads the variable).
 * Throws a sentence naming the variable when it is not an absolute http(s) URL holding `{trace_id}`.
 */
export function parseTraceUrl(raw: string): string | undefined {
  const value = raw.trim();
  if (!value) return undefined;
  const bad = (why: string) => new Error(`${TRACE_URL_VARIABLE}=${JSON.stringify(raw)} ${why}; for example ${TRACE_URL_VARIABLE}=http://127.0.0.1:16686/trace/${TRACE_ID_PLACEHOLDER}`);
  let url: URL;
  try {
    // The placeholder filled with a trace id's shape, so only the template's own parts are judged.
    url = new URL(value.replaceAll(TRACE_ID_PLACEHOLDER, "0".repeat(32)));
  } catch {
    throw bad("is not an absolute URL");
  }
  // Only a page the browser navigates to: never javascript:, data: or a file.
  if (url.protocol !== "http:" && url.protocol !== "https:") throw bad(`uses ${url.protocol} where only http: and https: are allowed`);
  if (!value.includes(TRACE_ID_PLACEHOLDER)) throw bad(`does not hold ${TRACE_ID_PLACEHOLDER}, where the console puts a run's trace id`);
  return value;
}
