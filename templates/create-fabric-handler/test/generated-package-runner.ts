/**
 * Runs a generated package's own test suite and typecheck against this workspace, without `npm install`: the package
 * is written to a temporary folder whose node_modules links to the workspace's (so @nodefabric/sdk is the workspace's
 * build, and vitest, nock, typescript are the workspace's). The lead's end-to-end test does the real install.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { writePackage } from "../src/scaffold.js";
import type { GeneratedFile } from "../src/template-files.js";

const run = promisify(execFile);
const workspaceRoot = fileURLToPath(new URL("../../../", import.meta.url));
const workspaceModules = path.join(workspaceRoot, "node_modules");

/** What a command printed and how it ended. */
export interface CommandOutcome {
  code: number;
  output: string;
}

/** A generated package on disk, linked to the workspace's node_modules. */
export interface LinkedPackage {
  dir: string;
  /** `vitest run` in the package, as `npm test` runs it. */
  test(): Promise<CommandOutcome>;
  /** `tsc --noEmit` in the package, as `npm run typecheck` runs it. */
  typecheck(): Promise<CommandOutcome>;
  remove(): void;
}

/** Writes `files` to a new temporary folder whose node_modules is the workspace's. */
export function linkGeneratedPackage(files: GeneratedFile[]): LinkedPackage {
  if (!existsSync(path.join(workspaceRoot, "sdk", "dist", "testing", "index.js"))) {
    throw new Error("@nodefabric/sdk is not built: run `npm run build` at the workspace root first");
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), "cfh-generated-"));
  writePackage(dir, files);
  symlinkSync(workspaceModules, path.join(dir, "node_modules"), "dir");
  const inDir = async (script: string, args: string[]): Promise<CommandOutcome> => {
    try {
      const { stdout, stderr } = await run(process.execPath, [path.join(workspaceModules, script), ...args], {
        cwd: dir,
        env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0", CI: "1" },
        maxBuffer: 16 * 1024 * 1024,
      });
      return { code: 0, output: stdout + stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof e.code === "number" ? e.code : 1, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
    }
  };
  return {
    dir,
    test: () => inDir("vitest/vitest.mjs", ["run", "--root", dir]),
    typecheck: () => inDir("typescript/bin/tsc", ["--noEmit", "-p", dir]),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Several generated packages side by side in one temporary folder, tested and typechecked together. */
export interface LinkedPackages {
  root: string;
  /** The folder of each package, by the name it was given. */
  dirs: Map<string, string>;
  /** One `vitest run` over every package's tests; the JSON report names each test file. */
  test(): Promise<CommandOutcome & { report?: VitestReport }>;
  /** One `tsc --noEmit` over every package's src and test, with the packages' own compiler options. */
  typecheck(): Promise<CommandOutcome>;
  remove(): void;
}

/** The parts of vitest's JSON report the corpus test reads. */
export interface VitestReport {
  numPassedTests: number;
  numFailedTests: number;
  numTodoTests: number;
  testResults: Array<{ name: string; status: string; message?: string; assertionResults: Array<{ fullName: string; status: string; failureMessages: string[] }> }>;
}

/**
 * Writes each package to `<root>/<name>/`, with one node_modules (the workspace's) above them all; much faster than
 * installing and running each package on its own, and the same code runs.
 */
export function linkGeneratedPackages(packages: Array<{ name: string; files: GeneratedFile[] }>): LinkedPackages {
  if (!existsSync(path.join(workspaceRoot, "sdk", "dist", "testing", "index.js"))) {
    throw new Error("@nodefabric/sdk is not built: run `npm run build` at the workspace root first");
  }
  const root = mkdtempSync(path.join(os.tmpdir(), "cfh-corpus-"));
  const dirs = new Map<string, string>();
  for (const { name, files } of packages) {
    const dir = path.join(root, name);
    writePackage(dir, files);
    dirs.set(name, dir);
  }
  symlinkSync(workspaceModules, path.join(root, "node_modules"), "dir");
  const sharedOptions = JSON.parse(readFileSync(path.join(dirs.values().next().value as string, "tsconfig.json"), "utf8")) as { compilerOptions: object };
  writeFileSync(path.join(root, "tsconfig.json"), JSON.stringify({ compilerOptions: sharedOptions.compilerOptions, include: ["*/src", "*/test"] }, null, 2));
  const inRoot = async (script: string, args: string[]): Promise<CommandOutcome> => {
    try {
      const { stdout, stderr } = await run(process.execPath, [path.join(workspaceModules, script), ...args], {
        cwd: root,
        env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0", CI: "1" },
        maxBuffer: 256 * 1024 * 1024,
      });
      return { code: 0, output: stdout + stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof e.code === "number" ? e.code : 1, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
    }
  };
  return {
    root,
    dirs,
    test: async () => {
      const reportFile = path.join(root, "vitest-report.json");
      const outcome = await inRoot("vitest/vitest.mjs", ["run", "--root", root, "--reporter=json", `--outputFile=${reportFile}`, "--testTimeout=30000"]);
      const report = existsSync(reportFile) ? (JSON.parse(readFileSync(reportFile, "utf8")) as VitestReport) : undefined;
      return { ...outcome, report };
    },
    typecheck: () => inRoot("typescript/bin/tsc", ["--noEmit", "-p", root]),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}
