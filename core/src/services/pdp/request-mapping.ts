/**
 * The one place where a v1 PolicyDecisionRequest becomes a Cedar authorization request.
 * docs/pdp.md documents this mapping; keep the two in step.
 *
 * Cedar has no null and no floating point, and its JSON form gives special meaning to `__entity` and
 * `__extn` keys, so every free-form value is converted defensively: whatever a caller sends, the result
 * is something Cedar accepts, and what had to be dropped is reported instead of failing the decision.
 */
import type { PolicyDecisionRequest } from "@nodefabric/schemas";
import type { CedarValueJson, Context, EntityJson, TypeAndId } from "@cedar-policy/cedar-wasm/nodejs";

/** The Cedar namespace of every entity type NodeFabric puts in a request. */
export const CEDAR_NAMESPACE = "NodeFabric";

/** Context keys the PDP fills from the request's typed fields; a same-named key in `context` is ignored. */
export const RESERVED_CONTEXT_KEYS = [
  "run_id",
  "node_run_id",
  "node_type_id",
  "node_type_version",
  "tenant_id",
  "side_effect_class",
  "require_approval",
  "budgets",
] as const;

const RESERVED = new Set<string>(RESERVED_CONTEXT_KEYS);

/** Records and sets nested deeper than this are dropped: Cedar's parser recurses and overflows on deep input. */
export const MAX_CONTEXT_DEPTH = 32;

// Cedar decimals are i64 scaled by 10^4; keep clear of the edge so rounding cannot overflow.
const DECIMAL_LIMIT = 922_337_203_685_477;

/** Cedar's side of one decision: the request, plus the entities that belong to it. */
export interface CedarRequest {
  principal: TypeAndId;
  action: TypeAndId;
  resource: TypeAndId;
  context: Context;
  /** The principal and the resource entity, with the attributes taken from the request. */
  entities: EntityJson[];
  /** JSON Pointers (into the request) of the values that could not be given to Cedar, with why. */
  dropped: DroppedValue[];
}

/** A value of the request that Cedar cannot hold, and so was left out of the context. */
export interface DroppedValue {
  path: string;
  reason: string;
}

/** Turns a free-form type name such as `user`, `service_account` or `ci-bot` into a Cedar entity type name (`User`, `ServiceAccount`, `CiBot`). */
export function entityTypeName(raw: string): string {
  const words = raw.split(/[^A-Za-z0-9]+/).filter((w) => w.length > 0);
  let name = words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");
  if (name === "") name = "Actor";
  else if (/^[0-9]/.test(name)) name = `Actor${name}`;
  // `Action` is the type of every action entity; a principal of that type would read as an action.
  if (name === "Action") name = "ActorAction";
  return `${CEDAR_NAMESPACE}::${name}`;
}

function escapePointer(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** A Cedar decimal (4 fraction digits), for numbers that must stay decimals even when whole (such as `max_cost`). */
function cedarDecimal(n: number): CedarValueJson | undefined {
  if (!Number.isFinite(n) || Math.abs(n) >= DECIMAL_LIMIT) return undefined;
  let text = n.toFixed(4);
  if (/^-0\.0+$/.test(text)) text = text.slice(1);
  return { __extn: { fn: "decimal", arg: text } };
}

/** A number as Cedar can hold it: a Long when it is a safe integer, a decimal otherwise. */
function cedarNumber(n: number): CedarValueJson | undefined {
  if (Number.isSafeInteger(n)) return n;
  // A whole number above 2^53 has already lost its exact value in JSON; a rounded Long would be a lie.
  if (Number.isInteger(n)) return undefined;
  return cedarDecimal(n);
}

/** Converts any JSON value into a Cedar value, or undefined (and a note in `dropped`) when it cannot be held. */
export function toCedarValue(value: unknown, path: string, depth: number, dropped: DroppedValue[]): CedarValueJson | undefined {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number": {
      const n = cedarNumber(value);
      if (n === undefined) dropped.push({ path, reason: "number out of Cedar's range" });
      return n;
    }
    case "object": {
      if (value === null) {
        dropped.push({ path, reason: "null has no Cedar value" });
        return undefined;
      }
      if (depth >= MAX_CONTEXT_DEPTH) {
        dropped.push({ path, reason: `nested deeper than ${MAX_CONTEXT_DEPTH} levels` });
        return undefined;
      }
      if (Array.isArray(value)) {
        const out: CedarValueJson[] = [];
        value.forEach((item, i) => {
          const v = toCedarValue(item, `${path}/${i}`, depth + 1, dropped);
          if (v !== undefined) out.push(v);
        });
        return out;
      }
      return toCedarRecord(value as Record<string, unknown>, path, depth, dropped);
    }
    default:
      dropped.push({ path, reason: `a ${typeof value} has no Cedar value` });
      return undefined;
  }
}

function toCedarRecord(obj: Record<string, unknown>, path: string, depth: number, dropped: DroppedValue[], skip?: Set<string>): { [key: string]: CedarValueJson } {
  const out: { [key: string]: CedarValueJson } = {};
  for (const [key, item] of Object.entries(obj)) {
    const at = `${path}/${escapePointer(key)}`;
    if (key.startsWith("__")) {
      // Cedar reads `__entity`, `__extn` and `__expr` as typed values; a caller must not smuggle those in.
      dropped.push({ path: at, reason: "keys starting with __ are reserved by Cedar's JSON format" });
      continue;
    }
    if (skip?.has(key)) {
      dropped.push({ path: at, reason: "reserved: the PDP fills this key from the request's own fields" });
      continue;
    }
    const v = toCedarValue(item, at, depth + 1, dropped);
    if (v !== undefined) out[key] = v;
  }
  return out;
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

function principalOf(req: PolicyDecisionRequest): TypeAndId {
  const actor = req.run_context?.actor;
  if (actor && nonEmptyString(actor.type) && nonEmptyString(actor.id)) {
    return { type: entityTypeName(actor.type), id: actor.id };
  }
  const sub = nonEmptyString(req.run_context?.identity?.sub);
  if (sub !== undefined) return { type: `${CEDAR_NAMESPACE}::User`, id: sub };
  return { type: `${CEDAR_NAMESPACE}::Anonymous`, id: "anonymous" };
}

function resourceOf(req: PolicyDecisionRequest): { uid: TypeAndId; attrs: Record<string, CedarValueJson> } {
  if (req.node_type_ref) {
    return { uid: { type: `${CEDAR_NAMESPACE}::NodeType`, id: req.node_type_ref.node_type_id }, attrs: { version: req.node_type_ref.version } };
  }
  if (req.run_id !== undefined) return { uid: { type: `${CEDAR_NAMESPACE}::Run`, id: req.run_id }, attrs: {} };
  return { uid: { type: `${CEDAR_NAMESPACE}::Fabric`, id: "fabric" }, attrs: {} };
}

function budgetsOf(req: PolicyDecisionRequest, dropped: DroppedValue[]): { [key: string]: CedarValueJson } {
  const budgets: { [key: string]: CedarValueJson } = {};
  const source = req.constraints?.budgets;
  if (!source) return budgets;
  for (const [key, value] of Object.entries(source as Record<string, unknown>)) {
    if (typeof value !== "number") continue;
    const path = `/constraints/budgets/${escapePointer(key)}`;
    // max_cost is a money amount: always a decimal, so a policy can compare it without checking its type.
    const v = key === "max_cost" ? cedarDecimal(value) : cedarNumber(value);
    if (v === undefined) dropped.push({ path, reason: "number out of Cedar's range" });
    else budgets[key] = v;
  }
  return budgets;
}

/** Maps a validated PolicyDecisionRequest onto Cedar's principal, action, resource, context and request entities. */
export function toCedarRequest(req: PolicyDecisionRequest): CedarRequest {
  const dropped: DroppedValue[] = [];
  const principal = principalOf(req);
  const resource = resourceOf(req);
  const tenantId = req.run_context?.tenant_id;

  const context: Context = req.context && typeof req.context === "object" && !Array.isArray(req.context)
    ? toCedarRecord(req.context, "/context", 0, dropped, RESERVED)
    : {};
  if (req.run_id !== undefined) context.run_id = req.run_id;
  if (req.node_run_id !== undefined) context.node_run_id = req.node_run_id;
  if (req.node_type_ref) {
    context.node_type_id = req.node_type_ref.node_type_id;
    context.node_type_version = req.node_type_ref.version;
  }
  if (tenantId !== undefined) context.tenant_id = tenantId;
  const gates = req.constraints?.gates;
  if (gates?.side_effect_class !== undefined) context.side_effect_class = gates.side_effect_class;
  context.require_approval = gates?.require_approval === true;
  context.budgets = budgetsOf(req, dropped);

  const principalAttrs: Record<string, CedarValueJson> = {};
  if (tenantId !== undefined) principalAttrs.tenant_id = tenantId;
  const entities: EntityJson[] = [{ uid: principal, attrs: principalAttrs, parents: [] }];
  if (resource.uid.type !== principal.type || resource.uid.id !== principal.id) {
    entities.push({ uid: resource.uid, attrs: resource.attrs, parents: [] });
  } else {
    Object.assign(principalAttrs, resource.attrs);
  }

  return {
    principal,
    action: { type: `${CEDAR_NAMESPACE}::Action`, id: req.action },
    resource: resource.uid,
    context,
    entities,
    dropped,
  };
}
