/**
 * translatePattern: patterns written for other regex dialects made into ECMAScript ones that Ajv compiles (`u` flag),
 * matching what the original meant, or dropped with a note. (Strings made to match a pattern: sdk/test/regex-matches.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { translatePattern } from "../src/regex-dialects.js";

/** The translated pattern, asserting that it compiles as Ajv compiles it. */
function translated(pattern: string): string {
  const out = translatePattern(pattern);
  expect(out.pattern, out.note).toBeDefined();
  expect(() => new RegExp(out.pattern!, "u")).not.toThrow();
  return out.pattern!;
}

function matches(pattern: string, text: string): boolean {
  return new RegExp(pattern, "u").test(text);
}

describe("translatePattern: kept", () => {
  it("keeps a pattern that compiles under the u flag, with no note", () => {
    for (const pattern of ["^[a-z]+$", "^[\\w\\-]+$", "\\/path", "(?<=a)b", "^\\p{L}+$", "^\\d{3}(-\\d{4})?$"]) {
      expect(translatePattern(pattern)).toEqual({ pattern });
    }
  });
});

describe("translatePattern: identity escapes", () => {
  it("drops backslashes ECMAScript refuses under u, in and out of classes, keeping the meaning", () => {
    const pattern = translated("^[a-zA-Z0-9\\-\\_]+$");
    expect(pattern).toBe("^[a-zA-Z0-9\\-_]+$");
    expect(matches(pattern, "abc-DEF_09")).toBe(true);
    expect(matches(pattern, "abc def")).toBe(false);

    const outside = translated("^\\d+\\-\\d+\\:\\d+$");
    expect(outside).toBe("^\\d+-\\d+:\\d+$");
    expect(matches(outside, "1-2:3")).toBe(true);

    const punctuation = translated("^\\@\\#\\ \\'\\\"\\%$");
    expect(matches(punctuation, "@# '\"%")).toBe(true);
  });

  it("says what changed in the note, naming where the pattern is", () => {
    const out = translatePattern("^[\\w\\_]+$", "Pet.name");
    expect(out.pattern).toBe("^[\\w_]+$");
    expect(out.note).toBe("pattern `^[\\w\\_]+$` of Pet.name was translated to `^[\\w_]+$` (ECMAScript regex: \\_ is written _)");
  });
});

describe("translatePattern: anchors, POSIX classes, other syntax", () => {
  it("reads \\A, \\Z and \\z as the start and end of the text", () => {
    const pattern = translated("\\A\\d+\\Z");
    expect(pattern).toBe("^\\d+$");
    expect(matches(pattern, "123")).toBe(true);
    expect(matches(pattern, "12a")).toBe(false);
    expect(translated("\\Aab\\z")).toBe("^ab$");
  });

  it("writes POSIX classes as ASCII ranges, alone or inside a larger class", () => {
    const alpha = translated("[[:alpha:]]+");
    expect(alpha).toBe("[a-zA-Z]+");
    expect(matches(`^${alpha}$`, "Hello")).toBe(true);
    expect(matches(`^${alpha}$`, "Hell0")).toBe(false);
    const mixed = translated("^[[:alnum:][:space:]_]+$");
    expect(matches(mixed, "a b_1")).toBe(true);
    expect(matches(mixed, "a-b")).toBe(false);
    expect(matches(translated("^[[:xdigit:]]+$"), "0fA9")).toBe(true);
    expect(matches(translated("^[[:punct:]]$"), "!")).toBe(true);
    expect(matches(translated("^[[:punct:]]$"), "a")).toBe(false);
  });

  it("translates Python named groups, {,n}, stray braces and a leading ] in a class", () => {
    const named = translated("^(?P<year>\\d{4})-(?P=year)$");
    expect(named).toBe("^(?<year>\\d{4})-\\k<year>$");
    expect(matches(named, "2024-2024")).toBe(true);
    expect(matches(named, "2024-2025")).toBe(false);
    expect(translated("^a{,3}$")).toBe("^a{0,3}$");
    expect(matches(translated("^{[a-z]+}$"), "{abc}")).toBe(true);
    expect(matches(translated("^[]a]+$"), "]a]")).toBe(true);
    expect(translated("\\x{41}+")).toBe("\\u{41}+");
    expect(matches(translated("^\\Q1.5*\\E$"), "1.5*")).toBe(true);
    expect(matches(translated("^\\Q1.5*\\E$"), "115")).toBe(false);
  });
});

describe("translatePattern: inline flags", () => {
  it("applies (?i) by spelling out both cases of ASCII letters, in literals and classes", () => {
    const out = translatePattern("(?i)^ab[c-e]$");
    expect(out.pattern).toBe("^[aA][bB][c-eC-E]$");
    expect(out.note).toContain("the (?i) flag is spelt out as both cases of each letter");
    for (const text of ["abc", "ABE", "aBd"]) expect(matches(out.pattern!, text)).toBe(true);
    expect(matches(out.pattern!, "abf")).toBe(false);
  });

  it("scopes (?i:…) to its group and applies (?s), (?m) and (?x)", () => {
    const scoped = translated("^(?i:ab)c$");
    expect(matches(scoped, "ABc")).toBe(true);
    expect(matches(scoped, "ABC")).toBe(false);
    const dotAll = translated("(?s)^a.b$");
    expect(matches(dotAll, "a\nb")).toBe(true);
    const multiline = translated("(?m)^b$");
    expect(matches(multiline, "a\nb\nc")).toBe(true);
    expect(matches(multiline, "abc")).toBe(false);
    const extended = translated("(?x) ^ a b # letters\n c $");
    expect(extended).toBe("^abc$");
  });
});

describe("translatePattern: dropped", () => {
  it("drops what ECMAScript cannot say, with a note naming the original", () => {
    for (const [pattern, why] of [
      ["a++", "possessive"],
      ["^(?>ab|a)c$", "atomic"],
      ["^(?(1)a|b)$", "conditionals"],
      ["[a-z&&[^aeiou]]", "intersection"],
      ["^\\h+$", "\\h"],
      ["^[[:^alpha:]]$", "[:^alpha:]"],
      ["(?R)", "recursion"],
    ] as const) {
      const out = translatePattern(pattern, "Pet.code");
      expect(out.pattern, pattern).toBeUndefined();
      expect(out.note).toContain(`pattern \`${pattern}\` of Pet.code was dropped`);
      expect(out.note).toContain(why);
      expect(out.note).toContain("any string is accepted there");
    }
  });

  it("drops a translation that still does not compile (an unknown Unicode property)", () => {
    const out = translatePattern("^\\p{IsLatin}\\-$");
    expect(out.pattern).toBeUndefined();
    expect(out.note).toMatch(/was dropped \(it is not a valid ECMAScript regular expression/);
  });
});
