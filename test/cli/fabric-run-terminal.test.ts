/**
 * `fabric run` on a terminal, as a person sees it: the built command runs in a tmux pane against a real `fabric dev`,
 * and the pane is read back as the screen shows it (capture-pane), after every redraw and cursor movement. What must
 * be there: the tree of NodeRuns with states and durations (live while the run runs), a line for each retry, progress
 * message and failure, the outputs cut to a readable size, the exit code; what must not: raw JSON event lines. With
 * --json, the terminal gets today's NDJSON. NO_COLOR and a narrow terminal are respected. `--gateway` alone is given
 * throughout: the latest versions are found through the registry the gateway names.
 */
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { validatorFor, type Run, type RunEvent } from "@nodefabric/schemas";
import { CLI, startFabricProcess, type FabricProcess } from "../e2e/fabric-cli.js";
import { call, eventually } from "../run-client.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const hasTmux = spawnSync("tmux", ["-V"], { stdio: "ignore" }).status === 0;
const EXIT = "__fabric_exit=";
// eslint-disable-next-line no-control-regex
const SGR = /\x1b\[[0-9;]*m/;

const sh = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
let panes = 0;

/** A tmux pane running one command, on its own tmux server (socket) so tests never meet another's. */
class Pane {
  readonly socket = `nf-run-${process.pid}-${++panes}`;

  constructor(args: string[], o: { width?: number; height?: number; env?: Record<string, string> } = {}) {
    const env = Object.entries(o.env ?? {}).map(([k, v]) => `${k}=${sh(v)}`);
    // The exit code is printed after the command, and the pane stays open to be read.
    const command = `env ${env.join(" ")} ${[process.execPath, CLI, ...args].map(sh).join(" ")}; echo ${EXIT}$?; sleep 600`;
    // A terminal that shows colours unless a test says otherwise, whatever the one running the tests does.
    const { NO_COLOR: _noColor, TMUX: _tmux, ...inherited } = process.env;
    // scroll-on-clear off: tmux would otherwise keep each frame the redraw clears in its scrollback, which the pane
    // is read back with, though no screen shows it.
    const size = ["-x", String(o.width ?? 120), "-y", String(o.height ?? 50)];
    const r = spawnSync("tmux", ["-L", this.socket, "-f", "/dev/null", "start-server", ";", "set-option", "-g", "scroll-on-clear", "off", ";", "new-session", "-d", ...size, command], {
      cwd: repo,
      env: { ...inherited, TERM: "xterm-256color" },
      encoding: "utf8",
    });
    if (r.status !== 0) throw new Error(`tmux new-session failed: ${r.stderr}`);
  }

  /** The screen and its scrollback, one line per screen line (-J joins what the terminal wrapped); -e keeps colours. */
  screen(escapes = false): string {
    const r = spawnSync("tmux", ["-L", this.socket, "capture-pane", "-p", "-J", "-S", "-", ...(escapes ? ["-e"] : [])], { encoding: "utf8" });
    return r.stdout;
  }

  /** The lines the command printed (no trailing blanks), once it has exited, and its exit code. */
  async finished(ms = 60_000): Promise<{ lines: string[]; code: number; text: string }> {
    const text = await eventually(async () => (this.screen().includes(EXIT) ? this.screen() : undefined), ms, `the command's end; screen so far:\n${this.screen()}`);
    const lines = text.split("\n").map((l) => l.trimEnd());
    const at = lines.findIndex((l) => l.startsWith(EXIT));
    return { lines: lines.slice(0, at).filter((l) => l !== ""), code: Number(lines[at]!.slice(EXIT.length)), text: lines.slice(0, at).join("\n") };
  }

  close(): void {
    spawnSync("tmux", ["-L", this.socket, "kill-server"], { stdio: "ignore" });
  }
}

describe("fabric run on a terminal (a tmux pane, read back as the screen shows it)", () => {
  let fabric: FabricProcess;
  let gw: string[];
  const opened: Pane[] = [];
  const open = (...a: ConstructorParameters<typeof Pane>) => {
    const p = new Pane(...a);
    opened.push(p);
    return p;
  };

  beforeAll(async () => {
    expect(hasTmux, "these tests need tmux (.ci/run installs it)").toBe(true);
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-run-tty-"));
    const handlers = ["@nodefabric/handler-demo", "test/fixtures/run-handlers", "test/fixtures/terminal-handlers"];
    // Port 0: the registry is not where the defaults put it, so only the gateway can say where it is.
    fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", dataDir, "--handlers", ...handlers], { cwd: repo });
    gw = ["--gateway", fabric.urls["run-gateway"]!];
    await eventually(async () => {
      const r = await call("GET", `${fabric.urls["node-registry"]}/v1/executors?node_type_id=fixture.trip`);
      return r.body?.length > 0 ? true : undefined;
    }, 20_000, "fixture.trip served");
  }, 60_000);

  afterAll(async () => {
    for (const p of opened) p.close();
    await fabric?.stop();
  });

  it("shows the tree of NodeRuns, a line for each retry and progress message, then the outputs cut to size; exit 0", async () => {
    const pane = open(["run", "fixture.trip", "--input", '{"city":"Lyon"}', ...gw]);
    const { lines, code, text } = await pane.finished();
    expect(code, text).toBe(0);

    // The tree as it was last drawn: the run, then each NodeRun indented under its parent, with state and duration.
    const tree = lines.filter((l) => /^run |^\s+[·○▶✓✗⊘] /.test(l));
    expect(tree[0]).toMatch(/^run \S+ {2}completed {2}\d+(ms|\.\d+s)$/);
    expect(tree).toContainEqual(expect.stringMatching(/^ {2}✓ fixture\.trip@1\.0\.0\s+completed {2}\S+$/));
    for (const child of ["fixture\\.steps", "fixture\\.flaky", "demo\\.echo"]) {
      expect(tree).toContainEqual(expect.stringMatching(new RegExp(`^ {4}✓ ${child}@1\\.0\\.0\\s+completed {2}\\S+$`)));
    }
    expect(tree).toHaveLength(5);

    // Above it, what happened along the way: fixture.flaky's two failed attempts, fixture.steps' messages.
    const record = lines.filter((l) => /^\d{2}:\d{2}:\d{2} {2}/.test(l));
    expect(record).toContainEqual(expect.stringMatching(/^\d{2}:\d{2}:\d{2} {2}fixture\.flaky@1\.0\.0 {2}retrying in \S+ \(attempt 2\): upstream_error: attempt 1 failed$/));
    expect(record).toContainEqual(expect.stringMatching(/fixture\.flaky@1\.0\.0 {2}retrying in \S+ \(attempt 3\): upstream_error: attempt 2 failed$/));
    expect(record).toContainEqual(expect.stringMatching(/fixture\.steps@1\.0\.0 {2}step \d of 3 \(\d\/3\)$/));
    expect(lines.indexOf(record[0]!)).toBeLessThan(lines.indexOf(tree[0]!));

    // Then the outputs, pretty-printed, with the long text and the long list cut and where to read all of them.
    const at = lines.findIndex((l) => l.startsWith("outputs"));
    expect(at).toBeGreaterThan(lines.indexOf(tree[tree.length - 1]!));
    expect(lines[at]).toMatch(/^outputs {2}\(cut; all of them: fabric runs get \S+\)$/);
    const outputs = JSON.parse(lines.slice(at + 1).join("\n"));
    expect(outputs).toMatchObject({ city: "Lyon", attempts: 3 });
    expect(outputs.text).toMatch(/^(lorem ipsum ){25}… \(900 more characters\)$/);
    expect(outputs.items).toEqual([...Array.from({ length: 20 }, (_, i) => i), "… 30 more items"]);

    // No raw JSON event lines, nowhere.
    expect(text).not.toMatch(/"(node_run_id|seq|run_id)":/);
    expect(lines.filter((l) => l.startsWith('{"'))).toEqual([]);
    // In colour, as a terminal shows it: completed in green.
    expect(pane.screen(true)).toMatch(/\x1b\[32m(completed|✓)/); // eslint-disable-line no-control-regex
  });

  it("draws the tree live while the run runs, within a narrow terminal's width, without colour under NO_COLOR", async () => {
    const pane = open(["run", "demo.sleep", "--input", '{"ms":2500}', ...gw], { width: 48, env: { NO_COLOR: "1" } });
    const running = await eventually(async () => {
      const s = pane.screen();
      return /^ {2}▶ demo\.sleep@1\.0\.0\s+running {2}\S+$/m.test(s) ? s : undefined;
    }, 20_000, `demo.sleep running on the screen: ${pane.screen()}`);
    // The run's line keeps its state in sight: the long run id is what gets cut.
    expect(running).toMatch(/^run \S+… {2}running {2}\d/m);
    const { lines, code, text } = await pane.finished();
    expect(code, text).toBe(0);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}✓ demo\.sleep@1\.0\.0\s+completed {2}\d\.\ds$/));
    // Each line of the tree fits in 48 columns (-J would have joined a wrapped one).
    for (const l of lines.filter((x) => /^run |^\s+[·○▶✓✗⊘] /.test(x))) expect(Array.from(l).length, l).toBeLessThanOrEqual(48);
    expect(lines.find((l) => l.startsWith("run "))).toMatch(/^run run_\S*… {2}completed {2}\d\.\ds$/);
    expect(pane.screen(true)).not.toMatch(SGR);
  });

  it("shows a failed run's NodeRun and its error, prints no outputs, and exits 1", async () => {
    const pane = open(["run", "demo.fail", "--input", '{"code":"boom","message":"failed on purpose"}', ...gw]);
    const { lines, code, text } = await pane.finished();
    expect(code, text).toBe(1);
    expect(lines).toContainEqual(expect.stringMatching(/^run \S+ {2}failed {2}\S+$/));
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}✗ demo\.fail@1\.0\.0\s+failed {2}\S+ {2}boom$/));
    expect(lines).toContainEqual(expect.stringMatching(/^\d{2}:\d{2}:\d{2} {2}demo\.fail@1\.0\.0 {2}failed: boom: failed on purpose$/));
    // stderr, on the same terminal, as today.
    expect(lines[lines.length - 1]).toBe("fabric: boom: failed on purpose");
    expect(lines.some((l) => l.startsWith("outputs"))).toBe(false);
  });

  it("prints today's NDJSON with --json, on a terminal too", async () => {
    const pane = open(["run", "demo.echo", "--input", '{"a":1}', "--json", ...gw], { width: 300 });
    const { lines, code, text } = await pane.finished();
    expect(code, text).toBe(0);
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const last = parsed.pop() as { run: Run };
    expect(Object.keys(last)).toEqual(["run"]);
    expect(validatorFor("run")(last.run)).toBe(true);
    expect(last.run.extensions?.["nodefabric.outputs"]).toEqual({ echo: { a: 1 } });
    const events = parsed as unknown as RunEvent[];
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    expect(events[events.length - 1]).toMatchObject({ type: "run_completed", data: { state: "completed" } });
    expect(pane.screen(true)).not.toMatch(SGR);
  });
});
