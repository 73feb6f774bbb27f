/**
 * The shell commands of README.md, as tests read them: each ```sh block, its lines without their trailing comments.
 * A test that runs a README command takes it from here, so the README and the test cannot drift apart.
 */
import { readFileSync } from "node:fs";
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
