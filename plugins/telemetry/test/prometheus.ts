/**
 * A real Prometheus for the tests (Debian's `prometheus` package; .ci/run installs it when missing): it scrapes the
 * fabric's /metrics with its own text-format parser, and the tests read what it stored through its query API.
 * `promtool check metrics` lints a scrape as Prometheus's own tooling does.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export const PROMETHEUS = "/usr/bin/prometheus";
export const PROMTOOL = "/usr/bin/promtool";

export interface Prometheus {
  url: string;
  /** The value of an instant query that yields one series (e.g. a `sum(...)`); undefined when it yields none. */
  query(q: string): Promise<number | undefined>;
  /** Waits until a query's value satisfies `ok`; returns it. */
  until(q: string, ok: (v: number | undefined) => boolean, ms?: number): Promise<number | undefined>;
  /** The health of each scrape target, by URL. */
  targets(): Promise<{ scrapeUrl: string; health: string; lastError: string }[]>;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Starts Prometheus scraping `targets` (base URLs) every 100 ms, with a bearer token when given. */
export async function startPrometheus(targets: string[], options: { bearer?: string } = {}): Promise<Prometheus> {
  if (!fs.existsSync(PROMETHEUS)) throw new Error(`${PROMETHEUS} is missing: install Debian's prometheus package (apt-get install prometheus), as .ci/run does`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nf-prometheus-"));
  const port = await freePort();
  const auth = options.bearer ? `    authorization: { type: Bearer, credentials_file: ${JSON.stringify(path.join(dir, "token"))} }\n` : "";
  if (options.bearer) fs.writeFileSync(path.join(dir, "token"), options.bearer);
  const hosts = targets.map((t) => JSON.stringify(new URL(t).host));
  fs.writeFileSync(
    path.join(dir, "prometheus.yml"),
    `global:\n  scrape_interval: 100ms\n  scrape_timeout: 90ms\nscrape_configs:\n  - job_name: nodefabric\n${auth}    static_configs:\n      - targets: [${hosts.join(", ")}]\n`,
  );
  const child: ChildProcess = spawn(PROMETHEUS, [
    `--config.file=${path.join(dir, "prometheus.yml")}`,
    `--storage.tsdb.path=${path.join(dir, "data")}`,
    `--web.listen-address=127.0.0.1:${port}`,
    "--log.level=warn",
  ], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.on("data", (c: Buffer) => (log += c.toString()));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  const api = async (p: string) => {
    const res = await fetch(`${url}${p}`);
    const body = (await res.json()) as { status: string; data: any; error?: string };
    if (body.status !== "success") throw new Error(`Prometheus ${p}: ${body.error}`);
    return body.data;
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}:\n${log}`);
    try {
      if ((await fetch(`${url}/-/ready`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`prometheus did not become ready:\n${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const query = async (q: string) => {
    const data = await api(`/api/v1/query?query=${encodeURIComponent(q)}`);
    const result = data.result as { value: [number, string] }[];
    return result.length === 0 ? undefined : Number(result[0].value[1]);
  };
  return {
    url,
    query,
    async until(q, ok, ms = 10_000) {
      const end = Date.now() + ms;
      let last: number | undefined;
      for (;;) {
        last = await query(q);
        if (ok(last)) return last;
        if (Date.now() > end) throw new Error(`Prometheus: ${q} is ${last} after ${ms} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async targets() {
      const data = await api("/api/v1/targets");
      return (data.activeTargets as { scrapeUrl: string; health: string; lastError: string }[]).map((t) => ({ scrapeUrl: t.scrapeUrl, health: t.health, lastError: t.lastError }));
    },
    async close() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `promtool check metrics` on a scrape's text: its complaints (empty when it has none) and exit code. */
export function promtoolCheck(text: string): { code: number | null; output: string } {
  const r = spawnSync(PROMTOOL, ["check", "metrics"], { input: text, encoding: "utf8" });
  return { code: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}
