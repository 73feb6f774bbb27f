/**
 * The official third-party MCP tools, as the end-to-end tests run them: the conformance suite
 * (`@modelcontextprotocol/conformance`) and the inspector's CLI (`@modelcontextprotocol/inspector --cli`).
 *
 * Both need Node >= 22, so they run on a Node 24 fetched from the npm registry by `.ci/node.sh 24`, and they are
 * installed by npm running on that Node (Node 24 first on PATH) into a cache folder outside the repository (never its node_modules), one folder per
 * package and version, reused across runs: `$XDG_CACHE_HOME/nodefabric-e2e` (else `~/.cache/nodefabric-e2e`).
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("../../..", import.meta.url));

/** The versions the tests pin. 0.2.0-alpha.12 is the first line with `--requirements` and the 2026-07-28 revision. */
export const CONFORMANCE = { name: "@modelcontextprotocol/conformance", version: "0.2.0-alpha.12", bin: "dist/index.js" };
export const INSPECTOR = { name: "@modelcontextprotocol/inspector", version: "2.12.0", bin: "clients/launcher/build/index.js" };

export function cacheRoot(): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "nodefabric-e2e");
}

let node24: Promise<string> | undefined;

/** The bin folder of Node 24 (`.ci/node.sh 24`, cached after the first fetch). */
export function node24Bin(): Promise<string> {
  node24 ??= run(path.join(repo, ".ci/node.sh"), ["24"], { timeout: 300_000 }).then(({ stdout }) => {
    const bin = stdout.trim().split("\n").pop()!;
    if (!existsSync(path.join(bin, "node"))) throw new Error(`.ci/node.sh 24 printed ${bin}, which holds no node`);
    return bin;
  });
  return node24;
}

/** `process.env` with Node 24 first on PATH. */
export async function node24Env(extra: NodeJS.ProcessEnv = {}): Promise<NodeJS.ProcessEnv> {
  const bin = await node24Bin();
  return { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}`, ...extra };
}

/**
 * Installs `pkg@version` with Node 24's npm into `<cache>/<name>-<version>` unless it is there already, and answers the
 * path of its entry script. A finished install appears at once or not at all (it is made in a temporary folder and
 * renamed), so two test files sharing the cache never see half of one.
 */
export async function ensureTool(tool: { name: string; version: string; bin: string }): Promise<string> {
  const dir = path.join(cacheRoot(), `${tool.name.replace(/^@/, "").replace(/\//g, "+")}-${tool.version}`);
  const entry = (d: string) => path.join(d, "node_modules", tool.name, tool.bin);
  const installed = (d: string) => {
    try {
      return JSON.parse(readFileSync(path.join(d, "node_modules", tool.name, "package.json"), "utf8")).version === tool.version && existsSync(entry(d));
    } catch {
      return false;
    }
  };
  if (installed(dir)) return entry(dir);
  mkdirSync(cacheRoot(), { recursive: true });
  const tmp = mkdtempSync(path.join(cacheRoot(), ".install-"));
  try {
    writeFileSync(path.join(tmp, "package.json"), JSON.stringify({ private: true, name: "nodefabric-e2e-tool" }));
    // The npm on PATH, run by Node 24 (its package from the registry carries node alone, not npm).
    // --ignore-scripts: neither tool needs its install scripts when installed as a dependency (the inspector's
    // postinstall only sets up a source checkout), and nothing should run at install time that the tests did not ask for.
    await run("npm", ["install", `${tool.name}@${tool.version}`, "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"], {
      cwd: tmp,
      env: await node24Env(),
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    if (!installed(tmp)) throw new Error(`npm install ${tool.name}@${tool.version} left no ${tool.bin}`);
    try {
      renameSync(tmp, dir);
    } catch (err) {
      if (!installed(dir)) throw err; // someone else finished first: theirs is as good as ours
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return entry(dir);
}

export interface Exec {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node <script> <args>` on Node 24 and collects its output (never throws on a nonzero exit). */
export async function runOnNode24(script: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Exec> {
  const bin = await node24Bin();
  const env = await node24Env(options.env);
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(bin, "node"), [script, ...args], { cwd: options.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 180_000);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

// ---------------------------------------------------------------------------------------------------------------------
// The conformance suite

export type CheckStatus = "SUCCESS" | "FAILURE" | "WARNING" | "SKIPPED" | "INFO";

export interface ConformanceCheck {
  id: string;
  name?: string;
  description?: string;
  status: CheckStatus;
  errorMessage?: string;
  details?: unknown;
}

export interface ScenarioResult {
  scenario: string;
  checks: ConformanceCheck[];
  /** No check failed (warnings, skips and infos are not failures, as the suite itself counts). */
  passed: boolean;
  failures: ConformanceCheck[];
}

export interface ConformanceRun extends Exec {
  command: string;
  scenarios: Map<string, ScenarioResult>;
}

/** The scenarios a revision's frozen requirement set names, read from the installed suite's requirements/<rev>.yaml. */
export async function requirementSet(revision: string): Promise<{ server: string[]; client: string[]; notScored: { scenario: string; leg: string; reason: string }[] }> {
  const entry = await ensureTool(CONFORMANCE);
  const text = readFileSync(path.join(path.dirname(path.dirname(entry)), "requirements", `${revision}.yaml`), "utf8");
  // A small reader for this file's plain shape (two lists of names and a list of maps), so the tests need no YAML library.
  const out = { server: [] as string[], client: [] as string[], notScored: [] as { scenario: string; leg: string; reason: string }[] };
  let section = "";
  let current: Record<string, string> | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "").trimEnd();
    if (!line.trim()) continue;
    const top = /^([a-z_]+):\s*$/.exec(line);
    if (top) {
      section = top[1];
      continue;
    }
    const item = /^\s*-\s+(\S.*)$/.exec(line);
    if (section === "server" || section === "client") {
      if (item) out[section].push(item[1].trim());
    } else if (section === "not_scored") {
      const kv = /^\s*(?:-\s+)?([a-z_]+):\s*(.*)$/.exec(line);
      if (!kv) continue;
      if (/^\s*-\s/.test(line)) out.notScored.push((current = {}) as never);
      if (current) current[kv[1]] = kv[2].trim();
    }
  }
  return out;
}

/**
 * Runs `conformance server --url <url>` with the given selection (`--requirements <rev>`, or `--scenario <name>`
 * with `--spec-version`), saving results to a fresh folder, and answers each scenario's checks as the suite wrote
 * them (`<out>/server-<scenario>-<timestamp>/checks.json`).
 */
export async function runConformanceServer(url: string, selection: string[], options: { timeoutMs?: number } = {}): Promise<ConformanceRun> {
  const entry = await ensureTool(CONFORMANCE);
  const out = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-conformance-"));
  try {
    const args = ["server", "--url", url, ...selection, "--output-dir", out];
    const exec = await runOnNode24(entry, args, { cwd: out, timeoutMs: options.timeoutMs ?? 240_000 });
    return { ...exec, command: `conformance ${args.slice(0, -2).join(" ")}`, scenarios: readResults(out, "server") };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** Runs `conformance client --command <cmd> ...` and answers each scenario's checks. */
export async function runConformanceClient(command: string, selection: string[], options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<ConformanceRun> {
  const entry = await ensureTool(CONFORMANCE);
  const out = mkdtempSync(path.join(os.tmpdir(), "nf-mcp-conformance-"));
  try {
    const args = ["client", "--command", command, ...selection, "--output-dir", out];
    const exec = await runOnNode24(entry, args, { cwd: out, env: options.env, timeoutMs: options.timeoutMs ?? 240_000 });
    return { ...exec, command: `conformance ${args.slice(0, -2).join(" ")}`, scenarios: readResults(out, "") };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

function readResults(out: string, prefix: string): Map<string, ScenarioResult> {
  const scenarios = new Map<string, ScenarioResult>();
  const walk = (dir: string, rel: string) => {
    for (const ent of readdirSync(dir, { withFileTypes: true })) {
      if (!ent.isDirectory()) continue;
      const full = path.join(dir, ent.name);
      const file = path.join(full, "checks.json");
      if (!existsSync(file)) {
        walk(full, rel ? `${rel}/${ent.name}` : ent.name); // client auth scenarios are named auth/<x>: a nested folder
        continue;
      }
      const m = /^(.*)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(ent.name);
      let name = (rel ? `${rel}/` : "") + (m ? m[1] : ent.name);
      if (prefix && name.startsWith(`${prefix}-`)) name = name.slice(prefix.length + 1);
      const checks = JSON.parse(readFileSync(file, "utf8")) as ConformanceCheck[];
      const failures = checks.filter((c) => c.status === "FAILURE");
      scenarios.set(name, { scenario: name, checks, passed: failures.length === 0 && checks.length > 0, failures });
    }
  };
  walk(out, "");
  return scenarios;
}

/** One line per scenario, for a failing assertion's message and the test log. */
export function summarize(results: Iterable<ScenarioResult>): string {
  const lines: string[] = [];
  for (const r of results) {
    const ok = r.checks.filter((c) => c.status === "SUCCESS").length;
    lines.push(`${r.passed ? "PASS" : "FAIL"} ${r.scenario}: ${ok}/${r.checks.length} checks succeeded`);
    for (const f of r.failures) lines.push(`     ✗ ${f.id}: ${f.errorMessage ?? f.description ?? ""}`.slice(0, 400));
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------------------------------
// The inspector CLI

export interface InspectorRun extends Exec {
  /** The JSON the CLI printed with `--format json` (stdout on success; on failure its error envelope on stderr). */
  json: any;
}

/**
 * Runs `mcp-inspector --cli <args> --format json`. HOME points at a scratch folder, so the inspector's catalog and
 * secret store (~/.mcp-inspector) never touch the user's own.
 */
export async function runInspector(args: string[], options: { home?: string; timeoutMs?: number } = {}): Promise<InspectorRun> {
  const entry = await ensureTool(INSPECTOR);
  const home = options.home ?? mkdtempSync(path.join(os.tmpdir(), "nf-inspector-home-"));
  let exec: Exec;
  try {
    exec = await runOnNode24(entry, ["--cli", ...args, "--format", "json"], {
      cwd: home,
      env: { HOME: home, MCP_CATALOG_PATH: path.join(home, "mcp.json"), MCP_CLIENT_CONFIG_PATH: path.join(home, "client.json") },
      timeoutMs: options.timeoutMs ?? 60_000,
    });
  } finally {
    if (!options.home) rmSync(home, { recursive: true, force: true });
  }
  const parse = (s: string) => {
    const t = s.trim();
    if (!t) return undefined;
    try {
      return JSON.parse(t);
    } catch {
      const last = t.split("\n").filter((l) => l.startsWith("{")).pop();
      try {
        return last ? JSON.parse(last) : undefined;
      } catch {
        return undefined;
      }
    }
  };
  return { ...exec, json: parse(exec.stdout) ?? parse(exec.stderr) };
}
