/**
 * The generated reference pages (docs/configuration.md, and every other page a scripts/docs/*.mjs makes) are what the
 * code makes now: `npm run docs` writes them, this checks them. It runs the built packages, as `npm run docs` does.
 */
import { describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { repo } from "./readme-blocks.js";

const run = promisify(execFile);

describe("generated reference pages", () => {
  it("each scripts/docs/*.mjs has its page in docs/, and every page is fresh (npm run build && npm run docs)", async () => {
    const scripts = readdirSync(path.join(repo, "scripts", "docs")).filter((f) => f.endsWith(".mjs"));
    expect(scripts).toContain("configuration.mjs");
    const result = await run(process.execPath, [path.join(repo, "scripts", "generate-docs.mjs"), "--check"], { cwd: repo }).then(
      () => "fresh",
      (err: { stderr?: string }) => err.stderr ?? String(err),
    );
    expect(result).toBe("fresh");
  }, 60_000);
});
