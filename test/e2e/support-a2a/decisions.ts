/**
 * The decision for every test of the A2A TCK's mandatory and capabilities categories, against `fabric dev`: data in
 * tck-decisions.json (read as well by `npm run a2a-tck`), so the test, docs/a2a.md ("TCK results") and a reader see the
 * same list.
 *
 * A test is either "passes" (it applies, and the fabric passes it), or "n/a:<reason key>" with the reason in `reasons`.
 * A reason key "undeclared:<capability>" says the card does not declare that capability: the test checks that the
 * card really does not (a capability the card declares has its tests apply). A test the run reports that has no decision
 * fails the test (a new TCK version), as does a decision for a test the run no longer reports.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { AgentCard } from "./servers.js";

export interface Decisions {
  /** The TCK commit these decisions were made against. */
  tck: string;
  reasons: Record<string, string>;
  tests: Record<string, string>;
}

export const DECISIONS_FILE = fileURLToPath(new URL("./tck-decisions.json", import.meta.url));

export function loadDecisions(): Decisions {
  return JSON.parse(readFileSync(DECISIONS_FILE, "utf8")) as Decisions;
}

export type Decision = { applies: true } | { applies: false; key: string; reason: string };

/** The decision for a test id, or undefined when it has none (or names a reason that does not exist). */
export function decisionFor(d: Decisions, id: string): Decision | undefined {
  const v = d.tests[id];
  if (v === undefined) return undefined;
  if (v === "passes") return { applies: true };
  if (!v.startsWith("n/a:")) return undefined;
  const key = v.slice(4);
  return key in d.reasons ? { applies: false, key, reason: d.reasons[key] } : undefined;
}

/**
 * Reason keys of the form undeclared:<capability> whose capability the card does declare (so the tests they excuse
 * apply after all), with how the card declares it.
 */
export function declaredButExcused(d: Decisions, card: AgentCard): string[] {
  const caps = (card.capabilities ?? {}) as Record<string, unknown>;
  const used = new Set(Object.values(d.tests).filter((v) => v.startsWith("n/a:undeclared:")).map((v) => v.slice(4)));
  return [...used].filter((key) => {
    const cap = key.slice("undeclared:".length);
    if (cap === "securitySchemes") return Object.keys(card.securitySchemes ?? {}).length > 0;
    // extensions is a list: declared when it names one.
    return Array.isArray(caps[cap]) ? (caps[cap] as unknown[]).length > 0 : caps[cap] === true;
  });
}
