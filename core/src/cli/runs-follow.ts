/**
 * `fabric runs follow <run_id>`: a run as it goes, for people. The text its NodeRuns write as they go (an LLM's
 * answer: `node_run_output_delta` events) is printed as it arrives; each NodeRun's start, retry and end is a line of
 * its own; at the end, the outputs or the error. `fabric runs events` is the same stream as NDJSON, for programs.
 */
import type { Run, RunEvent } from "@nodefabric/schemas";
import { EXIT_FAILED, EXIT_OK, printRunError } from "./run-cli-context.js";
import { withGateway, type GatewayTarget } from "./runs-command.js";
import { formatOutputs } from "./run-tree-view.js";
import { followRun } from "./follow-run.js";

/** Control characters other than line breaks and tabs: what a handler wrote must not steer the terminal. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** Turns a run's events into text for people, written to `out` as they come. */
export class FollowPrinter {
  /** NodeRuns by id: their node type, and the attempt whose text is being printed. */
  private readonly nodes = new Map<string, { type: string; attempt?: number }>();
  /** The NodeRun whose text was printed last, and whether its line is still open. */
  private writing: string | undefined;

  constructor(private readonly out: { write(text: string): unknown }) {}

  private endText(): void {
    if (this.writing !== undefined) this.out.write("\n");
    this.writing = undefined;
  }

  private line(text: string): void {
    this.endText();
    this.out.write(`${text}\n`);
  }

  private nameOf(id: string): string {
    return this.nodes.get(id)?.type ?? id;
  }

  apply(e: RunEvent): void {
    const data = (e.data ?? {}) as Record<string, unknown>;
    const id = e.node_run_id;
    switch (e.type) {
      case "node_run_created": {
        const ref = data.node_type_ref as { node_type_id?: unknown; version?: unknown } | undefined;
        if (id && typeof ref?.node_type_id === "string") this.nodes.set(id, { type: typeof ref.version === "string" ? `${ref.node_type_id}@${ref.version}` : ref.node_type_id });
        return;
      }
      case "node_run_started":
        if (id) this.line(`▶ ${this.nameOf(id)} started`);
        return;
      case "node_run_retrying": {
        if (!id) return;
        const err = data.error as { code?: unknown } | undefined;
        this.line(`↻ ${this.nameOf(id)} retrying${typeof data.attempt === "number" ? ` (attempt ${data.attempt})` : ""}${typeof err?.code === "string" ? `: ${err.code}` : ""}`);
        return;
      }
      case "node_run_output_delta": {
        if (!id || typeof data.text !== "string") return;
        const node = this.nodes.get(id) ?? { type: id };
        this.nodes.set(id, node);
        const attempt = typeof data.attempt === "number" ? data.attempt : undefined;
        if (this.writing !== id || node.attempt !== attempt) {
          const again = data.restarted === true || (node.attempt !== undefined && attempt !== node.attempt);
          this.line(again ? `… ${node.type} writes its answer again (attempt ${attempt ?? "?"}; the call was made again):` : `… ${node.type} writes:`);
          node.attempt = attempt;
          this.writing = id;
        }
        this.out.write(data.text.replace(CONTROL, " "));
        if (data.truncated === true) this.line(`… (${node.type}'s text is cut here; its outputs hold all of it)`);
        return;
      }
      case "node_run_completed": {
        if (!id) return;
        const err = data.error as { code?: unknown; message?: unknown } | undefined;
        const state = typeof data.state === "string" ? data.state : "completed";
        const why = typeof err?.code === "string" ? `: ${err.code}${typeof err.message === "string" ? ` ${err.message}` : ""}` : "";
        this.line(`${state === "completed" ? "✓" : "✗"} ${this.nameOf(id)} ${state}${why}`);
        return;
      }
      case "run_completed":
        this.endText();
        return;
    }
  }
}

/** Follows a run for people until it ends; returns the exit code (0 only when the run completed). */
export function runsFollow(gateway: GatewayTarget, runId: string): Promise<number> {
  return withGateway(gateway, async (client) => {
    const printer = new FollowPrinter(process.stdout);
    await followRun(client, runId, (e) => printer.apply(e));
    const run: Run = await client.getRun(runId);
    if (run.state === "completed") {
      const { lines } = formatOutputs(run.extensions?.["nodefabric.outputs"] ?? {});
      process.stdout.write(`outputs\n${lines.join("\n")}\n`);
      return EXIT_OK;
    }
    printRunError(run.extensions?.["nodefabric.error"] as { code?: unknown; message?: unknown } | undefined, run.state);
    return EXIT_FAILED;
  });
}
