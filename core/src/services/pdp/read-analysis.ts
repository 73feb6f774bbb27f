/**
 * What a policy set can read of a request, worked out once from Cedar's JSON (EST) form of each policy.
 *
 * The decision cache (decider.ts) keys a decision on exactly what this analysis says the policies can read, so the
 * analysis must never under-report. Anything it does not understand makes the set "unbounded", which turns the
 * cache off. Reads it bounds:
 * - `context.<key>…` and `context has <key>…`: the top-level key (the request's context values are plain records,
 *   sets and primitives, never entities, so what lies below a key is part of that key's value);
 * - `principal.<attr>`, `principal has <attr>`, `principal.getTag(…)`, and the same on `resource`;
 * - the principal, action and resource themselves (`==`, `in`, `is`, …, in the scope or the conditions): `vars` says
 *   which of the three any policy mentions at all; one that none mentions cannot change a decision.
 * Unbounded: `context` used as a value of its own (`context == …`, `{a: context}`, `context is …`, an extension
 * call taking it, …), attributes or tags read off anything but `principal`, `resource` or a `context` path (another
 * entity, `action`, an attribute that holds an entity, a computed value), template slots, and any form of the JSON
 * this code does not know.
 */
import type { Clause, Expr, PolicyJson } from "@cedar-policy/cedar-wasm/nodejs";

/** The union of what a policy set reads, or why it cannot be bounded. */
export type PolicyReads =
  | { bounded: true; vars: Set<RequestVar>; context: Set<string>; principal: Set<string>; resource: Set<string> }
  | { bounded: false; reason: string };

/** The variables that stand for the request's uids. */
export type RequestVar = "principal" | "action" | "resource";

class Unbounded extends Error {}

/** Operators whose operands are all expressions: `{ op: { left, right } }` or `{ op: { arg } }`. */
const BINARY = new Set(["==", "!=", "in", "<", "<=", ">", ">=", "&&", "||", "+", "-", "*", "contains", "containsAll", "containsAny"]);
const UNARY = new Set(["!", "neg", "isEmpty"]);

type Node = Record<string, unknown>;

function only(expr: unknown): [string, unknown] {
  if (typeof expr !== "object" || expr === null || Array.isArray(expr)) throw new Unbounded("an expression Cedar's JSON does not describe");
  const entries = Object.entries(expr as Node);
  if (entries.length !== 1) throw new Unbounded("an expression Cedar's JSON does not describe");
  return entries[0]!;
}

function varOf(expr: unknown): string | undefined {
  const [op, body] = only(expr);
  return op === "Var" && typeof body === "string" ? body : undefined;
}

/** True for `context`, `context.a`, `context.a.b`, …: a value inside the request's context. */
function isContextPath(expr: unknown): boolean {
  const [op, body] = only(expr);
  if (op === "Var") return body === "context";
  if (op === ".") return isContextPath((body as Node).left);
  return false;
}

class Collector {
  readonly vars = new Set<RequestVar>();
  readonly context = new Set<string>();
  readonly principal = new Set<string>();
  readonly resource = new Set<string>();

  /** `left.attr`, `left has attr`, `left.getTag(…)`: records what is read, or throws when it cannot be bounded. */
  private readOf(left: unknown, attr: string | undefined, what: string): void {
    const v = varOf(left);
    if (v === "context") {
      if (attr === undefined) throw new Unbounded("reads tags of context");
      this.context.add(attr);
      return;
    }
    if (v === "principal" || v === "resource") {
      this.vars.add(v);
      if (attr !== undefined) this[v].add(attr);
      // A tag read (attr undefined) depends on the entity's tags, which the cache key holds whole.
      return;
    }
    if (isContextPath(left)) {
      if (attr === undefined) throw new Unbounded("reads tags of a context value");
      this.expr(left);
      return;
    }
    throw new Unbounded(v !== undefined ? `reads ${what} of ${v}` : `reads ${what} of another entity or a computed value`);
  }

  expr(e: unknown): void {
    const [op, body] = only(e);
    const node = body as Node;
    switch (op) {
      case "Value":
        return;
      case "Var":
        if (body === "context") throw new Unbounded("uses context as a whole value");
        if (body === "principal" || body === "action" || body === "resource") {
          this.vars.add(body);
          return;
        }
        throw new Unbounded(`uses an unknown variable ${String(body)}`);
      case "Slot":
        throw new Unbounded("has a template slot");
      case ".":
        if (typeof node.attr !== "string") throw new Unbounded("an attribute access Cedar's JSON does not describe");
        this.readOf(node.left, node.attr, "attributes");
        return;
      case "has": {
        const attrs = Array.isArray(node.attr) ? node.attr : [node.attr];
        if (attrs.length === 0 || !attrs.every((a) => typeof a === "string")) throw new Unbounded("a has test Cedar's JSON does not describe");
        // `x has a.b` is `x has a && x.a has b`: the first step reads `a` of x, the rest read inside x.a.
        const [first, ...rest] = attrs as string[];
        this.readOf(node.left, first, "attributes");
        if (rest.length > 0) {
          let path: Expr = { ".": { left: node.left as Expr, attr: first! } };
          for (const attr of rest.slice(0, -1)) path = { ".": { left: path, attr } };
          this.readOf(path, rest[rest.length - 1], "attributes");
        }
        return;
      }
      case "getTag":
      case "hasTag":
        this.readOf(node.left, undefined, "tags");
        this.expr(node.right);
        return;
      case "like":
        this.expr(node.left);
        return;
      case "is":
        this.expr(node.left);
        if (node.in !== undefined) this.expr(node.in);
        return;
      case "if-then-else":
        this.expr(node.if);
        this.expr(node.then);
        this.expr(node.else);
        return;
      case "Set":
        if (!Array.isArray(body)) throw new Unbounded("a set Cedar's JSON does not describe");
        body.forEach((item) => this.expr(item));
        return;
      case "Record":
        if (typeof body !== "object" || body === null) throw new Unbounded("a record Cedar's JSON does not describe");
        Object.values(body).forEach((item) => this.expr(item));
        return;
      default:
        if (BINARY.has(op)) {
          this.expr(node.left);
          this.expr(node.right);
          return;
        }
        if (UNARY.has(op)) {
          this.expr(node.arg);
          return;
        }
        // Every other key is an extension function or method (`decimal`, `ip`, `lessThan`, `offset`, …): pure
        // functions of their arguments.
        if (!Array.isArray(body)) throw new Unbounded(`uses ${op}, which this analysis does not know`);
        body.forEach((arg) => this.expr(arg));
    }
  }

  /** The scope reads only the principal, action and resource uids (and the entity hierarchy); slots are unbounded. */
  scope(policy: PolicyJson): void {
    const scopes: Array<[RequestVar, unknown]> = [["principal", policy.principal], ["action", policy.action], ["resource", policy.resource]];
    for (const [v, scope] of scopes) {
      const c = scope as Node;
      if (typeof c !== "object" || c === null || !["All", "==", "in", "is"].includes(c.op as string)) {
        throw new Unbounded("has a scope Cedar's JSON does not describe");
      }
      if ("slot" in c || (typeof c.in === "object" && c.in !== null && "slot" in (c.in as Node))) throw new Unbounded("has a template slot");
      if (c.op !== "All") this.vars.add(v);
    }
  }

  policy(policy: PolicyJson): void {
    this.scope(policy);
    for (const clause of policy.conditions as Clause[]) this.expr(clause.body);
  }
}

/** Works out what the given policies (their Cedar JSON, with the ids decisions name them by) can read. */
export function analysePolicyReads(policies: Array<{ id: string; json: PolicyJson }>): PolicyReads {
  const collector = new Collector();
  for (const { id, json } of policies) {
    try {
      collector.policy(json);
    } catch (err) {
      if (err instanceof Unbounded) return { bounded: false, reason: `policy ${id} ${err.message}` };
      throw err;
    }
  }
  return { bounded: true, vars: collector.vars, context: collector.context, principal: collector.principal, resource: collector.resource };
}
