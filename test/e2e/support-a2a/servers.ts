/**
 * The A2A agents the end-to-end tests point the official TCK at: a real `fabric dev` serving A2A on its gateway
 * (plugins/a2a, loaded by default), and a reference agent built only from the official JS SDK (reference-agent.mjs),
 * which shows the harness reads the TCK's verdicts right whatever the fabric does.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startFabricProcess, type FabricProcess } from "../fabric-cli.js";

export const repo = fileURLToPath(new URL("../../..", import.meta.url));

/** The parts of an A2A 1.0 Agent Card the harness reads. */
export interface AgentCard {
  name?: string;
  supportedInterfaces?: { url: string; protocolBinding: string; protocolVersion?: string }[];
  capabilities?: { streaming?: boolean; pushNotifications?: boolean; extendedAgentCard?: boolean };
  securitySchemes?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface A2aAgent {
  /** Where the Agent Card is: <base>/.well-known/agent-card.json. */
  base: string;
  card: AgentCard;
  /**
   * The card's JSON-RPC interface URL: the TCK's --sut-url (it reads the card at that URL's host root, and posts its
   * raw JSON-RPC tests to the URL itself).
   */
  jsonrpc: string;
  output(): string;
  stop(): Promise<void>;
}

/** Reads the Agent Card at base, waiting until it is served (a plugin may finish loading after the banner). */
export async function readCard(base: string, timeoutMs = 30_000): Promise<AgentCard> {
  const until = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    const r = await fetch(`${base}/.well-known/agent-card.json`).catch((e: unknown) => String(e));
    if (typeof r !== "string" && r.ok) return (await r.json()) as AgentCard;
    last = typeof r === "string" ? r : `HTTP ${r.status}: ${(await r.text()).slice(0, 500)}`;
    if (Date.now() > until) throw new Error(`no Agent Card at ${base}/.well-known/agent-card.json: ${last}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** The URL of the card's JSON-RPC interface (the 1.0 binding name JSONRPC). */
export function jsonRpcUrl(card: AgentCard): string {
  const i = card.supportedInterfaces?.find((x) => x.protocolBinding === "JSONRPC");
  if (!i) throw new Error(`the Agent Card declares no JSONRPC interface: ${JSON.stringify(card.supportedInterfaces)}`);
  return i.url;
}

/**
 * Starts `fabric dev` as a user would, on free ports, with the demo handlers, and answers its Agent Card and JSON-RPC
 * URL. The gateway's own auth (dev mode) applies, as for any client. The TCK's push tests receive notifications at
 * http://localhost:8888/webhook: the operator allows loopback egress, as anyone running a webhook receiver beside the
 * fabric would (push notifications go through the executor's egress policy).
 */
export async function startA2aFabric(options: { handlers?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<A2aAgent & { fabric: FabricProcess; gateway: string }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "nf-a2a-tck-"));
  const handlers = options.handlers ?? ["@nodefabric/handler-demo"];
  const fabric = await startFabricProcess(["dev", "--port-base", "0", "--data-dir", dataDir, "--handlers", ...handlers], {
    cwd: repo,
    env: options.env ?? { FABRIC_EXECUTOR_EGRESS_ALLOW_CIDRS: "127.0.0.1/32,::1/128" },
  });
  const gateway = fabric.urls["run-gateway"];
  // The TCK reads the card's URLs, which follow the request's Host: it flags 127.0.0.1 in a public card as an internal
  // address but allows localhost (its own test says so), so the TCK is pointed at localhost, as a user on the machine.
  const base = gateway.replace("//127.0.0.1:", "//localhost:");
  try {
    const card = await readCard(base);
    return {
      fabric,
      gateway,
      base,
      card,
      jsonrpc: jsonRpcUrl(card),
      output: fabric.output,
      async stop() {
        await fabric.stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await fabric.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`${(err as Error).message}\n\nfabric output:\n${fabric.output().slice(-3000)}`);
  }
}

/** Starts reference-agent.mjs on a free loopback port. */
export async function startReferenceAgent(env: NodeJS.ProcessEnv = {}): Promise<A2aAgent & { child: ChildProcess }> {
  const child = spawn(process.execPath, [path.join(repo, "test/e2e/support-a2a/reference-agent.mjs"), "0"], { cwd: repo, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the reference agent did not start:\n${out}`)), 30_000);
    const check = () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout!.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the reference agent exited with ${code}:\n${out}`));
    });
  });
  const card = await readCard(base);
  return {
    child,
    base,
    card,
    jsonrpc: jsonRpcUrl(card),
    output: () => out,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
