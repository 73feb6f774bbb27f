/**
 * Regular expressions written for other dialects (PCRE, Python, Java, Ruby, POSIX) made into the ECMAScript ones JSON
 * Schema validators run: Ajv compiles `pattern` and `patternProperties` keys as `new RegExp(p, "u")`, and under the
 * `u` flag an escape such as `\-` outside a class or `\_` anywhere is a syntax error, so one foreign pattern would
 * keep a whole node type's schema from compiling. A pattern that compiles is kept as it is; one that does not is
 * rewritten where the meaning is certain, and dropped (with a note) where it is not.
 */

/** What became of one pattern: the pattern to use (none when it was dropped) and, when it changed, why. */
export interface TranslatedPattern {
  pattern?: string;
  note?: string;
}

/** Characters that may follow `\` anywhere under the `u` flag (in a class, `-` too). */
const SYNTAX_CHARACTERS = new Set([..."^$\\.*+?()[]{}|/"]);

/** Escapes (a letter after `\`) with the same meaning in ECMAScript as in the common dialects. */
const SHARED_LETTER_ESCAPES = new Set([..."dDwWsSbBnrtfv"]);

/** POSIX bracket expressions, as the class contents they stand for (ASCII, as POSIX's C locale). */
const POSIX_CLASSES: Readonly<Record<string, string>> = {
  alpha: "a-zA-Z",
  digit: "0-9",
  alnum: "a-zA-Z0-9",
  upper: "A-Z",
  lower: "a-z",
  space: " \\t\\n\\r\\f\\v",
  blank: " \\t",
  punct: "!-\\/:-@\\[-`{-~",
  xdigit: "0-9A-Fa-f",
  word: "\\w",
  cntrl: "\\x00-\\x1F\\x7F",
  print: "\\x20-\\x7E",
  graph: "\\x21-\\x7E",
};

/** Line terminators, for `^` and `$` of a multi-line pattern spelt out with lookarounds. */
const LINE_END = "[\\n\\r\\u2028\\u2029]";

/** Inline flags with no effect on whether a string matches somewhere (`test`), which is all `pattern` asks. */
const HARMLESS_FLAGS = new Set([..."uaLUJn"]);

interface Flags {
  i: boolean;
  m: boolean;
  s: boolean;
  x: boolean;
}

class Untranslatable extends Error {}

function compiles(pattern: string): boolean {
  try {
    new RegExp(pattern, "u");
    return true;
  } catch {
    return false;
  }
}

/**
 * `pattern` as an ECMAScript regular expression that compiles with the `u` flag.
 *
 * - a pattern that compiles is kept as it is (no note);
 * - identity escapes of characters that need none (`\-` outside a class, `\_`, `\:`, `\'`, `\"`, `\@`, `\#`, `\ `…)
 *   lose their backslash; `\A` → `^`, `\Z` and `\z` → `$` (the end of the text; PCRE's `\Z` would also allow one
 *   final newline); `\x{41}` → `\u{41}`; `\e`, `\a`, octal `\012` → `\x..`; `\Q…\E` → the text escaped; `\R` → a line
 *   break;
 * - POSIX classes (`[[:alpha:]]`) → ASCII ranges; a class opening with `]` keeps it as a literal;
 * - Python's `(?P<name>…)` and `(?P=name)` → `(?<name>…)` and `\k<name>`; `(?#…)` comments are removed;
 * - `{,n}` → `{0,n}`; a `{` or `}` that is no quantifier, and a `]` outside a class, become literals;
 * - inline flags (`(?i)`, `(?i:…)`, `(?s)`, `(?m)`, `(?x)`) are applied, since JSON Schema has no flags: `i` spells out
 *   both cases of each ASCII letter, `s` makes `.` match line breaks, `m` turns `^`/`$` into line-boundary lookarounds,
 *   `x` removes whitespace and `#` comments; flags that cannot change whether a string matches (`u`, `a`, `U`, `n`…)
 *   are ignored;
 * - possessive quantifiers (`a++`), atomic groups, conditionals, recursion, `\G`, `\K`, nested classes and anything
 *   else whose meaning cannot be kept: the pattern is dropped (no `pattern` in the answer) and the note says so.
 *
 * `where` names the place for the note (`Pet.name`).
 */
export function translatePattern(pattern: string, where?: string): TranslatedPattern {
  if (compiles(pattern)) return { pattern };
  const of = where ? ` of ${where}` : "";
  let translated: { text: string; changes: string[] };
  try {
    translated = new PatternTranslator(pattern).run();
  } catch (err) {
    const reason = err instanceof Untranslatable ? err.message : "it could not be read";
    return { note: `pattern \`${pattern}\`${of} was dropped (${reason}); any string is accepted there` };
  }
  if (!compiles(translated.text)) {
    let reason = "it is not a valid ECMAScript regular expression";
    try {
      new RegExp(translated.text, "u");
    } catch (err) {
      reason = `it is not a valid ECMAScript regular expression: ${(err as Error).message.replace(/^Invalid regular expression: /, "")}`;
    }
    return { note: `pattern \`${pattern}\`${of} was dropped (${reason}); any string is accepted there` };
  }
  const changes = [...new Set(translated.changes)];
  return { pattern: translated.text, note: `pattern \`${pattern}\`${of} was translated to \`${translated.text}\` (ECMAScript regex: ${changes.join("; ")})` };
}

/** One pass over a foreign pattern, writing the ECMAScript one. */
class PatternTranslator {
  private i = 0;
  private out = "";
  private readonly changes: string[] = [];
  private flags: Flags = { i: false, m: false, s: false, x: false };
  /** Flags to restore at each open group's `)`. */
  private readonly groups: Flags[] = [];
  /** True right after something a quantifier may follow. */
  private atom = false;

  constructor(private readonly src: string) {}

  run(): { text: string; changes: string[] } {
    while (this.i < this.src.length) this.step();
    if (this.groups.length > 0) throw new Untranslatable("a group is not closed");
    return { text: this.out, changes: this.changes };
  }

  private emit(text: string, atom: boolean): void {
    this.out += text;
    this.atom = atom;
  }

  private step(): void {
    const c = this.src[this.i];
    if (this.flags.x && /\s/.test(c)) {
      this.i++;
      this.changes.push("the (?x) flag's whitespace was removed");
      return;
    }
    if (this.flags.x && c === "#") {
      while (this.i < this.src.length && this.src[this.i] !== "\n") this.i++;
      this.changes.push("the (?x) flag's comments were removed");
      return;
    }
    switch (c) {
      case "\\":
        this.escape();
        return;
      case "[":
        this.characterClass();
        return;
      case "(":
        this.group();
        return;
      case ")":
        if (this.groups.length === 0) throw new Untranslatable("a `)` closes no group");
        this.flags = this.groups.pop()!;
        this.i++;
        this.emit(")", true);
        return;
      case "*":
      case "+":
      case "?":
        this.i++;
        this.quantifier(c);
        return;
      case "{": {
        const m = /^\{(\d*)(?:(,)(\d*))?\}/.exec(this.src.slice(this.i));
        if (m && (m[1] !== "" || (m[2] && m[3] !== ""))) {
          this.i += m[0].length;
          if (m[1] === "") this.changes.push("{,n} is written {0,n}");
          this.quantifier(`{${m[1] || "0"}${m[2] ?? ""}${m[3] ?? ""}}`);
        } else {
          this.i++;
          this.changes.push("a literal { is escaped");
          this.literal("{", "\\{");
        }
        return;
      }
      case "}":
        this.i++;
        this.changes.push("a literal } is escaped");
        this.literal("}", "\\}");
        return;
      case "]":
        this.i++;
        this.changes.push("a literal ] is escaped");
        this.emit("\\]", true);
        return;
      case ".":
        this.i++;
        if (this.flags.s) this.changes.push("the (?s) flag makes . match line breaks");
        this.emit(this.flags.s ? "[\\s\\S]" : ".", true);
        return;
      case "^":
        this.i++;
        if (this.flags.m) this.changes.push("the (?m) flag's ^ and $ are line boundaries");
        this.emit(this.flags.m ? `(?:^|(?<=${LINE_END}))` : "^", false);
        return;
      case "$":
        this.i++;
        if (this.flags.m) this.changes.push("the (?m) flag's ^ and $ are line boundaries");
        this.emit(this.flags.m ? `(?:$|(?=${LINE_END}))` : "$", false);
        return;
      case "|":
        this.i++;
        this.emit("|", false);
        return;
      default: {
        const cp = this.src.codePointAt(this.i)!;
        const ch = String.fromCodePoint(cp);
        this.i += ch.length;
        this.literal(ch, ch);
      }
    }
  }

  /** A literal character (`text` is how it is written); under (?i), an ASCII letter matches both cases. */
  private literal(ch: string, text: string): void {
    const other = otherCase(ch);
    if (this.flags.i && other !== undefined) {
      this.changes.push("the (?i) flag is spelt out as both cases of each letter");
      this.emit(`[${ch}${other}]`, true);
    } else {
      this.emit(text, true);
    }
  }

  private quantifier(q: string): void {
    if (!this.atom) throw new Untranslatable(`the quantifier ${q} follows nothing it can repeat`);
    let text = q;
    const next = this.src[this.i];
    if (next === "+") throw new Untranslatable(`the possessive quantifier ${q}+ has no ECMAScript equivalent`);
    if (next === "?") {
      text += "?";
      this.i++;
    }
    this.emit(text, false);
  }

  private escape(): void {
    const { src } = this;
    const start = this.i;
    const c = src[this.i + 1];
    if (c === undefined) throw new Untranslatable("it ends with a lone backslash");
    this.i += 2;
    const rest = src.slice(this.i);
    if (SHARED_LETTER_ESCAPES.has(c)) return this.emit(`\\${c}`, c !== "b" && c !== "B");
    if (SYNTAX_CHARACTERS.has(c)) return this.literal(c, `\\${c}`);
    switch (c) {
      case "A":
        this.changes.push("\\A is ^");
        return this.emit("^", false);
      case "Z":
      case "z":
        this.changes.push(`\\${c} is $ (the end of the text)`);
        return this.emit("$", false);
      case "Q": {
        const end = src.indexOf("\\E", this.i);
        const text = end < 0 ? src.slice(this.i) : src.slice(this.i, end);
        this.i = end < 0 ? src.length : end + 2;
        this.changes.push("\\Q…\\E is written as escaped text");
        for (const ch of text) this.literal(ch, SYNTAX_CHARACTERS.has(ch) ? `\\${ch}` : ch);
        return;
      }
      case "E":
        this.changes.push("a stray \\E is removed");
        return;
      case "R":
        this.changes.push("\\R is spelt out as the line breaks it matches");
        return this.emit("(?:\\r\\n|[\\n\\v\\f\\r\\x85\\u2028\\u2029])", true);
      case "e":
        this.changes.push("\\e is \\x1B");
        return this.emit("\\x1B", true);
      case "a":
        this.changes.push("\\a is \\x07");
        return this.emit("\\x07", true);
      case "c":
        if (/^[A-Za-z]/.test(rest)) {
          this.i++;
          return this.emit(`\\c${rest[0]}`, true);
        }
        throw new Untranslatable("\\c is not followed by a letter");
      case "x": {
        const braced = /^\{([0-9A-Fa-f]{1,6})\}/.exec(rest);
        if (braced) {
          this.i += braced[0].length;
          this.changes.push("\\x{…} is \\u{…}");
          return this.emit(`\\u{${braced[1]}}`, true);
        }
        const two = /^[0-9A-Fa-f]{2}/.exec(rest);
        if (two) {
          this.i += 2;
          return this.emit(`\\x${two[0]}`, true);
        }
        throw new Untranslatable("\\x is not followed by two hex digits");
      }
      case "u":
      case "p":
      case "P":
      case "k": {
        // \uHHHH, \u{…}, \p{…} and \k<name> are ECMAScript's too; the final compile tells whether the name is known.
        const m = /^(\{[^}]*\}|[0-9A-Fa-f]{4}|<[^>]*>)/.exec(rest);
        if (!m) throw new Untranslatable(`\\${c} is not written as ECMAScript writes it`);
        this.i += m[0].length;
        return this.emit(`\\${c}${m[0]}`, true);
      }
      case "0": {
        const octal = /^[0-7]{1,2}/.exec(rest);
        if (!octal) return this.emit("\\0", true);
        this.i += octal[0].length;
        this.changes.push("octal escapes are written \\x..");
        return this.emit(`\\x${parseInt(octal[0], 8).toString(16).padStart(2, "0")}`, true);
      }
      default:
        break;
    }
    if (/[1-9]/.test(c)) {
      const digits = /^\d*/.exec(rest)![0];
      this.i += digits.length;
      return this.emit(`\\${c}${digits}`, true);
    }
    if (/[A-Za-z0-9]/.test(c)) throw new Untranslatable(`the escape \\${c} means different things in different dialects or has no ECMAScript equivalent`);
    // An identity escape of a character that needs none: the character itself.
    const cp = src.codePointAt(start + 1)!;
    const ch = String.fromCodePoint(cp);
    this.i = start + 1 + ch.length;
    this.changes.push(`\\${ch} is written ${ch === " " ? "as a plain space" : ch}`);
    this.literal(ch, ch === " " ? " " : ch);
  }

  private group(): void {
    const rest = this.src.slice(this.i);
    const open = (text: string, length: number, flags: Flags = this.flags) => {
      this.groups.push(this.flags);
      this.flags = flags;
      this.i += length;
      this.emit(text, false);
    };
    if (!rest.startsWith("(?")) return open("(", 1);
    if (rest.startsWith("(*")) throw new Untranslatable("backtracking verbs have no ECMAScript equivalent");
    for (const kept of ["(?:", "(?=", "(?!", "(?<=", "(?<!"]) if (rest.startsWith(kept)) return open(kept, kept.length);
    const named = /^\(\?(?:P?<([A-Za-z_][A-Za-z0-9_]*)>|'([A-Za-z_][A-Za-z0-9_]*)')/.exec(rest);
    if (named) {
      if (!named[0].startsWith("(?<")) this.changes.push("named groups are written (?<name>…)");
      return open(`(?<${named[1] ?? named[2]}>`, named[0].length);
    }
    const backref = /^\(\?P=([A-Za-z_][A-Za-z0-9_]*)\)/.exec(rest);
    if (backref) {
      this.i += backref[0].length;
      this.changes.push("(?P=name) is written \\k<name>");
      return this.emit(`\\k<${backref[1]}>`, true);
    }
    if (rest.startsWith("(?#")) {
      const end = this.src.indexOf(")", this.i);
      if (end < 0) throw new Untranslatable("a (?#…) comment is not closed");
      this.i = end + 1;
      this.changes.push("(?#…) comments are removed");
      return;
    }
    if (/^\(\?(?:R|[+-]?\d+|&\w+|P>\w+)\)/.test(rest)) throw new Untranslatable("recursion and subroutine calls have no ECMAScript equivalent");
    const flagGroup = /^\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])/.exec(rest);
    if (flagGroup && (flagGroup[1] !== "" || (flagGroup[2] ?? "") !== "")) {
      const flags = { ...this.flags };
      for (const [letters, on] of [[flagGroup[1], true], [flagGroup[2] ?? "", false]] as const) {
        for (const f of letters) {
          if (f === "i" || f === "m" || f === "s" || f === "x") flags[f] = on;
          else if (HARMLESS_FLAGS.has(f)) this.changes.push(`the (?${f}) flag does not change what matches and is dropped`);
          else throw new Untranslatable(`the inline flag ${f} has no ECMAScript equivalent`);
        }
      }
      if (flagGroup[3] === ":") return open("(?:", flagGroup[0].length, flags);
      // `(?i)`: from here to the end of the enclosing group.
      this.i += flagGroup[0].length;
      this.flags = flags;
      return;
    }
    if (rest.startsWith("(?>")) throw new Untranslatable("atomic groups have no ECMAScript equivalent");
    if (rest.startsWith("(?(")) throw new Untranslatable("conditionals have no ECMAScript equivalent");
    if (rest.startsWith("(?|")) throw new Untranslatable("branch reset groups have no ECMAScript equivalent");
    throw new Untranslatable(`the group ${rest.slice(0, 4)}… has no ECMAScript equivalent (recursion or a construct of another dialect)`);
  }

  private characterClass(): void {
    const { src } = this;
    this.i++;
    let text = "[";
    if (src[this.i] === "^") {
      text += "^";
      this.i++;
    }
    const items: ClassItem[] = [];
    if (src[this.i] === "]") {
      // POSIX and PCRE: a `]` first in a class is a literal (ECMAScript would read `[]` as the empty class).
      this.changes.push("a ] first in a class is escaped");
      items.push({ kind: "char", ch: "]", text: "\\]" });
      this.i++;
    }
    for (;;) {
      if (this.i >= src.length) throw new Untranslatable("a character class is not closed");
      const c = src[this.i];
      if (c === "]") {
        this.i++;
        break;
      }
      if (c === "[") {
        const posix = /^\[:(\^?)([a-z]+):\]/.exec(src.slice(this.i));
        if (posix) {
          const ranges = POSIX_CLASSES[posix[2]];
          if (posix[1] === "^" || ranges === undefined) throw new Untranslatable(`the POSIX class [:${posix[1]}${posix[2]}:] has no ECMAScript equivalent`);
          this.i += posix[0].length;
          this.changes.push(`[:${posix[2]}:] is written ${ranges}`);
          items.push({ kind: "set", text: ranges });
          continue;
        }
        throw new Untranslatable("a [ inside a character class (a nested class or set operation) is read differently by each dialect");
      }
      if (c === "&" && src[this.i + 1] === "&") throw new Untranslatable("class intersection (&&) has no ECMAScript equivalent");
      if (c === "\\") {
        items.push(this.classEscape());
        continue;
      }
      const cp = src.codePointAt(this.i)!;
      const ch = String.fromCodePoint(cp);
      this.i += ch.length;
      items.push({ kind: "char", ch, text: ch });
    }
    text += writeClass(items, this.flags.i, this.changes);
    this.emit(`${text}]`, true);
  }

  private classEscape(): ClassItem {
    const { src } = this;
    const c = src[this.i + 1];
    if (c === undefined) throw new Untranslatable("it ends with a lone backslash");
    const rest = src.slice(this.i + 2);
    const take = (length: number, item: ClassItem): ClassItem => {
      this.i += 2 + length;
      return item;
    };
    if ("dDwWsS".includes(c)) return take(0, { kind: "set", text: `\\${c}` });
    if ("nrtfvb".includes(c)) return take(0, { kind: "char", ch: `\\${c}`, text: `\\${c}` });
    if (SYNTAX_CHARACTERS.has(c) || c === "-") return take(0, { kind: "char", ch: c, text: `\\${c}` });
    if (c === "e") return take(0, { kind: "char", ch: "\x1b", text: "\\x1B" });
    if (c === "a") return take(0, { kind: "char", ch: "\x07", text: "\\x07" });
    if (c === "x") {
      const braced = /^\{([0-9A-Fa-f]{1,6})\}/.exec(rest);
      if (braced) {
        this.changes.push("\\x{…} is \\u{…}");
        return take(braced[0].length, { kind: "char", ch: String.fromCodePoint(parseInt(braced[1], 16)), text: `\\u{${braced[1]}}` });
      }
      const two = /^[0-9A-Fa-f]{2}/.exec(rest);
      if (two) return take(2, { kind: "char", ch: String.fromCharCode(parseInt(two[0], 16)), text: `\\x${two[0]}` });
      throw new Untranslatable("\\x is not followed by two hex digits");
    }
    if (c === "u") {
      const m = /^(\{[0-9A-Fa-f]{1,6}\}|[0-9A-Fa-f]{4})/.exec(rest);
      if (!m) throw new Untranslatable("\\u is not followed by hex digits");
      return take(m[0].length, { kind: "char", ch: String.fromCodePoint(parseInt(m[0].replace(/[{}]/g, ""), 16)), text: `\\u${m[0]}` });
    }
    if (c === "p" || c === "P") {
      const m = /^\{[^}]*\}/.exec(rest);
      if (!m) throw new Untranslatable(`\\${c} is not written as ECMAScript writes it`);
      return take(m[0].length, { kind: "set", text: `\\${c}${m[0]}` });
    }
    if (c === "c" && /^[A-Za-z]/.test(rest)) return take(1, { kind: "char", ch: String.fromCharCode(rest.charCodeAt(0) % 32), text: `\\c${rest[0]}` });
    if (c === "0") {
      const octal = /^[0-7]{0,2}/.exec(rest)![0];
      if (octal !== "") this.changes.push("octal escapes are written \\x..");
      const code = parseInt(octal || "0", 8);
      return take(octal.length, { kind: "char", ch: String.fromCharCode(code), text: `\\x${code.toString(16).padStart(2, "0")}` });
    }
    if (/[A-Za-z0-9]/.test(c)) throw new Untranslatable(`the escape \\${c} in a class means different things in different dialects or has no ECMAScript equivalent`);
    const ch = String.fromCodePoint(src.codePointAt(this.i + 1)!);
    this.i += 1 + ch.length;
    this.changes.push(`\\${ch} is written ${ch === " " ? "as a plain space" : ch}`);
    return { kind: "char", ch, text: ch };
  }
}

type ClassItem = { kind: "char"; ch: string; text: string } | { kind: "set"; text: string };

/** The inside of a class; under (?i), ASCII letters and letter ranges gain their other case. */
function writeClass(items: ClassItem[], caseless: boolean, changes: string[]): string {
  let text = "";
  let extra = "";
  for (let k = 0; k < items.length; k++) {
    const item = items[k];
    text += item.text;
    if (!caseless || item.kind !== "char") continue;
    const next = items[k + 1];
    const end = items[k + 2];
    if (next?.kind === "char" && next.text === "-" && end?.kind === "char") {
      // A range: both ends the same case of ASCII letters gains the other case's range.
      text += `-${end.text}`;
      k += 2;
      const a = otherCase(item.ch);
      const b = otherCase(end.ch);
      if (a !== undefined && b !== undefined && isLower(item.ch) === isLower(end.ch)) extra += `${a}-${b}`;
      continue;
    }
    const other = otherCase(item.ch);
    if (other !== undefined) extra += other;
  }
  if (extra !== "") changes.push("the (?i) flag is spelt out as both cases of each letter");
  return text + extra;
}

function isLower(ch: string): boolean {
  return ch >= "a" && ch <= "z";
}

/** The other case of an ASCII letter. */
function otherCase(ch: string): string | undefined {
  if (ch.length !== 1 || !/[A-Za-z]/.test(ch)) return undefined;
  return isLower(ch) ? ch.toUpperCase() : ch.toLowerCase();
}
