/**
 * FABRIC_CONSOLE_REDACT: what the console hides of NodeRuns' inputs, outputs and errors, such as the prompts and answers
 * of `llm.chat` calls: a regular expression, or a JSON array of them (JavaScript syntax, matched case-sensitively
 * unless written with `(?i)`-free alternatives). Every match in a string the node panel shows becomes `[redacted]`.
 * Read when the console is registered, so a bad value stops the start.
 *
 * This is a display rule for the people looking at the console, not access control: the API still answers the stored
 * values to any caller allowed to read the run.
 */

/** The variable's name, as the errors and the docs spell it. */
export const REDACT_VARIABLE = "FABRIC_CONSOLE_REDACT";
/** At most this many expressions, each at most this long. */
const MAX_RULES = 50;
const MAX_LENGTH = 1000;

/** The expressions in a variable's text (undefined when blank; CONSOLE_SETTINGS reads the variable); throws a sentence naming the variable when one is bad. */
export function parseRedactRules(text: string): string[] | undefined {
  const raw = text.trim();
  if (!raw) return undefined;
  let rules: unknown = raw;
  if (raw.startsWith("[")) {
    try {
      rules = JSON.parse(raw);
    } catch (err) {
      throw new Error(`${REDACT_VARIABLE} starts with "[" but is not a JSON array of strings: ${(err as Error).message}`);
    }
  }
  const list = Array.isArray(rules) ? rules : [rules];
  if (list.length > MAX_RULES) throw new Error(`${REDACT_VARIABLE} holds ${list.length} expressions; at most ${MAX_RULES}`);
  return list.map((r, i) => {
    if (typeof r !== "string" || r === "" || r.length > MAX_LENGTH) throw new Error(`${REDACT_VARIABLE}[${i}] must be a regular expression of 1 to ${MAX_LENGTH} characters`);
    try {
      new RegExp(r, "g");
    } catch (err) {
      throw new Error(`${REDACT_VARIABLE}[${i}] ${JSON.stringify(r)} is not a valid regular expression: ${(err as Error).message}`);
    }
    return r;
  });
}
