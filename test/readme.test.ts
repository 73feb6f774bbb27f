/**
 * README.md's commands, each run or checked by a test, so none can go stale. This file holds the checks that need no
 * install: who runs each ```sh block, that every command pastes into bash, and that the README's two suites are the
 * ones package.json, vitest and .ci/run define. test/e2e/readme-commands.test.ts runs the blocks themselves.
 *
 * The protocol: an HTML comment right before a ```sh block says who runs it.
 *   <!-- readme-test: run-by <test file> -->  that test runs the block's commands: the file must exist and hold each
 *                                             command of the block as written (so the test and the README agree).
 *   <!-- readme-test: ci -->                  .ci/run runs it (`npm test`, `npm run test:e2e`, which here would run
 *                                             these tests inside themselves): .ci/run must hold each command as written.
 *   no note                                   test/e2e/readme-commands.test.ts runs it.
 * Any other note before a block fails, naming its README line. Every command must also paste into bash as written:
 * it parses (`bash -n`) and has no `<placeholder>` outside quotes.
 */
import { describe, it, expect } from "vitest";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { EXPECTED, planOf, readmeBlocks, repo, unquoted, where } from "./readme-blocks.js";

const blocks = readmeBlocks();

describe("README.md: every ```sh block says who runs it", () => {
  it("each block has no note (run here), or a readme-test note this file knows", () => {
    const problems = blocks.flatMap((b) => {
      const plan = planOf(b);
      return plan.kind === "unknown" ? [`${where(b)}: unknown note \`<!-- ${plan.note} -->\` (known: none, \`readme-test: ci\`, \`readme-test: run-by <test file>\`)`] : [];
    });
    expect(problems, problems.join("\n")).toEqual([]);
    expect(blocks.length).toBeGreaterThan(0);
  });

  it("every command pastes into bash: it parses, and has no <placeholder>", () => {
    const problems: string[] = [];
    for (const b of blocks) {
      for (const c of b.commands) {
        const placeholder = /<[A-Za-z_][\w|.…-]*>/.exec(unquoted(c));
        if (placeholder) problems.push(`${where(b)}: \`${c}\` has the placeholder ${placeholder[0]}, which bash reads as a redirection`);
        try {
          execFileSync("bash", ["-n", "-c", c], { stdio: "pipe" });
        } catch (err) {
          problems.push(`${where(b)}: \`${c}\` does not parse: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
        }
      }
    }
    expect(problems, problems.join("\n")).toEqual([]);
  });

  for (const b of blocks) {
    const plan = planOf(b);
    if (plan.kind === "run-by") {
      it(`${where(b)}: run by ${plan.file}, which holds each command as written`, () => {
        const file = path.join(repo, plan.file);
        expect(existsSync(file), `${where(b)}: ${plan.file} does not exist`).toBe(true);
        const text = readFileSync(file, "utf8");
        const missing = b.commands.filter((c) => !text.includes(c));
        expect(missing, `${where(b)}: ${plan.file} does not hold these commands as written:\n${missing.join("\n")}`).toEqual([]);
      });
    } else if (plan.kind === "ci") {
      it(`${where(b)}: run by .ci/run, which holds each command as written`, () => {
        const text = readFileSync(path.join(repo, ".ci/run"), "utf8");
        const missing = b.commands.filter((c) => !text.includes(c));
        expect(missing, `${where(b)}: .ci/run does not hold these commands as written:\n${missing.join("\n")}`).toEqual([]);
      });
    }
  }

  it("each expectation of this file names a command it runs", () => {
    const runCommands = blocks.filter((b) => planOf(b).kind === "run").flatMap((b) => b.commands);
    const stale = EXPECTED.filter(([part]) => !runCommands.some((c) => c.includes(part))).map(([part]) => part);
    expect(stale, `no README command this file runs contains:\n${stale.join("\n")}`).toEqual([]);
  });
});

