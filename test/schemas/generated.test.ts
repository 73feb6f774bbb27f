// Generated files are checked in; these tests fail when they no longer match their sources,
// the way CI should, so nobody ships types or embedded schemas that drifted from v1/*.schema.json.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it, expect } from "vitest";

const pkgRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../schemas");
const GENERATED = ["schemas.ts", "types.ts"];

describe("generated files", () => {
  it("src/generated matches a fresh run of scripts/generate.mjs", () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "nodefabric-schemas-"));
    try {
      execFileSync(process.execPath, [path.join(pkgRoot, "scripts", "generate.mjs"), "--out", out], { cwd: pkgRoot, stdio: "pipe" });
      expect(fs.readdirSync(out).sort()).toEqual(GENERATED);
      for (const file of GENERATED) {
        const fresh = fs.readFileSync(path.join(out, file), "utf8");
        const checkedIn = fs.readFileSync(path.join(pkgRoot, "src", "generated", file), "utf8");
        // A plain boolean keeps the failure message short; the hint says how to fix it.
        expect(checkedIn === fresh, `src/generated/${file} is stale: run npm run generate -w @nodefabric/schemas`).toBe(true);
      }
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });

  it("generation is deterministic", () => {
    const a = fs.mkdtempSync(path.join(os.tmpdir(), "nodefabric-schemas-a-"));
    const b = fs.mkdtempSync(path.join(os.tmpdir(), "nodefabric-schemas-b-"));
    try {
      for (const out of [a, b]) {
        execFileSync(process.execPath, [path.join(pkgRoot, "scripts", "generate.mjs"), "--out", out], { cwd: pkgRoot, stdio: "pipe" });
      }
      for (const file of GENERATED) {
        expect(fs.readFileSync(path.join(a, file), "utf8")).toBe(fs.readFileSync(path.join(b, file), "utf8"));
      }
    } finally {
      fs.rmSync(a, { recursive: true, force: true });
      fs.rmSync(b, { recursive: true, force: true });
    }
  });

  it("vectors/invalid matches a fresh run of scripts/make-vectors.mjs", () => {
    const run = () =>
      execFileSync(process.execPath, [path.join(pkgRoot, "scripts", "make-vectors.mjs"), "--check"], { cwd: pkgRoot, stdio: "pipe" });
    expect(run).not.toThrow();
  });
});
