/**
 * Budgets the run keeps: a model call (an atomic NodeRun whose node type declares `extensions["nodefabric.model_call"]`,
 * as `llm.chat` does) reserves, before it is dispatched, the most it can spend: its prompt's size (about 4 characters
 * a token, read from the inputs the declaration names) plus its `max_output_tokens`, and the cost of both at the
 * coordinator's price table. The reservation is taken from what the run has left, under the run's lock and in the
 * same write as the NodeRun's move to `running`, so two calls (two coordinators sharing a database included: a run
 * is written only by the coordinator holding it, fenced) can never both take the last of a budget. A call that does
 * not fit fails `budget_exhausted` and is never sent.
 *
 * The coordinator computes the reservation from the inputs: nothing the handler says sets it. When the attempt
 * ends, the reservation is settled: to the tokens the answer reports (`outputs.usage`, or `error.details.usage`) and
 * the cost it reports (`extensions["nodefabric.cost"]`, counted by results.ts), when there is an answer; or, when the
 * attempt ends without one (its coordinator or executor died and its lease ran out, the run or the NodeRun was
 * canceled while it was in flight), to the whole reservation: the call may have been made, and the run counts what
 * it may have spent, never less. An attempt that never reached an executor releases it whole.
 *
 * What the run has used and holds reserved is on the Run (`extensions["nodefabric.usage"]`: `tokens`,
 * `reserved_tokens`, `reserved_cost`, beside `cost`); each NodeRun's own reservation is on it as
 * `extensions["nodefabric.reservation"]` while its attempt is in flight.
 */
import type { FabricErrorBody, NodeType } from "@nodefabric/schemas";
import type { NodeRunRecord, RunRecord, WriteBatch } from "../store/run-store.js";
import { errorBody } from "./engine-types.js";

/** What reserving and settling need of the engine (EngineCore is one; named here so this file imports none of it). */
export interface RunLedger {
  readonly o: { modelPrices?: Record<string, ModelPrice> };
  usageOf(run: RunRecord): { cost: number; tokens?: number; reserved_tokens?: number; reserved_cost?: number };
  addUsage(batch: WriteBatch, run: RunRecord, add: { cost?: number; tokens?: number; reserved_tokens?: number; reserved_cost?: number }): unknown;
  budgetsOf(run: RunRecord): { max_tokens?: number; max_cost?: number };
}

/** The NodeType extension that makes an atomic node type a model call whose spending the run reserves. */
export const MODEL_CALL_KEY = "nodefabric.model_call";
/** The NodeRun extension holding the reservation of its attempt in flight. */
export const RESERVATION_KEY = "nodefabric.reservation";
/** The constraint extension holding a run's token budget (docs/llm.md). */
export const MAX_TOKENS_KEY = "nodefabric.llm.max_tokens";
/** Characters a token, for the prompt's size (the estimate llm.chat makes too). */
const CHARS_PER_TOKEN = 4;

/** A model's price, in the unit of the run's `max_cost`, per million tokens. */
export interface ModelPrice {
  input_per_million: number;
  output_per_million: number;
}

/** What a node type declares about its model calls (`extensions["nodefabric.model_call"]`). */
export interface ModelCallSpec {
  /** The inputs whose JSON make the prompt (e.g. messages, tools, response_schema). */
  prompt_inputs: string[];
  /** The input holding the most output tokens the call may produce. */
  max_output_input: string;
  /** The output limit of a call whose inputs name none. */
  default_max_output_tokens: number;
  /** The input naming the model (its price); a call that names none is priced at the dearest model. */
  model_input?: string;
  /** Where an answer reports the tokens used: `outputs[usage_output]`, or `error.details[usage_output]`. */
  usage_output?: string;
}

/** A NodeRun attempt's reservation. */
export interface Reservation {
  attempt: number;
  tokens: number;
  cost: number;
}

/** The model-call declaration of a node type, when it has a valid one. */
export function modelCallOf(nodeType: NodeType): ModelCallSpec | undefined {
  if (nodeType.kind === "composite") return undefined;
  const s = nodeType.extensions?.[MODEL_CALL_KEY] as Partial<ModelCallSpec> | undefined;
  if (!s || typeof s !== "object" || !Array.isArray(s.prompt_inputs) || typeof s.max_output_input !== "string") return undefined;
  const fallback = typeof s.default_max_output_tokens === "number" && s.default_max_output_tokens > 0 ? s.default_max_output_tokens : 4096;
  return {
    prompt_inputs: s.prompt_inputs.filter((k): k is string => typeof k === "string"),
    max_output_input: s.max_output_input,
    default_max_output_tokens: fallback,
    ...(typeof s.model_input === "string" ? { model_input: s.model_input } : {}),
    ...(typeof s.usage_output === "string" ? { usage_output: s.usage_output } : {}),
  };
}

/** The price of a model: an exact entry, else the longest one that prefixes it; undefined when none. */
function priceOf(prices: Record<string, ModelPrice>, model: string): ModelPrice | undefined {
  if (prices[model]) return prices[model];
  let best: string | undefined;
  for (const k of Object.keys(prices)) if (model.startsWith(k) && (!best || k.length > best.length)) best = k;
  return best ? prices[best] : undefined;
}

/** The dearest prices of the table (each side on its own): the bound for a call whose model is not known here. */
function dearest(prices: Record<string, ModelPrice>): ModelPrice | undefined {
  const all = Object.values(prices);
  if (all.length === 0) return undefined;
  return { input_per_million: Math.max(...all.map((p) => p.input_per_million)), output_per_million: Math.max(...all.map((p) => p.output_per_million)) };
}

/** The most a call with these inputs can spend: prompt estimate plus its output limit, and their cost. */
export function reservationFor(spec: ModelCallSpec, inputs: Record<string, unknown>, prices: Record<string, ModelPrice> | undefined): { tokens: number; prompt: number; output: number; cost: number } {
  let chars = 0;
  for (const k of spec.prompt_inputs) if (inputs[k] !== undefined) chars += JSON.stringify(inputs[k]).length;
  const prompt = Math.ceil(chars / CHARS_PER_TOKEN);
  const asked = inputs[spec.max_output_input];
  const output = typeof asked === "number" && Number.isFinite(asked) && asked >= 0 ? Math.ceil(asked) : spec.default_max_output_tokens;
  const model = spec.model_input ? inputs[spec.model_input] : undefined;
  const table = prices ?? {};
  const price = typeof model === "string" ? priceOf(table, model) : dearest(table);
  const cost = price ? (prompt * price.input_per_million + output * price.output_per_million) / 1_000_000 : 0;
  return { tokens: prompt + output, prompt, output, cost };
}

/** What a run may still reserve, and what it has used and holds. */
export interface Standing {
  tokens: number;
  reserved_tokens: number;
  cost: number;
  reserved_cost: number;
}

/**
 * Why a reservation does not fit what the run has left (`budget_exhausted`, naming remaining and asked), or
 * undefined when it fits. Only the NodeRun fails: the run goes on, and its composite decides what that means.
 */
export function refusal(
  want: { tokens: number; cost: number; prompt: number; output: number },
  limits: { max_tokens?: number; max_cost?: number },
  s: Standing,
  nodeTypeId: string,
): FabricErrorBody | undefined {
  if (limits.max_tokens !== undefined) {
    const remaining = Math.max(0, limits.max_tokens - s.tokens - s.reserved_tokens);
    if (want.tokens > remaining) {
      return errorBody(
        "budget_exhausted",
        `the model call (${nodeTypeId}) asks for ${want.tokens} tokens (about ${want.prompt} of prompt and ${want.output} of output) and the run has ${remaining} of its ${limits.max_tokens} left (${s.tokens} used, ${s.reserved_tokens} reserved by calls in flight); it was not sent`,
        { retryable: false, details: { budget: MAX_TOKENS_KEY, limit: limits.max_tokens, used: s.tokens, reserved: s.reserved_tokens, remaining, asked: want.tokens } },
      );
    }
  }
  if (limits.max_cost !== undefined && want.cost > 0) {
    const remaining = Math.max(0, limits.max_cost - s.cost - s.reserved_cost);
    if (want.cost > remaining) {
      return errorBody(
        "budget_exhausted",
        `the model call (${nodeTypeId}) may cost ${want.cost} and the run has ${remaining} of its max_cost ${limits.max_cost} left (${s.cost} used, ${s.reserved_cost} reserved by calls in flight); it was not sent`,
        { retryable: false, details: { budget: "max_cost", limit: limits.max_cost, used: s.cost, reserved: s.reserved_cost, remaining, asked: want.cost } },
      );
    }
  }
  return undefined;
}

/** The reservation a NodeRun holds, if any. */
export function reservationOf(nr: NodeRunRecord): Reservation | undefined {
  const r = nr.node_run.extensions?.[RESERVATION_KEY] as Partial<Reservation> | undefined;
  if (!r || typeof r.tokens !== "number" || typeof r.cost !== "number") return undefined;
  return { attempt: typeof r.attempt === "number" ? r.attempt : nr.attempt, tokens: r.tokens, cost: r.cost };
}

/** Puts a reservation on a NodeRun (its record is written by the caller). */
export function holdOn(nr: NodeRunRecord, r: Reservation): void {
  nr.node_run.extensions = { ...nr.node_run.extensions, [RESERVATION_KEY]: r };
}

/** Takes a NodeRun's reservation off it (its record is written by the caller) and returns it. */
export function takeOff(nr: NodeRunRecord): Reservation | undefined {
  const r = reservationOf(nr);
  if (!r) return undefined;
  const ext = { ...nr.node_run.extensions };
  delete ext[RESERVATION_KEY];
  nr.node_run.extensions = ext;
  return r;
}

/** The tokens an answer reports, read where the declaration says (`outputs[usage_output]` or `error.details[...]`). */
export function tokensReported(spec: ModelCallSpec | undefined, outputs: Record<string, unknown> | undefined, error: FabricErrorBody | undefined): number {
  const key = spec?.usage_output ?? "usage";
  const from = (outputs?.[key] ?? (error?.details as Record<string, unknown> | undefined)?.[key]) as { total_tokens?: unknown; prompt_tokens?: unknown; completion_tokens?: unknown } | undefined;
  if (!from || typeof from !== "object") return 0;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);
  return n(from.total_tokens) || n(from.prompt_tokens) + n(from.completion_tokens);
}

/**
 * Reserves what a model call's attempt may spend against what its run has left, into `batch` (with the NodeRun's move
 * to running, which the caller writes): the failure to record instead when it does not fit. Nothing for a node type
 * that declares no model call.
 */
export function reserveFor(core: RunLedger, batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, nodeType: NodeType): FabricErrorBody | undefined {
  const spec = modelCallOf(nodeType);
  if (!spec) return undefined;
  // One still held is settled first: an earlier attempt's counts whole, this attempt's own (planned again) is given back.
  const earlier = reservationOf(nr);
  if (earlier) settleReservation(core, batch, run, nr, earlier.attempt < nr.attempt ? "unanswered" : "unsent");
  const want = reservationFor(spec, (nr.node_run.inputs ?? {}) as Record<string, unknown>, core.o.modelPrices);
  const u = core.usageOf(run);
  const standing: Standing = { tokens: u.tokens ?? 0, reserved_tokens: u.reserved_tokens ?? 0, cost: u.cost, reserved_cost: u.reserved_cost ?? 0 };
  const budgets = core.budgetsOf(run);
  const refused = refusal(want, { max_tokens: budgets.max_tokens, max_cost: budgets.max_cost }, standing, nr.node_run.node_type_ref.node_type_id);
  if (refused) return refused;
  holdOn(nr, { attempt: nr.attempt, tokens: want.tokens, cost: want.cost });
  core.addUsage(batch, run, { reserved_tokens: want.tokens, reserved_cost: want.cost });
  return undefined;
}

/**
 * Settles the reservation a NodeRun's attempt holds, into `batch` (the NodeRun's record is the caller's to write):
 * - `{ tokens }`: the attempt was answered; the run counts the tokens it reported (its cost is counted from the
 *   answer's `nodefabric.cost` by results.ts) and the rest of the reservation is released;
 * - `"unanswered"`: it ended with no answer (lease expired after a crash, canceled in flight); the run counts the
 *   whole reservation, as the call may have been made;
 * - `"unsent"`: it never reached an executor; all of it is released.
 * Nothing when the NodeRun holds no reservation.
 */
export function settleReservation(core: RunLedger, batch: WriteBatch, run: RunRecord, nr: NodeRunRecord, outcome: { tokens: number } | "unanswered" | "unsent"): void {
  const r = takeOff(nr);
  if (!r) return;
  const used = outcome === "unanswered" ? { tokens: r.tokens, cost: r.cost } : outcome === "unsent" ? { tokens: 0, cost: 0 } : { tokens: outcome.tokens, cost: 0 };
  core.addUsage(batch, run, { reserved_tokens: -r.tokens, reserved_cost: -r.cost, tokens: used.tokens, cost: used.cost });
  if (!(batch.nodeRuns ??= []).includes(nr)) batch.nodeRuns.push(nr);
}
