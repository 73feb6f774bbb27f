/**
 * `fabric runs get|cancel|events|ls`: look at, follow and cancel runs through the gateway.
 */
import type { Run, RunState } from "@nodefabric/schemas";
import { GatewayClient } from "../clients/gateway-client.js";
import { clock } from "../clock.js";
import { EXIT_OK, clientAuthOptions, clientTokenOf, gatewayUrlOf, reportError } from "./run-cli-context.js";
import { formatDuration } from "./run-tree-view.js";

/** Where the gateway is and how to authenticate to it: `--gateway` and `--token` (default: config, $FABRIC_TOKEN). */
export interface GatewayTarget {
  gateway?: string;
  token?: string;
}

export async function withGateway(target: GatewayTarget, body: (client: GatewayClient) => Promise<number>): Promise<number> {
  let client: GatewayClient;
  try {
    client = new GatewayClient(gatewayUrlOf(target.gateway), clientAuthOptions(clientTokenOf(target.token)));
  } catch (err) {
    return reportError(err);
  }
  try {
    return await body(client);
  } catch (err) {
    return reportError(err);
  } finally {
    await client.close();
  }
}

/**
 * What a run's model calls used and hold reserved, against its budgets, for people (docs/runs.md): undefined for a
 * run that has made no model call.
 */
export function modelBudgetLine(run: Run): string | undefined {
  const u = run.extensions?.["nodefabric.usage"] as { tokens?: number; reserved_tokens?: number; cost?: number; reserved_cost?: number } | undefined;
  if (typeof u?.reserved_tokens !== "number") return undefined;
  const b = (run.extensions?.["nodefabric.budgets"] ?? {}) as { max_tokens?: number; max_cost?: number };
  const of = (limit: number | undefined) => (typeof limit === "number" ? ` (budget ${limit})` : "");
  const cost = (v: number | undefined) => String(Math.round((v ?? 0) * 1e6) / 1e6);
  return `model calls: tokens ${u.tokens ?? 0} used + ${u.reserved_tokens} reserved${of(b.max_tokens)}; cost ${cost(u.cost)} used + ${cost(u.reserved_cost)} reserved${of(b.max_cost)}`;
}

/** Prints one run as JSON (and, on stderr, what its model calls used and hold reserved); returns the exit code. */
export function runsGet(gateway: GatewayTarget, runId: string): Promise<number> {
  return withGateway(gateway, async (client) => {
    const run = await client.getRun(runId);
    process.stdout.write(`${JSON.stringify(run, null, 2)}\n`);
    const budget = modelBudgetLine(run);
    if (budget) process.stderr.write(`${budget}\n`);
    return EXIT_OK;
  });
}

/** Cancels a run and prints it as it stands afterwards; returns the exit code. */
export function runsCancel(gateway: GatewayTarget, runId: string): Promise<number> {
  return withGateway(gateway, async (client) => {
    process.stdout.write(`${JSON.stringify(await client.cancelRun(runId), null, 2)}\n`);
    return EXIT_OK;
  });
}

/** Prints a run's events as NDJSON (live until the run ends unless `follow` is false); returns the exit code. */
export function runsEvents(gateway: GatewayTarget, runId: string, opts: { afterSeq?: number; follow: boolean }): Promise<number> {
  return withGateway(gateway, async (client) => {
    for await (const e of client.events(runId, { afterSeq: opts.afterSeq, follow: opts.follow })) {
      process.stdout.write(`${JSON.stringify(e)}\n`);
    }
    return EXIT_OK;
  });
}

function durationOf(run: Run): string {
  if (!run.started_at) return "";
  const start = Date.parse(run.started_at);
  const end = run.ended_at ? Date.parse(run.ended_at) : clock.now();
  return Number.isNaN(start) || Number.isNaN(end) ? "" : formatDuration(end - start);
}

/** Lists recent runs as a table or JSON; returns the exit code. */
export function runsLs(gateway: GatewayTarget, opts: { state?: RunState; limit: number; pageToken?: string; json?: boolean }): Promise<number> {
  return withGateway(gateway, async (client) => {
    const page = await client.listRuns({ state: opts.state, limit: opts.limit, page_token: opts.pageToken });
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(page.items, null, 2)}\n`);
    } else if (page.items.length === 0) {
      process.stdout.write(opts.state ? `no ${opts.state} runs\n` : "no runs\n");
    } else {
      const rows = page.items.map((r) => [r.run_id, r.state, r.started_at ?? "", durationOf(r)]);
      const head = ["RUN ID", "STATE", "STARTED", "DURATION"];
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
      const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join("  ").trimEnd();
      process.stdout.write([line(head), ...rows.map(line)].join("\n") + "\n");
    }
    if (page.nextPageToken && !opts.json) process.stderr.write(`more: --page-token ${page.nextPageToken}\n`);
    return EXIT_OK;
  });
}
