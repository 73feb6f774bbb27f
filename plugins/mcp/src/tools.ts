/**
 * Node types as MCP tools, and a tool call as a run: the Tool a node type becomes, the CallToolResult a Run becomes,
 * and the run itself, started and followed through the gateway (GatewayCalls) with the caller's identity.
 */
import type { NodeType, Run, RunEvent } from "@nodefabric/schemas";
import { newFaceRunId, type FaceAnswer, type FaceErrorBody } from "@nodefabric/core";

export { callerDigest, followToEnd } from "@nodefabric/core";

export interface McpTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

export interface ToolResult {
  content: { type: "text"; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
  [k: string]: unknown;
}

/** The annotations of a node type's side-effect gate (read < write < irreversible). */
export function annotationsOf(t: NodeType): Record<string, unknown> {
  const gates = (t.constraints as { gates?: { side_effect_class?: string; require_approval?: boolean } } | undefined)?.gates;
  const cls = gates?.side_effect_class;
  const a: Record<string, unknown> = {};
  const title = (t.extensions as Record<string, unknown> | undefined)?.["nodefabric.title"];
  if (typeof title === "string") a.title = title;
  if (cls === "read") Object.assign(a, { readOnlyHint: true, destructiveHint: false, idempotentHint: true });
  else if (cls === "write") Object.assign(a, { readOnlyHint: false, destructiveHint: false });
  else if (cls === "irreversible") Object.assign(a, { readOnlyHint: false, destructiveHint: true, idempotentHint: false });
  // A node type wraps an upstream API unless it says it only reads what it is given.
  a.openWorldHint = true;
  return a;
}

/** The Tool a node type is: its id, description, schemas as given, and annotations from its gates. */
export function toolOf(t: NodeType): McpTool {
  const input = (t.input_schema as Record<string, unknown> | undefined) ?? { type: "object" };
  const tool: McpTool = {
    name: t.node_type_id,
    description: t.description ?? `Runs the node type ${t.node_type_id}@${t.version} as a NodeFabric run.`,
    // A run's input is always an object; a schema that leaves its type out says so, as MCP requires.
    inputSchema: input.type === undefined ? { type: "object", ...input } : input,
    annotations: annotationsOf(t),
    _meta: { "dev.nodefabric/version": t.version, "dev.nodefabric/kind": t.kind },
  };
  // A tool imported from an MCP server with no outputSchema of its own is served as it was: its content blocks, and
  // no outputSchema (mcp.call's wrapper schema describes the node type's outputs, not the upstream tool's result).
  if (t.output_schema && !servesContentBlocks(t)) tool.outputSchema = t.output_schema as Record<string, unknown>;
  return tool;
}

/**
 * True for a node type run by `mcp.call` whose outputs are the upstream tool's result as content blocks (its
 * `nodefabric.mcp.output` is "content", the default): /mcp answers those blocks again, so a server imported and served
 * back through the fabric answers what it answers itself.
 */
export function servesContentBlocks(t: NodeType): boolean {
  const mcp = (t.extensions as Record<string, unknown> | undefined)?.["nodefabric.mcp"];
  if (mcp === null || typeof mcp !== "object") return false;
  const output = (mcp as { output?: unknown }).output;
  return output === undefined || output === "content";
}

/** The labels of a run a tool call starts: the caller it is bound to, the tool, and how its result is served. */
export function runLabels(t: NodeType, callerDigest: string): Record<string, string> {
  return { [CALLER_LABEL]: callerDigest, [TOOL_LABEL]: t.node_type_id, ...(servesContentBlocks(t) ? { [RESULT_LABEL]: "content" } : {}) };
}

/** A new run id for a tool call: 128 random bits, so a task id (the run id) cannot be guessed. */
export const newRunId = (): string => newFaceRunId("mcp");

export const CALLER_LABEL = "nodefabric.mcp.caller";
export const TOOL_LABEL = "nodefabric.mcp.tool";
export const RESULT_LABEL = "nodefabric.mcp.result";

const text = (s: string) => ({ type: "text" as const, text: s });

/** The tool result of an ended run: outputs as structuredContent and text; a failure as a tool error. */
export function resultOfRun(run: Run): ToolResult {
  const ext = (run.extensions ?? {}) as Record<string, unknown>;
  const meta = { "dev.nodefabric/run_id": run.run_id, "dev.nodefabric/state": run.state };
  if (run.state === "completed") {
    const outputs = ext["nodefabric.outputs"];
    const labels = (ext["nodefabric.metadata"] as { labels?: Record<string, string> } | undefined)?.labels;
    if (labels?.[RESULT_LABEL] === "content" && isContentWrapper(outputs)) {
      const r: ToolResult = { content: outputs.content as ToolResult["content"], _meta: meta };
      if (outputs.structuredContent !== undefined) r.structuredContent = outputs.structuredContent;
      return r;
    }
    const r: ToolResult = { content: [text(JSON.stringify(outputs ?? {}))], _meta: meta };
    if (outputs !== null && typeof outputs === "object" && !Array.isArray(outputs)) r.structuredContent = outputs as Record<string, unknown>;
    return r;
  }
  const err = (ext["nodefabric.error"] ?? {}) as { code?: string; message?: string };
  const code = err.code ?? (run.state === "canceled" ? "canceled" : "failed");
  return { content: [text(`${code}: ${err.message ?? `the run ended ${run.state}`}`)], isError: true, _meta: meta };
}

function isContentWrapper(o: unknown): o is { content: unknown[]; structuredContent?: Record<string, unknown> } {
  if (o === null || typeof o !== "object" || Array.isArray(o)) return false;
  const w = o as { content?: unknown; structuredContent?: unknown };
  return Array.isArray(w.content) && (w.structuredContent === undefined || (w.structuredContent !== null && typeof w.structuredContent === "object" && !Array.isArray(w.structuredContent)));
}

/** The tool error for a Run API refusal (an ErrorEnvelope). */
export function resultOfRefusal(answer: FaceAnswer<FaceErrorBody>): ToolResult {
  const e = answer.body?.error ?? {};
  return { content: [text(`${e.code ?? `http_${answer.status}`}: ${e.message ?? `the Run API answered ${answer.status}`}`)], isError: true };
}

/** A progress report: monotonic `progress`, and a message. */
export interface ProgressReport {
  progress: number;
  message?: string;
}

/** Turns run events into progress reports, at most one per `intervalMs` (the latest wins; the last is flushed). */
export class ProgressThrottle {
  private count = 0;
  private lastSent = 0;
  private pending: ProgressReport | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Output-delta text not yet sent, and whether the report waiting carries it. */
  private text = "";
  private pendingText = false;

  constructor(private readonly send: (r: ProgressReport) => void, private readonly intervalMs = 100) {}

  event(e: RunEvent): void {
    const data = (e.data ?? {}) as Record<string, unknown>;
    let message: string | undefined;
    if (e.type === "node_run_started") message = `NodeRun ${e.node_run_id ?? ""} started`;
    else if (e.type === "node_run_completed") message = `NodeRun ${e.node_run_id ?? ""} ended ${String(data.state ?? "")}`.trim();
    else if (e.type === "approval_requested") message = `waiting for approval ${String(data.approval_id ?? "")}`.trim();
    else if (e.type === "approval_resolved") message = `approval ${String(data.approval_id ?? "")} ${String(data.decision ?? data.state ?? "resolved")}`;
    else if (e.type === "node_run_retrying") message = `NodeRun ${e.node_run_id ?? ""} retrying`;
    else if (e.type === "node_run_output_delta" && typeof data.text === "string") {
      // Text a NodeRun writes as it goes (an LLM's answer): each notification's message carries what came since the
      // last one, so a client that joins the messages reads the answer being written.
      this.text += data.text;
      this.count += 1;
      this.offer({ progress: this.count, message: this.text }, true);
      return;
    } else if (e.type === "node_run_progress") {
      // An executor's report (an upstream MCP server's progress, for mcp.call): its message, else "progress/total".
      const of = typeof data.total === "number" ? `/${data.total}` : "";
      message = typeof data.message === "string" ? data.message : typeof data.progress === "number" ? `progress ${data.progress}${of}` : "progress";
    }
    if (message === undefined) return;
    this.count += 1;
    this.offer({ progress: this.count, message });
  }

  private offer(r: ProgressReport, text = false): void {
    const now = Date.now();
    // A report of another kind waiting would replace the text not yet sent: that text goes first.
    if (!text && this.pendingText) this.flush();
    if (now - this.lastSent >= this.intervalMs && !this.timer) {
      this.lastSent = now;
      if (text) this.text = "";
      this.send(r);
      return;
    }
    this.pending = r;
    this.pendingText = text;
    this.timer ??= setTimeout(() => this.flush(), Math.max(0, this.intervalMs - (now - this.lastSent)));
  }

  /** Sends what waits, now. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending) {
      this.lastSent = Date.now();
      const p = this.pending;
      this.pending = undefined;
      if (this.pendingText) this.text = "";
      this.pendingText = false;
      this.send(p);
    }
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = undefined;
  }
}
