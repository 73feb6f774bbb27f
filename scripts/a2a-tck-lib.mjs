/**
 * The official A2A TCK (github.com/a2aproject/a2a-tck), run from the archive kept in test/fixtures/a2a-tck (CI reaches
 * no GitHub): unpack it to a temporary directory, run one of its categories with pytest against an agent's URL, and
 * read each test's outcome from pytest's JUnit XML report. Used by test/e2e/a2a-tck.test.ts and by
 * `npm run a2a-tck -- <url>` (scripts/a2a-tck.mjs); docs/testing.md, "The A2A TCK".
 *
 * The TCK is Python: it runs on Debian's python3 with the python3-* packages of DEBIAN_PACKAGES (.ci/run installs them),
 * not on a virtualenv from PyPI. It needs none of its optional pytest plugins (json-report, html): the verdicts come
 * from pytest's own --junitxml.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const repo = fileURLToPath(new URL("..", import.meta.url));
export const TCK_COMMIT = "410ba92e1b264df895e1fe6eccfe22db7aeaab06";
export const TCK_ARCHIVE = path.join(repo, `test/fixtures/a2a-tck/a2a-tck-${TCK_COMMIT}.tar.gz`);
/** Debian's Python, where apt's python3-* packages are (not a pyenv or virtualenv one); A2A_TCK_PYTHON overrides it. */
export const PYTHON = process.env.A2A_TCK_PYTHON ?? "/usr/bin/python3";

/**
 * What the TCK imports, as Debian packages (bookworm: pytest 7.2, pytest-asyncio 0.20, httpx 0.23). grpcio and protobuf
 * only because one mandatory module imports the TCK's gRPC client at load time; nothing here speaks gRPC.
 */
export const DEBIAN_PACKAGES = [
  "python3-pytest",
  "python3-pytest-asyncio",
  "python3-httpx",
  "python3-requests",
  "python3-responses",
  "python3-deepdiff",
  "python3-jsonschema",
  "python3-packaging",
  "python3-yaml",
  "python3-openssl",
  "python3-aiohttp",
  "python3-dotenv",
  "python3-grpcio",
  "python3-protobuf",
];
const MODULES = ["pytest", "pytest_asyncio", "httpx", "requests", "responses", "deepdiff", "jsonschema", "packaging", "yaml", "OpenSSL", "aiohttp", "dotenv", "grpc", "google.protobuf"];

/**
 * The TCK's categories, with the selection its own run_tck.py makes for each (path and marker expression). The
 * mandatory category adds `mandatory_jsonrpc`, as run_tck.py does when JSON-RPC is among the transports under test.
 */
export const CATEGORIES = {
  mandatory: { path: "tests/mandatory/", markers: "mandatory or mandatory_protocol or mandatory_jsonrpc" },
  capabilities: { path: "tests/optional/capabilities/" },
  "transport-equivalence": { path: "tests/optional/multi_transport/", markers: "transport_equivalence" },
  quality: { path: "tests/optional/quality/" },
  features: { path: "tests/optional/features/" },
};

/** Runs a command to completion, its output collected. */
export function exec(cmd, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c.toString()));
    child.stderr.on("data", (c) => (stderr += c.toString()));
    const timer = options.timeoutMs ? setTimeout(() => child.kill("SIGKILL"), options.timeoutMs) : undefined;
    child.on("error", (err) => {
      clearTimeout(timer);
      resolve({ code: null, stdout, stderr: stderr + String(err) });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Why the TCK cannot run here (the Python or a module missing, with the apt command that fixes it), or undefined. */
export async function pythonProblem() {
  const probe = `import importlib, sys\nmissing = []\nfor m in ${JSON.stringify(MODULES)}:\n    try:\n        importlib.import_module(m)\n    except Exception:\n        missing.append(m)\nprint(",".join(missing))`;
  const r = await exec(PYTHON, ["-c", probe]);
  if (r.code !== 0) return `${PYTHON} did not run (${r.stderr.trim() || `exit ${r.code}`}): apt-get install python3`;
  const missing = r.stdout.trim();
  if (missing) return `${PYTHON} lacks the modules ${missing}: apt-get install --no-install-recommends ${DEBIAN_PACKAGES.join(" ")}`;
  return undefined;
}

/** Unpacks the TCK archive into a new temporary directory; answers its root and how to remove it. */
export async function unpackTck() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "a2a-tck-"));
  const r = await exec("tar", ["-xzf", TCK_ARCHIVE, "-C", dir]);
  if (r.code !== 0) throw new Error(`could not unpack ${TCK_ARCHIVE}: ${r.stderr}`);
  const root = path.join(dir, "a2a-tck");
  if (!existsSync(path.join(root, "tests/conftest.py"))) throw new Error(`${TCK_ARCHIVE} has no a2a-tck/tests/conftest.py`);
  return { root, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

const ENTITIES = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
function unescapeXml(s) {
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (all, e) => {
    if (e[0] === "#") return String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : Number(e.slice(1)));
    return ENTITIES[e] ?? all;
  });
}
function attributes(tag) {
  const out = {};
  for (const m of tag.matchAll(/([\w:-]+)="([^"]*)"/g)) out[m[1]] = unescapeXml(m[2]);
  return out;
}

/**
 * pytest's node id of a JUnit testcase: its classname is the module's dotted path then any test classes, so the
 * module is up to the last segment that starts with "test_"; e.g. tests/mandatory/protocol/test_x.py::TestY::test_z.
 */
export function nodeId(classname, name) {
  const parts = classname.split(".");
  let m = parts.length - 1;
  while (m > 0 && !parts[m].startsWith("test_")) m--;
  return [`${parts.slice(0, m + 1).join("/")}.py`, ...parts.slice(m + 1), name].join("::");
}

/**
 * Each test's outcome from a pytest JUnit XML report: passed, failed (an assertion), error (in a fixture or setup),
 * skipped (pytest.skip: the TCK's own "does not apply"), xfailed; with the message pytest gave.
 */
export function parseJUnit(xml) {
  const results = new Map();
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const a = attributes(m[1]);
    const body = m[3] ?? "";
    const id = nodeId(a.classname ?? "", a.name ?? "");
    let outcome = "passed";
    let message = "";
    const child = /<(failure|error|skipped)\b([^>]*?)(\/>|>([\s\S]*?)<\/\1>)/.exec(body);
    if (child) {
      const ca = attributes(child[2]);
      outcome = child[1] === "failure" ? "failed" : child[1] === "error" ? "error" : ca.type === "pytest.xfail" ? "xfailed" : "skipped";
      message = ca.message ?? unescapeXml(child[4] ?? "");
    }
    // A test that failed in its teardown after passing is listed twice: the worse outcome stands.
    const prev = results.get(id);
    if (prev && prev.outcome !== "passed") continue;
    results.set(id, { id, outcome, message, time: Number(a.time ?? 0) });
  }
  return results;
}

/** The counts of pytest's final summary line ("30 failed, 34 passed, 39 skipped, …"), by word. */
export function summaryCounts(stdout) {
  const lines = stdout.trim().split("\n").filter((l) => /\d+ (passed|failed|skipped|error|errors|xfailed|xpassed|deselected)\b/.test(l));
  const counts = {};
  for (const m of (lines.at(-1) ?? "").matchAll(/(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b/g)) counts[m[2] === "errors" ? "error" : m[2]] = Number(m[1]);
  return counts;
}

/**
 * Runs one TCK category against the agent at `url` (its base: the TCK reads /.well-known/agent-card.json there and
 * takes the JSON-RPC and HTTP+JSON URLs from the card's supportedInterfaces). `tck` is an unpacked root (unpackTck).
 */
export async function runTck(tck, url, category, options = {}) {
  const cat = CATEGORIES[category];
  if (!cat) throw new Error(`unknown TCK category ${category} (${Object.keys(CATEGORIES).join(", ")})`);
  const report = path.join(mkdtempSync(path.join(os.tmpdir(), "a2a-tck-report-")), "junit.xml");
  const args = ["-m", "pytest", cat.path, `--sut-url=${url}`, "--test-scope=all", "--tb=short", "-q", "-rfE", "-p", "no:cacheprovider", `--junitxml=${report}`];
  if (cat.markers) args.push("-m", cat.markers);
  args.push(...(options.pytestArgs ?? []));
  const env = { ...process.env, PYTHONDONTWRITEBYTECODE: "1", PYTHONUNBUFFERED: "1", ...options.env };
  const r = await exec(PYTHON, args, { cwd: tck, env, timeoutMs: options.timeoutMs ?? 600_000 });
  const xml = existsSync(report) ? readFileSync(report, "utf8") : "";
  rmSync(path.dirname(report), { recursive: true, force: true });
  return { ...r, category, command: `${path.basename(PYTHON)} ${args.join(" ")}`, results: parseJUnit(xml), counts: summaryCounts(r.stdout) };
}
