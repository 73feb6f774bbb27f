/**
 * A message as a run: which skill (node type) it names, what input its parts give, checked against the node type's
 * input schema before anything starts; and, for a message to a task waiting for approval, the decision it carries.
 */
import type { Message, Part } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import { sharedAjv, trackCache } from "@nodefabric/core";
import type { NodeType } from "@nodefabric/schemas";

/** The planner a message naming no skill goes to, when the fabric has a model. */
export const PLANNER = "llm.planner";

/** The skill a message names (`message.metadata.skillId`, else the request's `metadata.skillId`): id and version. */
export function skillOf(message: Message, requestMetadata: Record<string, unknown> | undefined): { id: string; version?: string } | undefined {
  const raw = (message.metadata as Record<string, unknown> | undefined)?.skillId ?? requestMetadata?.skillId;
  if (raw === undefined || raw === null || raw === "") return undefined;
  if (typeof raw !== "string" || raw.length > 300) throw new RequestMalformedError("metadata.skillId must be a string: a node_type_id, optionally @version");
  const at = raw.lastIndexOf("@");
  return at > 0 ? { id: raw.slice(0, at), version: raw.slice(at + 1) } : { id: raw };
}

export const textOfParts = (parts: readonly Part[]): string =>
  parts
    .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
    .filter((t) => t !== "")
    .join("\n");

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The node type's input from the message's parts: its data part (an object), else its text put into the one string
 * field the schema requires (or `text`, `goal`, `prompt`, `message`), else nothing.
 */
export function inputOf(parts: readonly Part[], t: NodeType): Record<string, unknown> {
  const data = parts.filter((p) => p.content?.$case === "data");
  if (data.length > 1) throw new RequestMalformedError("a message names one input: send at most one data part");
  if (data.length === 1) {
    const value = (data[0]!.content as { value: unknown }).value;
    if (!isObject(value)) throw new RequestMalformedError(`the data part is the input of ${t.node_type_id}, and must be a JSON object`);
    return value;
  }
  const text = textOfParts(parts);
  if (text === "") return {};
  const schema = (t.input_schema ?? {}) as { properties?: Record<string, { type?: unknown }>; required?: string[] };
  const props = schema.properties ?? {};
  const strings = Object.keys(props).filter((k) => props[k]?.type === "string");
  const required = (schema.required ?? []).filter((k) => strings.includes(k));
  const field = required.length === 1 ? required[0] : ["text", "goal", "prompt", "message", "query", "input"].find((k) => strings.includes(k));
  if (field === undefined) throw new RequestMalformedError(`${t.node_type_id} takes structured input: send it as a data part (its input_schema is in the skill's description)`);
  return { [field]: text };
}

/** Validators compiled once per (node type, version): a published version never changes. */
const validators = new Map<string, ReturnType<ReturnType<typeof sharedAjv>["compile"]>>();
trackCache("a2a.input_validators", validators, (m) => ({ entries: m.size }), { max_entries: 10_000 });

/** Checks the input against the node type's input schema; an invalid one is an A2A invalid-params error. */
export function checkInput(t: NodeType, input: Record<string, unknown>): void {
  const key = `${t.node_type_id}@${t.version}`;
  let v = validators.get(key);
  if (!v) {
    if (validators.size >= 10_000) validators.clear();
    try {
      v = sharedAjv().compile((t.input_schema as object | undefined) ?? { type: "object" });
    } catch {
      // A schema this Ajv cannot compile is left to the run (the executor checks again).
      return;
    }
    validators.set(key, v);
  }
  if (!v(input)) {
    const why = (v.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || "/"} ${e.message ?? "is invalid"}`).join("; ");
    throw new RequestMalformedError(`invalid_inputs: the input does not match the input schema of ${t.node_type_id}: ${why}`);
  }
}

/** The decision a message to a waiting task carries: a data part {decision, reason?}, or the text approve / reject. */
export function decisionOf(parts: readonly Part[]): { decision: "approve" | "reject"; reason?: string } | undefined {
  for (const p of parts) {
    if (p.content?.$case !== "data" || !isObject(p.content.value)) continue;
    const d = p.content.value.decision;
    const reason = typeof p.content.value.reason === "string" ? p.content.value.reason.slice(0, 1000) : undefined;
    if (d === "approve" || d === "approved") return { decision: "approve", ...(reason ? { reason } : {}) };
    if (d === "reject" || d === "rejected") return { decision: "reject", ...(reason ? { reason } : {}) };
  }
  const text = textOfParts(parts).trim();
  const m = /^(approve|approved|yes|reject|rejected|no)\b[\s:,.-]*(.*)$/is.exec(text);
  if (!m) return undefined;
  const yes = /^(approve|approved|yes)$/i.test(m[1]!);
  const reason = m[2]?.trim();
  return { decision: yes ? "approve" : "reject", ...(reason ? { reason: reason.slice(0, 1000) } : {}) };
}
