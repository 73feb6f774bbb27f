/**
 * The manual can be found and walked: every page of docs/ is listed in docs/README.md (the index), and no relative link
 * or #anchor in README.md or docs/**\/*.md is dead. Anchors are made as GitHub makes them from a heading: lowercased,
 * punctuation dropped, spaces turned into hyphens, and a repeated heading numbered (`-1`, `-2`, …).
 */
import { describe, expect, it } from "vitest";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { glob } from "tinyglobby";
import { repo } from "./readme-blocks.js";

/** A page's text with its fenced code blocks blanked (line numbers kept): no heading or link is read from code. */
function withoutCode(text: string): string {
  let fence: string | undefined;
  return text
    .split("\n")
    .map((line) => {
      const open = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
      if (fence) {
        if (open && open[1]![0] === fence[0] && open[1]!.length >= fence.length && line.trim() === open[1]) fence = undefined;
        return "";
      }
      if (open) {
        fence = open[1]!;
        return "";
      }
      return line;
    })
    .join("\n");
}

/** The heading's text as GitHub shows it: links and images by their text, no HTML tags, no emphasis marks. */
function headingText(raw: string): string {
  return raw
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/\s+#+\s*$/, "")
    .trim();
}

/** GitHub's anchor for a heading's text (github-slugger): lowercase, keep letters, digits, `_`, `-` and spaces; spaces to `-`. */
function slug(text: string): string {
  return headingText(text)
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a Markdown file has: one per heading, repeats numbered as GitHub numbers them. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const m of withoutCode(text).matchAll(/^ {0,3}#{1,6}\s+(.+)$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every link target of a Markdown file outside code (inline links, images, reference definitions), with its line. */
function linksOf(text: string): Array<{ target: string; line: number }> {
  const links: Array<{ target: string; line: number }> = [];
  withoutCode(text)
    .split("\n")
    .forEach((raw, i) => {
      const line = raw.replace(/(`+)[^`]*?\1/g, ""); // inline code holds no link
      for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ target: m[1]!, line: i + 1 });
      const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
      if (definition) links.push({ target: definition[1]!, line: i + 1 });
    });
  return links;
}

const pages = (await glob(["README.md", "docs/**/*.md"], { cwd: repo })).sort();
const anchorCache = new Map<string, Set<string>>();
const anchorsOfFile = (file: string) => {
  if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(readFileSync(file, "utf8")));
  return anchorCache.get(file)!;
};

describe("docs/README.md: the manual's index", () => {
  const index = readFileSync(path.join(repo, "docs/README.md"), "utf8");
  const listed = new Set(
    linksOf(index)
      .map((l) => l.target.split("#")[0]!)
      .filter((t) => t !== "" && !/^[a-z]+:/i.test(t))
      .map((t) => path.posix.normalize(path.posix.join("docs", t))),
  );

  it("lists every page of docs/", async () => {
    const docs = (await glob(["docs/**/*.md"], { cwd: repo, ignore: ["docs/README.md"] })).sort();
    const missing = docs.filter((p) => !listed.has(p));
    expect(missing, `docs/README.md does not list:\n${missing.join("\n")}`).toEqual([]);
    expect(docs.length).toBeGreaterThan(10);
  });

  it("says of each page, on its line, whether it is a guide or a reference", () => {
    const lines = index.split("\n").filter((l) => /^\s*[-*] \[[^\]]+\]\([^)]+\.md\)/.test(l));
    const unsaid = lines.filter((l) => !/\b(guide|reference)\b/i.test(l));
    expect(lines.length).toBeGreaterThan(10);
    expect(unsaid, `these index lines do not say what kind of page they are:\n${unsaid.join("\n")}`).toEqual([]);
  });
});

describe("README.md and docs/: no relative link or anchor is dead", () => {
  it("finds the pages, and the checker finds a dead link and a dead anchor", () => {
    expect(pages).toContain("README.md");
    expect(pages).toContain("docs/README.md");
    expect(slug("`fabric run` and `--json`: what's new?")).toBe("fabric-run-and---json-whats-new");
    expect(slug("Plan with an LLM")).toBe("plan-with-an-llm");
    expect([...anchorsOf("# A\n\n```\n# not a heading\n```\n## A\n## B.c")]).toEqual(["a", "a-1", "bc"]);
    expect(linksOf("see [x](a.md#b), `[y](no.md)`, ![i](img.png)\n[d]: ../d.md").map((l) => l.target)).toEqual(["a.md#b", "img.png", "../d.md"]);
  });

  for (const page of pages) {
    it(page, () => {
      const dead: string[] = [];
      for (const { target, line } of linksOf(readFileSync(path.join(repo, page), "utf8"))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) continue; // absolute URLs: not checked here
        const [file, anchor] = target.split("#") as [string, string | undefined];
        const resolved = file === "" ? path.join(repo, page) : path.resolve(path.dirname(path.join(repo, page)), decodeURIComponent(file));
        if (!resolved.startsWith(repo + path.sep) && resolved !== repo) {
          dead.push(`${page}:${line}: ${target} leaves the repository`);
          continue;
        }
        if (!existsSync(resolved)) {
          dead.push(`${page}:${line}: ${target}: no such file`);
          continue;
        }
        if (anchor === undefined || anchor === "" || !resolved.endsWith(".md") || !statSync(resolved).isFile()) continue;
        if (!anchorsOfFile(resolved).has(decodeURIComponent(anchor))) {
          dead.push(`${page}:${line}: ${target}: ${path.relative(repo, resolved)} has no heading #${anchor}`);
        }
      }
      expect(dead, dead.join("\n")).toEqual([]);
    });
  }
});
