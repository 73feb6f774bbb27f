/**
 * stringMatching: short strings made to match a pattern (ECMAScript, `u` flag), the same each time, and checked with
 * the pattern itself. (Patterns of other dialects are translated first: importers/openapi/test/regex-dialects.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { stringMatching } from "../src/samples/regex-matches.js";

function matches(pattern: string, text: string): boolean {
  return new RegExp(pattern, "u").test(text);
}

describe("stringMatching", () => {
  it("makes short strings that match, within the lengths asked, the same every time", () => {
    const cases: Array<[string, { minLength?: number; maxLength?: number }]> = [
      ["^[a-z]+$", {}],
      ["^[A-Z]{2}\\d{3}$", {}],
      ["^\\d{4}-\\d{2}-\\d{2}$", {}],
      ["^(?<a>ab|cd)-\\k<a>$", {}],
      ["^[0-9]+$", { minLength: 5, maxLength: 8 }],
      ["^\\p{Lu}\\w*$", { minLength: 3 }],
      ["^acct_[a-zA-Z0-9]{16}$", {}],
      ["^\\+?[1-9]\\d{1,14}$", {}],
      ["^[^a-z]+$", {}],
      ["sk_", { minLength: 10 }],
    ];
    for (const [pattern, options] of cases) {
      const text = stringMatching(pattern, options);
      expect(text, pattern).toBeDefined();
      expect(matches(pattern, text!), `${pattern} ${text}`).toBe(true);
      expect(text!.length).toBeGreaterThanOrEqual(options.minLength ?? 0);
      expect(text!.length).toBeLessThanOrEqual(options.maxLength ?? Infinity);
      expect(stringMatching(pattern, options)).toBe(text);
    }
  });

  it("gives different strings for different variants, and undefined when nothing fits", () => {
    expect(stringMatching("^[a-z]$", { variant: 0 })).not.toBe(stringMatching("^[a-z]$", { variant: 1 }));
    expect(stringMatching("^[a-z]{5}$", { maxLength: 3 })).toBeUndefined();
    expect(stringMatching("(", {})).toBeUndefined();
  });
});
