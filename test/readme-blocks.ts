/**
 * The shell commands of README.md, as tests read them: each ```sh block, its lines without their trailing comments.
 * A test that runs a README command takes it from here, so the README and the test cannot drift apart.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const README = fileURLToPath(new URL("../README.md", import.meta.url));

export interface ReadmeBlock {
  /** The heading the block is under. */
  section: string;
  /** The HTML comments right before the block (`<!-- … -->`), which say how a test runs it. */
  notes: string[];
  /** Its command lines, comments stripped, continuation lines (`\`) joined. */
  commands: string[];
  /** The 1-based line of the opening fence. */
  line: number;
}

/** Strips a trailing `# comment` that is outside quotes. */
export function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"') i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "\\") i++;
    else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i).trimEnd();
  }
  return line.trimEnd();
}

export function readmeBlocks(text = readFileSync(README, "utf8")): ReadmeBlock[] {
  const lines = text.split("\n");
  const blocks: ReadmeBlock[] = [];
  let section = "";
  let notes: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    if (/^#{1,6} /.test(l)) {
      section = l.replace(/^#+ /, "");
      notes = [];
      continue;
    }
    const note = /^<!--\s*(.*?)\s*-->$/.exec(l.trim());
    if (note) {
      notes.push(note[1]!);
      continue;
    }
    if (/^```(sh|bash|shell)\s*$/.test(l)) {
      const start = i + 1;
      const body: string[] = [];
      for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
      const commands: string[] = [];
      let pending = "";
      for (const raw of body) {
        const stripped = stripComment(raw);
        if (stripped.endsWith("\\")) {
          pending += stripped.slice(0, -1).trimEnd() + " ";
          continue;
        }
        const full = (pending + stripped.trim()).trim();
        pending = "";
        if (full !== "") commands.push(full);
      }
      blocks.push({ section, notes, commands, line: start });
      notes = [];
      continue;
    }
    if (l.trim() !== "") notes = [];
  }
  return blocks;
}

/** Every command of the README's shell blocks. */
export function readmeCommands(): string[] {
  return readmeBlocks().flatMap((b) => b.commands);
}

/** `command`, which the README must hold exactly as one of its shell commands; otherwise the calling test fails. */
export function readmeCommand(command: string): string {
  if (!readmeCommands().includes(command)) {
    throw new Error(`README.md has no shell command \`${command}\`: the README and this test disagree`);
  }
  return command;
}

export const repo = path.dirname(README);
export const where = (b: ReadmeBlock) => `README.md line ${b.line} (${b.section})`;

export type Plan = { kind: "run" } | { kind: "ci" } | { kind: "run-by"; file: string } | { kind: "unknown"; note: string };

/** What a block's notes say: who runs it. */
export function planOf(b: ReadmeBlock): Plan {
  if (b.notes.length === 0) return { kind: "run" };
  if (b.notes.length > 1) return { kind: "unknown", note: b.notes.join(" | ") };
  const note = b.notes[0]!;
  if (/^readme-test:\s*ci$/.test(note)) return { kind: "ci" };
  const runBy = /^readme-test:\s*run-by\s+(\S+)$/.exec(note);
  if (runBy) return { kind: "run-by", file: runBy[1]! };
  return { kind: "unknown", note };
}

/** The commands that keep running: started in the background, and stopped before the next block that starts a fabric. */
export const isLongRunning = (command: string) => /(^|[\s;&|])(npm start|(npx )?fabric dev)(\s|$)/.test(command);

/**
 * What a user sees from a command, checked where it is cheap: each key is part of a command this file runs (each must
 * match at least one, so an expectation cannot outlive its command), each value what that command's output shows.
 */
export const EXPECTED: Array<[string, RegExp]> = [
  ["npx fabric run demo.echo", /"state":"completed"/],
  ['/v1/runs/$run_id/events"', /"type":"run_completed"/],
  ["/v1/node-types?q=demo", /"node_type_id":"demo\.echo"/],
  ["/v1/candidate-sets", /"node_type_id":"demo\.sleep"/],
  ["/v1/policy:decide", /"decision":"allow"/],
  ["/v1/atomic-node-runs:execute", /"state":"completed"/],
  ["npx fabric run examples.fanout", /"results":\["a","b","c"\]/],
  ["npx fabric run examples.plan-greet", /Hello, Ada!/],
  ["npx fabric node-types publish", /published examples\.plan-greet/],
  ["npx fabric node-types import --from-openapi", /published \d+ node types? of /],
  ["npx fabric run llm.planner", /"type":"run_completed".*"state":"completed"/s],
  ["npx fabric run llm.agent", /"ended_by":"final"/],
];

/** Each service's URL in the README's table (`| Run Gateway | http://127.0.0.1:8080 | … |`), by service name. */
export function readmeServiceUrls(): Record<string, string> {
  const urls: Record<string, string> = {};
  for (const m of readFileSync(README, "utf8").matchAll(/^\| ([A-Za-z ]+) \| (http:\/\/127\.0\.0\.1:\d+) \|/gm)) {
    urls[m[1]!.toLowerCase().replace(/ /g, "-")] = m[2]!;
  }
  return urls;
}

/** Returns `text` with its quoted parts blanked, as bash would not read them as syntax. */
export function unquoted(text: string): string {
  return text.replace(/'[^']*'|"(?:[^"\\]|\\.)*"/g, (q) => " ".repeat(q.length));
}
