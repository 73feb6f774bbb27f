/**
 * Loading the PDP's Cedar policies and entities: read once, checked once, and pre-parsed into Cedar's
 * in-process cache so that a decision never parses policy text again. The built-in policy set, which permits
 * everything, is made without Cedar (decisions under it need none, decider.ts).
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { DetailedError, EntityJson, PolicyJson } from "@cedar-policy/cedar-wasm/nodejs";
import { cedarEngine } from "./cedar.js";
import { analysePolicyReads, type PolicyReads } from "./read-analysis.js";

/** The annotation that turns an allow into `require_approval` when it sits on a determining permit policy. */
export const APPROVAL_ANNOTATION = "require_approval";

/** The annotation whose value names a policy in decisions (`@id("allow-reads")`). */
export const ID_ANNOTATION = "id";

/** The policy set used when no policy file is given. */
export const DEFAULT_POLICY_TEXT = '@id("default-allow-all")\npermit(principal, action, resource);\n';

/** The one policy of DEFAULT_POLICY_TEXT, as Cedar splits the text and as its JSON (EST) form reads (core/test/pdp.test.ts checks both against Cedar). */
const DEFAULT_POLICY = {
  id: "default-allow-all",
  text: '@id("default-allow-all")\npermit(principal, action, resource);',
  json: { effect: "permit", principal: { op: "All" }, action: { op: "All" }, resource: { op: "All" }, conditions: [], annotations: { id: "default-allow-all" } } as PolicyJson,
};

/** A policy file or entities file that cannot be used; the message names the file, and the line when known. */
export class PolicyFileError extends Error {
  readonly file: string;
  readonly line?: number;
  readonly column?: number;

  constructor(file: string, message: string, position?: { line: number; column: number }) {
    super(position ? `${file}:${position.line}:${position.column}: ${message}` : `${file}: ${message}`);
    this.name = "PolicyFileError";
    this.file = file;
    this.line = position?.line;
    this.column = position?.column;
  }
}

/** One policy of the loaded set. */
export interface PolicyInfo {
  /** The id decisions name: the `@id` annotation, else Cedar's own `policy<N>`. */
  id: string;
  effect: "permit" | "forbid";
  /** True when a determining match must be approved before the action proceeds. */
  requiresApproval: boolean;
  /** 1-based line of the policy in its file, when it could be located. */
  line?: number;
}

/** A policy set ready for decisions. */
export interface LoadedPolicySet {
  /** Key of the pre-parsed set in Cedar's cache. */
  cacheId: string;
  /** The file it came from, or `"default"`. */
  source: string;
  policies: PolicyInfo[];
  byId: Map<string, PolicyInfo>;
  /** What the policies can read of a request (the decision cache keys on it), or why that cannot be bounded. */
  reads: PolicyReads;
  /**
   * Set on the built-in set only (defaultPolicySet): its one policy permits every request without a condition, so
   * Cedar's answer is known without asking it, and `cacheId` names nothing in Cedar's cache.
   */
  allowsAll?: true;
}

/** Turns a byte offset of Cedar's into a 1-based line and column of the text. */
function positionOf(text: string, offset: number): { line: number; column: number } {
  // Cedar reports UTF-8 byte offsets; for ASCII text they equal string offsets.
  const before = Buffer.from(text, "utf8").subarray(0, Math.max(0, offset)).toString("utf8");
  const lines = before.split("\n");
  return { line: lines.length, column: (lines[lines.length - 1]?.length ?? 0) + 1 };
}

function lineAt(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** Cedar's first error as one readable line, with its position in the text when Cedar gave one. */
function describeCedarErrors(errors: DetailedError[], text: string): { message: string; position?: { line: number; column: number } } {
  const first = errors[0];
  if (!first) return { message: "Cedar rejected the policies without saying why" };
  const location = first.sourceLocations?.[0];
  let message = first.message;
  if (location?.label) message += ` (${location.label})`;
  if (first.help) message += `; ${first.help}`;
  if (errors.length > 1) message += ` (and ${errors.length - 1} more error${errors.length > 2 ? "s" : ""})`;
  return { message, position: location ? positionOf(text, location.start) : undefined };
}

/** Parses Cedar policy text, checks NodeFabric's annotations, and pre-parses it into Cedar's cache. */
export function loadPolicyText(rawText: string, source: string): LoadedPolicySet {
  const text = rawText.charCodeAt(0) === 0xfeff ? rawText.slice(1) : rawText;
  const cedar = cedarEngine();
  // Splitting parses the whole text, so its errors carry positions in the file.
  const parts = cedar.policySetTextToParts(text);
  if (parts.type === "failure") {
    const { message, position } = describeCedarErrors(parts.errors, text);
    throw new PolicyFileError(source, message, position);
  }
  if (parts.policy_templates.length > 0) {
    const at = text.indexOf(parts.policy_templates[0] ?? "");
    throw new PolicyFileError(
      source,
      "policy templates (policies with ?principal or ?resource slots) are not supported; write static policies",
      at >= 0 ? { line: lineAt(text, at), column: 1 } : undefined,
    );
  }

  const policies: PolicyInfo[] = [];
  const byId = new Map<string, PolicyInfo>();
  const staticPolicies: Record<string, string> = {};
  const jsons: Array<{ id: string; json: PolicyJson }> = [];
  let searchFrom = 0;
  parts.policies.forEach((policyText, index) => {
    const at = text.indexOf(policyText, searchFrom);
    if (at >= 0) searchFrom = at + policyText.length;
    const line = at >= 0 ? lineAt(text, at) : undefined;
    const where = line !== undefined ? { line, column: 1 } : undefined;

    const json = cedar.policyToJson(policyText);
    if (json.type === "failure") {
      const { message } = describeCedarErrors(json.errors, policyText);
      throw new PolicyFileError(source, message, where);
    }
    const annotations = json.json.annotations ?? {};
    // Cedar's JSON gives a bare annotation (`@id`) the value null, which its types do not admit.
    const idValue = annotations[ID_ANNOTATION] as string | null | undefined;
    if (idValue === null || idValue === "") {
      throw new PolicyFileError(source, `@${ID_ANNOTATION} needs a non-empty value, such as @${ID_ANNOTATION}("allow-reads")`, where);
    }
    const id = idValue ?? `policy${index}`;
    const other = byId.get(id);
    if (other) {
      throw new PolicyFileError(source, `two policies have the id "${id}"${other.line !== undefined ? ` (the other is on line ${other.line})` : ""}`, where);
    }

    const approval = annotations[APPROVAL_ANNOTATION] as string | null | undefined;
    let requiresApproval = false;
    if (approval !== undefined) {
      if (approval === null || approval === "true") requiresApproval = true;
      else if (approval !== "false") {
        throw new PolicyFileError(source, `@${APPROVAL_ANNOTATION} takes "true" or "false", not ${JSON.stringify(approval)}`, where);
      }
    }
    const effect = json.json.effect;
    if (requiresApproval && effect !== "permit") {
      throw new PolicyFileError(source, `@${APPROVAL_ANNOTATION} belongs on a permit policy; policy "${id}" is a forbid`, where);
    }

    const info: PolicyInfo = { id, effect, requiresApproval };
    if (line !== undefined) info.line = line;
    policies.push(info);
    byId.set(id, info);
    staticPolicies[id] = policyText;
    jsons.push({ id, json: json.json });
  });

  const cacheId = cacheIdOf(staticPolicies);
  const preparsed = cedar.preparsePolicySet(cacheId, { staticPolicies });
  if (preparsed.type === "failure") {
    const { message } = describeCedarErrors(preparsed.errors, text);
    throw new PolicyFileError(source, message);
  }
  return { cacheId, source, policies, byId, reads: analysePolicyReads(jsons) };
}

/** The key of a policy set in Cedar's cache: its content, so loading the same policies again reuses the entry. */
function cacheIdOf(staticPolicies: Record<string, string>): string {
  return `nodefabric-pdp-${createHash("sha256").update(JSON.stringify(staticPolicies)).digest("hex").slice(0, 32)}`;
}

/** Reads and loads a Cedar policy file; rejects with a PolicyFileError naming the file, line and Cedar's message. */
export async function loadPolicyFile(file: string): Promise<LoadedPolicySet> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new PolicyFileError(file, `cannot read the policy file: ${(err as Error).message}`);
  }
  return loadPolicyText(text, file);
}

/** The built-in policy set that permits every action: what loadPolicyText makes of DEFAULT_POLICY_TEXT, without Cedar. */
export function defaultPolicySet(): LoadedPolicySet {
  const { id, text, json } = DEFAULT_POLICY;
  const info: PolicyInfo = { id, effect: "permit", requiresApproval: false, line: 1 };
  return {
    cacheId: cacheIdOf({ [id]: text }),
    source: "default",
    policies: [info],
    byId: new Map([[id, info]]),
    reads: analysePolicyReads([{ id, json }]),
    allowsAll: true,
  };
}

/** Reads a Cedar entities JSON file (an array of `{ uid, attrs, parents }`) and checks that Cedar accepts it. */
export async function loadEntitiesFile(file: string): Promise<EntityJson[]> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new PolicyFileError(file, `cannot read the entities file: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed)) {
    throw new PolicyFileError(file, "an entities file holds a JSON array of Cedar entities ({ uid, attrs, parents })");
  }
  const checked = cedarEngine().checkParseEntities({ entities: parsed as EntityJson[] });
  if (checked.type === "failure") {
    throw new PolicyFileError(file, describeCedarErrors(checked.errors, "").message);
  }
  const entities = parsed as EntityJson[];
  for (const [i, e] of entities.entries()) {
    // Cedar also accepts `{ "__entity": {...} }` uids; NodeFabric merges by type and id, so it needs the plain form.
    const uid = e.uid as unknown as Record<string, unknown>;
    const plain = (uid.__entity ?? uid) as Record<string, unknown>;
    if (typeof plain.type !== "string" || typeof plain.id !== "string") {
      throw new PolicyFileError(file, `entity ${i} has no uid with a string type and id`);
    }
    entities[i] = { ...e, uid: { type: plain.type, id: plain.id }, attrs: e.attrs ?? {}, parents: e.parents ?? [] };
  }
  return entities;
}
