/**
 * The failure codes (docs/errors.md): every code a package's source raises is in a block, with its meaning and
 * retryability; no block holds a code that nothing raises (unless reserved, with the reason); each code is in one
 * block; former spellings are raised nowhere; and docs/errors.md is what scripts/docs/errors.mjs makes of the blocks.
 */
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { glob } from "tinyglobby";
import { errorsPage, loadCatalogues, PAGE, type FailureCodeSpec as Spec } from "../scripts/docs/errors.mjs";

const repo = fileURLToPath(new URL("..", import.meta.url));

/** The sources of every package: what ships, and the scaffolder's templates (code handler authors start from). */
const SOURCES = [
  "sdk/src/**/*.ts",
  "core/src/**/*.ts",
  "handlers/*/src/**/*.ts",
  "plugins/*/src/**/*.ts",
  "importers/*/src/**/*.ts",
  "templates/*/src/**/*.ts",
  "templates/*/templates/**/src/**/*.ts",
];

const LITERAL = /"([a-z][a-z0-9]*(?:_[a-z0-9]+)*)"/g;

/**
 * Where a source raises a failure code, as it is written in this repository:
 * - `new HandlerError("code", …)` and core's `errorBody("code", …)`: every literal of the first argument (it may be a
 *   choice, `cond ? "a" : "b"`);
 * - a block's helper, `fail("code", …)` (`failWith`);
 * - an error object written out, `{ code: "code", … }` (the runtimes' results, ErrorEnvelopes written by hand);
 * - an error class's fixed code, `readonly code = "code"`.
 * A code passed on from another error (`new HandlerError(err.code, …)`) was raised, and found, where it was made.
 */
const PATTERNS: Array<{ name: string; re: RegExp; all: boolean }> = [
  { name: "HandlerError or errorBody", re: /\b(?:new HandlerError|errorBody)(?:<[^>(]*>)?\(\s*([^,]*?),/g, all: true },
  { name: "fail", re: /\bfail\(\s*("[^"]*")/g, all: false },
  { name: "code:", re: /(?<![\w.])code: ("[^"]*")/g, all: false },
  { name: "readonly code", re: /\breadonly code = ("[^"]*")/g, all: false },
];

/** Each failure code raised in `text`, with the pattern that found it. */
function codesRaisedIn(text: string): Array<{ code: string; pattern: string; line: number }> {
  const found: Array<{ code: string; pattern: string; line: number }> = [];
  for (const { name, re, all } of PATTERNS) {
    for (const m of text.matchAll(re)) {
      const line = text.slice(0, m.index).split("\n").length;
      const literals = [...m[1]!.matchAll(LITERAL)].map((l) => l[1]!);
      for (const code of all ? literals : literals.slice(0, 1)) found.push({ code, pattern: name, line });
    }
  }
  return found;
}

const files = (await glob(SOURCES, { cwd: repo, ignore: ["**/node_modules/**", "**/dist/**", "**/*.d.ts"] })).sort();
const raised = new Map<string, string[]>();
for (const file of files) {
  for (const { code, line, pattern } of codesRaisedIn(readFileSync(path.join(repo, file), "utf8"))) {
    raised.set(code, [...(raised.get(code) ?? []), `${file}:${line} (${pattern})`]);
  }
}

const loaded = await loadCatalogues();
const catalogued = new Map<string, { block: string; spec: Spec }[]>();
for (const b of loaded.blocks) {
  for (const [code, spec] of Object.entries(b.codes)) catalogued.set(code, [...(catalogued.get(code) ?? []), { block: `${b.package} (${b.name})`, spec }]);
}

describe("the failure codes the sources raise", () => {
  it("the scan finds codes in each of its patterns, and reads a choice of codes whole", () => {
    const sample = [
      'throw new HandlerError("upstream_error", "m", { retryable: true });',
      'throw new HandlerError<SdkFailureCode>(\n  "egress_denied", "m");',
      'errorBody(e.code === "x" ? "unknown_node_type" : "executor_unavailable", m)',
      'throw fail("mapping_error", `m`);',
      'return { error: { code: "timeout", message } };',
      'readonly code = "child_failed";',
      'if (err.code === "configuration_error") {} // recognised, not raised',
      'new HandlerError(err.code, "m"); reason_code: "no_permit"',
    ].join("\n");
    expect(codesRaisedIn(sample).map((f) => f.code)).toEqual(["upstream_error", "egress_denied", "x", "unknown_node_type", "executor_unavailable", "mapping_error", "timeout", "child_failed"]);
    expect(files.length).toBeGreaterThan(100);
    // Codes from the runtime, the engine, the composite executor and each handler package: the scan reaches them all.
    for (const code of ["timeout", "policy_denied", "invalid_request", "mapping_error", "tool_error", "llm_refusal", "invalid_configuration"]) {
      expect(raised.has(code), code).toBe(true);
    }
  });

  it("each is in a block, with its meaning and retryability (or, written out as an ErrorEnvelope, a request error code)", () => {
    const missing = [...raised]
      .filter(([code, where]) => {
        if (catalogued.has(code)) return false;
        // An ErrorEnvelope written out by hand (`{ error: { code: "route_not_found" } }`) answers a request.
        return !(code in loaded.requestStatus && where.every((w) => w.endsWith("(code:)")));
      })
      .map(([code, where]) => `${code}: ${where.join(", ")}`);
    expect(missing, `raised but in no block (add them to the package's src/failure-codes.ts):\n${missing.join("\n")}`).toEqual([]);
    for (const [code, entries] of catalogued) {
      for (const { spec } of entries) {
        expect(spec.meaning.length, code).toBeGreaterThan(10);
        expect([true, false, "depends"], code).toContain(spec.retryable);
        expect(spec.raisedBy.length, code).toBeGreaterThan(2);
      }
    }
  });

  it("no block holds a code that nothing raises, unless it is reserved with a reason", () => {
    const dead = [...catalogued]
      .filter(([code, entries]) => !raised.has(code) && entries.some((e) => e.spec.reserved === undefined))
      .map(([code, entries]) => `${code} (${entries.map((e) => e.block).join(", ")})`);
    expect(dead, `in a block, raised nowhere (remove, or mark reserved: "why"):\n${dead.join("\n")}`).toEqual([]);
  });

  it("each code is in exactly one block: one code, one meaning", () => {
    const twice = [...catalogued].filter(([, e]) => e.length > 1).map(([code, e]) => `${code}: ${e.map((x) => x.block).join(", ")}`);
    expect(twice).toEqual([]);
    expect(loaded.blocks.map((b) => b.package)).toEqual(expect.arrayContaining(["@nodefabric/sdk", "@nodefabric/core", "@nodefabric/handler-http", "@nodefabric/handler-mcp", "@nodefabric/handler-llm"]));
  });

  it("a former spelling is raised nowhere and names a code of a block", () => {
    expect(Object.keys(loaded.retired)).toContain("configuration_error");
    for (const [code, r] of Object.entries(loaded.retired)) {
      expect(raised.get(code) ?? [], `${code} is raised again: raise ${r.now}`).toEqual([]);
      expect(catalogued.has(code), code).toBe(false);
      expect(catalogued.has(r.now), r.now).toBe(true);
    }
  });

  it("every request error code has a meaning", () => {
    expect(Object.keys(loaded.requestMeanings).sort()).toEqual(Object.keys(loaded.requestStatus).sort());
  });
});

describe("docs/errors.md", () => {
  it("is fresh: what scripts/docs/errors.mjs makes of the blocks (npm run docs, or node scripts/docs/errors.mjs, writes it)", async () => {
    const committed = readFileSync(path.join(repo, PAGE), "utf8");
    expect(committed).toBe(await errorsPage());
  });

  it("lists every code of every block, each request error code with its status, and the former spellings", async () => {
    const page = await errorsPage();
    for (const code of catalogued.keys()) expect(page).toContain(`| \`${code}\` |`);
    expect(page).toContain("| `configuration_error` | `invalid_configuration` |");
    expect(page).toContain("| `rate_limited` | 429 |");
  });
});
