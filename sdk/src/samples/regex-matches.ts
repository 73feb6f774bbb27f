/**
 * Strings that match a regular expression (ECMAScript, `u` flag): what a sample value of a schema with a `pattern`
 * needs. The pattern is parsed into a small tree, a short string is written from it (readable characters first), and
 * the string is kept only when the pattern itself matches it. Patterns written for other dialects are translated
 * first, by the OpenAPI importer (@nodefabric/importer-openapi, regex-dialects.ts).
 */

/** Characters tried, in order, for a class or escape: readable ones first. */
const PREFERRED_CHARACTERS = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. @:/+=,;!?*#$%&'()[]{}<>|~^`\"\\"];

type PatternNode =
  | { kind: "alternatives"; options: PatternNode[][]; group?: number; name?: string }
  | { kind: "atom"; source: string }
  | { kind: "literal"; text: string }
  | { kind: "backref"; ref: string }
  | { kind: "assertion" }
  | { kind: "repeat"; node: PatternNode; min: number; max: number };

/** Options of stringMatching. */
export interface StringMatchingOptions {
  minLength?: number;
  maxLength?: number;
  /** Picks other characters and alternatives, so that several strings for one pattern differ. */
  variant?: number;
}

/**
 * A short string that `pattern` (ECMAScript, `u` flag) matches, within the lengths given, or undefined when none was
 * found. Deterministic: the same arguments give the same string. Lookarounds are not solved; the result is checked
 * with the pattern itself, so a string is returned only when it matches.
 */
export function stringMatching(pattern: string, options: StringMatchingOptions = {}): string | undefined {
  let regex: RegExp;
  let tree: PatternNode;
  try {
    regex = new RegExp(pattern, "u");
    tree = new PatternParser(pattern).parse();
  } catch {
    return undefined;
  }
  const min = options.minLength ?? 0;
  const max = options.maxLength ?? Infinity;
  const variant = options.variant ?? 0;
  for (const boost of [0, 1, 2, 3, 5, 8, 13, 21, 34, 64, 128, 256]) {
    for (let v = variant; v < variant + 3; v++) {
      const made = new PatternWriter(boost, v, Math.max(min, 0)).write(tree);
      if (made === undefined) continue;
      let text = made;
      // The pattern matches anywhere: text around a match keeps it a match, unless anchors forbid it (checked below).
      if (text.length < min) text = text + "x".repeat(min - text.length);
      if (text.length >= min && text.length <= max && regex.test(text)) return text;
      if (made.length >= min && made.length <= max && regex.test(made)) return made;
      if (made.length < min && regex.test("x".repeat(min - made.length) + made)) {
        const before = "x".repeat(min - made.length) + made;
        if (before.length <= max) return before;
      }
    }
  }
  return undefined;
}

/** Reads an ECMAScript pattern into the tree the writer walks; classes and escapes keep their source text. */
class PatternParser {
  private i = 0;
  private groups = 0;

  constructor(private readonly src: string) {}

  parse(): PatternNode {
    const node = this.alternatives();
    if (this.i < this.src.length) throw new Error("unbalanced )");
    return node;
  }

  private alternatives(group?: number, name?: string): PatternNode {
    const options: PatternNode[][] = [[]];
    while (this.i < this.src.length && this.src[this.i] !== ")") {
      if (this.src[this.i] === "|") {
        this.i++;
        options.push([]);
        continue;
      }
      const atom = this.atom();
      options[options.length - 1].push(this.quantified(atom));
    }
    return { kind: "alternatives", options, group, name };
  }

  private quantified(atom: PatternNode): PatternNode {
    const c = this.src[this.i];
    let min: number;
    let max: number;
    if (c === "*" || c === "+" || c === "?") {
      this.i++;
      [min, max] = c === "*" ? [0, Infinity] : c === "+" ? [1, Infinity] : [0, 1];
    } else {
      const m = c === "{" ? /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i)) : null;
      if (!m) return atom;
      this.i += m[0].length;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === "" ? Infinity : Number(m[3]);
    }
    if (this.src[this.i] === "?") this.i++;
    return { kind: "repeat", node: atom, min, max };
  }

  private atom(): PatternNode {
    const { src } = this;
    const c = src[this.i];
    if (c === "(") {
      const rest = src.slice(this.i);
      const look = /^\(\?(?:=|!|<=|<!)/.exec(rest);
      if (look) {
        this.i += look[0].length;
        this.alternatives();
        this.i++;
        return { kind: "assertion" };
      }
      let group: number | undefined;
      let name: string | undefined;
      if (rest.startsWith("(?:")) this.i += 3;
      else {
        const named = /^\(\?<([^>]+)>/.exec(rest);
        group = ++this.groups;
        if (named) {
          name = named[1];
          this.i += named[0].length;
        } else this.i++;
      }
      const node = this.alternatives(group, name);
      this.i++;
      return node;
    }
    if (c === "^" || c === "$") {
      this.i++;
      return { kind: "assertion" };
    }
    if (c === "[") {
      const start = this.i;
      this.i++;
      if (src[this.i] === "^") this.i++;
      while (this.i < src.length && src[this.i] !== "]") this.i += src[this.i] === "\\" ? 2 : 1;
      this.i++;
      return { kind: "atom", source: src.slice(start, this.i) };
    }
    if (c === "\\") {
      const next = src[this.i + 1];
      if (next === "b" || next === "B") {
        this.i += 2;
        return { kind: "assertion" };
      }
      if (/[1-9]/.test(next)) {
        const digits = /^\d+/.exec(src.slice(this.i + 1))![0];
        this.i += 1 + digits.length;
        return { kind: "backref", ref: digits };
      }
      const named = /^\\k<([^>]+)>/.exec(src.slice(this.i));
      if (named) {
        this.i += named[0].length;
        return { kind: "backref", ref: named[1] };
      }
      const long = /^\\(?:[pP]\{[^}]*\}|u\{[0-9A-Fa-f]+\}|u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|c[A-Za-z]|.)/su.exec(src.slice(this.i))!;
      this.i += long[0].length;
      return { kind: "atom", source: long[0] };
    }
    if (c === ".") {
      this.i++;
      return { kind: "atom", source: "." };
    }
    const ch = String.fromCodePoint(src.codePointAt(this.i)!);
    this.i += ch.length;
    return { kind: "literal", text: ch };
  }
}

/** Writes one string a pattern tree matches: `boost` more repetitions where a quantifier allows them. */
class PatternWriter {
  private readonly captures = new Map<string, string>();
  private written = 0;
  private static readonly atomCache = new Map<string, RegExp>();

  constructor(
    private readonly boost: number,
    private readonly variant: number,
    private readonly wanted: number,
  ) {}

  write(node: PatternNode): string | undefined {
    switch (node.kind) {
      case "literal":
        this.written++;
        return node.text;
      case "assertion":
        return "";
      case "backref":
        return this.captures.get(node.ref) ?? "";
      case "atom": {
        const ch = this.characterFor(node.source);
        if (ch !== undefined) this.written++;
        return ch;
      }
      case "repeat": {
        let count = Math.min(node.max, Math.max(node.min, this.boost));
        // Reach a wanted minimum length through the first open-ended repetition.
        if (node.max === Infinity && this.written < this.wanted && this.boost > 0) count = Math.max(count, this.wanted - this.written);
        let out = "";
        for (let k = 0; k < count; k++) {
          const part = this.write(node.node);
          if (part === undefined) return node.min === 0 && k === 0 ? "" : undefined;
          out += part;
        }
        return out;
      }
      case "alternatives": {
        const order = node.options.map((_, k) => k);
        const start = this.variant % order.length;
        for (const k of [...order.slice(start), ...order.slice(0, start)]) {
          let out = "";
          let ok = true;
          for (const part of node.options[k]) {
            const text = this.write(part);
            if (text === undefined) {
              ok = false;
              break;
            }
            out += text;
          }
          if (!ok) continue;
          if (node.group !== undefined) this.captures.set(String(node.group), out);
          if (node.name !== undefined) this.captures.set(node.name, out);
          return out;
        }
        return undefined;
      }
    }
  }

  /** A character the class or escape `source` matches: a readable one, varied by `variant` and position. */
  private characterFor(source: string): string | undefined {
    let regex = PatternWriter.atomCache.get(source);
    if (regex === undefined) {
      try {
        regex = new RegExp(`^(?:${source})$`, "u");
      } catch {
        return undefined;
      }
      PatternWriter.atomCache.set(source, regex);
    }
    const matching: string[] = [];
    for (const ch of PREFERRED_CHARACTERS) if (regex.test(ch)) matching.push(ch);
    if (matching.length > 0) return matching[(this.variant + this.written) % matching.length];
    for (let cp = 0x20; cp < 0x3000; cp++) {
      const ch = String.fromCodePoint(cp);
      if (regex.test(ch)) return ch;
    }
    for (const cp of [0x9, 0xa, 0xd, 0x1f600, 0x10000]) {
      const ch = String.fromCodePoint(cp);
      if (regex.test(ch)) return ch;
    }
    return undefined;
  }
}
