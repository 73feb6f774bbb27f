/**
 * Children and constraints: `POST /v1/node-runs` under a running composite. The envelope in force flows down the
 * tree (the parent's, merged with the spec's and the child type's own), structural limits, allow and deny lists,
 * the run's `max_steps` and candidate bindings are checked for the whole request before anything is written (all
 * or nothing), idempotency keys cover the whole spec, and each child passes the `node.run.create` checkpoint.
 */
import type { CandidateSet, ConstraintEnvelope, FabricErrorBody, NodeRun, NodeRunsCreateRequest, NodeType } from "@nodefabric/schemas";
import { clock } from "../clock.js";
import { newId } from "../ids.js";
import { FabricError } from "../http/errors.js";
import type { NewRunEvent, NodeRunRecord, WriteBatch } from "../store/run-store.js";
import { mergeConstraints, policyContextOf } from "./constraints.js";
import { CONSTRAINTS_KEY, type EngineCore } from "./engine-core.js";
import type { Dispatcher, SendPlan } from "./dispatch.js";
import { assignmentRefused, event, hashOf, isTerminal, type Caller } from "./engine-types.js";

type Spec = NodeRunsCreateRequest["node_runs"][number];

/** What an idempotency key stands for: every field of the spec but the key itself. */
export function specHash(spec: Spec): string {
  const { idempotency_key: _key, ...rest } = spec;
  return hashOf(rest);
}

/** The hash older releases kept (node type and inputs only), so children they created still match on replay. */
function legacySpecHash(spec: Spec): string | undefined {
  const { idempotency_key: _k, node_type_ref, inputs, ...rest } = spec;
  if (Object.keys(rest).length > 0 || node_type_ref.extensions) return undefined;
  return hashOf({ ref: { node_type_id: node_type_ref.node_type_id, version: node_type_ref.version }, inputs });
}

interface Violation {
  index: number;
  constraint: string;
  message: string;
  code?: string;
}

/** Why a node type may not run under an envelope's allow and deny lists, if it may not. */
export function listRefusal(envelope: ConstraintEnvelope, nodeTypeId: string): { code: "node_type_denied" | "node_type_not_allowed"; constraint: string; message: string } | undefined {
  const lists = envelope.candidates ?? {};
  if (lists.denied_node_type_ids?.includes(nodeTypeId)) {
    return { code: "node_type_denied", constraint: "candidates.denied_node_type_ids", message: `${nodeTypeId} is denied by the constraints in force` };
  }
  if (lists.allowed_node_type_ids && !lists.allowed_node_type_ids.includes(nodeTypeId)) {
    return { code: "node_type_not_allowed", constraint: "candidates.allowed_node_type_ids", message: `${nodeTypeId} is not in the allow list of the constraints in force` };
  }
  return undefined;
}

export class Children {
  constructor(
    private readonly core: EngineCore,
    private readonly dispatcher: Dispatcher,
  ) {}

  /** POST /v1/node-runs. */
  async create(req: NodeRunsCreateRequest, caller: Caller = {}): Promise<NodeRun[]> {
    const core = this.core;
    if (caller.assignment && (caller.assignment.run_id !== req.run_id || caller.assignment.node_run_id !== req.parent_node_run_id)) {
      throw assignmentRefused(caller, `children of node run ${req.parent_node_run_id}`);
    }
    const parentCheck = await core.store.getNodeRun(req.parent_node_run_id);
    const invalidParent = (why: string) =>
      new FabricError("parent_node_run_invalid", `node run ${req.parent_node_run_id} cannot take children: ${why}`, {
        details: { run_id: req.run_id, parent_node_run_id: req.parent_node_run_id },
      });
    if (!parentCheck || parentCheck.run_id !== req.run_id) throw invalidParent(`it is not a node run of run ${req.run_id}`);
    await core.getRunRecord(req.run_id, caller);
    const outcome = await core.withLock(req.run_id, async () => {
      const parent = (await core.store.getNodeRun(req.parent_node_run_id))!;
      const run = (await core.store.getRun(req.run_id))!;
      if (isTerminal(run.state)) throw invalidParent(`run ${run.run_id} has ended (${run.state})`);
      if (parent.node_run.kind !== "composite") throw invalidParent("it is not a composite");
      if (parent.state !== "running") throw invalidParent(`it is ${parent.state}, not running`);
      const parentEnvelope = await core.envelopeOf(parent, run);

      // Repeated keys first: they return what exists and count against nothing.
      const result: Array<NodeRun | undefined> = new Array(req.node_runs.length);
      const fresh: Array<{ index: number; spec: Spec; hash: string }> = [];
      const seenKeys = new Map<string, number>();
      for (let i = 0; i < req.node_runs.length; i++) {
        const spec = req.node_runs[i];
        const hash = specHash(spec);
        if (spec.idempotency_key) {
          const earlier = seenKeys.get(spec.idempotency_key);
          if (earlier !== undefined) {
            if (fresh.find((f) => f.index === earlier)?.hash !== hash) throw idempotencyConflict(spec.idempotency_key);
            continue; // resolved to the same child below
          }
          const existing = await core.store.findChild(req.run_id, req.parent_node_run_id, spec.idempotency_key);
          if (existing) {
            if (existing.spec_hash !== hash && existing.spec_hash !== legacySpecHash(spec)) throw idempotencyConflict(spec.idempotency_key);
            result[i] = existing.node_run;
            continue;
          }
          seenKeys.set(spec.idempotency_key, i);
        }
        fresh.push({ index: i, spec, hash });
      }

      // Limits, lists and the steps budget, for the whole request before anything is written.
      const violations: Violation[] = [];
      const pExt = parent.node_run.extensions ?? {};
      const children = (typeof pExt["nodefabric.children"] === "number" ? pExt["nodefabric.children"] : 0) as number;
      const rounds = (typeof pExt["nodefabric.decomposition_rounds"] === "number" ? pExt["nodefabric.decomposition_rounds"] : 0) as number;
      const usage = core.usageOf(run);
      const total = usage.steps;
      const envelopes: ConstraintEnvelope[] = [];
      for (const f of fresh) {
        // The spec's constraints bind the child and everything under it.
        const c = mergeConstraints(parentEnvelope, f.spec.constraints);
        envelopes.push(c);
        const s = c.structural ?? {};
        const id = f.spec.node_type_ref.node_type_id;
        if (s.max_depth !== undefined && parent.depth + 1 > s.max_depth) violations.push({ index: f.index, constraint: "structural.max_depth", message: `depth ${parent.depth + 1} exceeds max_depth ${s.max_depth}` });
        if (s.max_children_per_composite !== undefined && children + fresh.length > s.max_children_per_composite) violations.push({ index: f.index, constraint: "structural.max_children_per_composite", message: `${children + fresh.length} children exceed max_children_per_composite ${s.max_children_per_composite}` });
        if (s.max_total_nodes_per_run !== undefined && total + fresh.length > s.max_total_nodes_per_run) violations.push({ index: f.index, constraint: "structural.max_total_nodes_per_run", message: `${total + fresh.length} node runs exceed max_total_nodes_per_run ${s.max_total_nodes_per_run}` });
        if (s.max_decomposition_rounds_per_node !== undefined && rounds + 1 > s.max_decomposition_rounds_per_node) violations.push({ index: f.index, constraint: "structural.max_decomposition_rounds_per_node", message: `round ${rounds + 1} exceeds max_decomposition_rounds_per_node ${s.max_decomposition_rounds_per_node}` });
        const refusal = listRefusal(c, id);
        if (refusal) violations.push({ index: f.index, constraint: refusal.constraint, message: `${refusal.message} (${refusal.code})`, code: refusal.code });
      }
      if (violations.length > 0) {
        throw new FabricError("constraint_violation", violations[0].message, { details: { violations: violations.map((v) => ({ ...v, path: `/node_runs/${v.index}` })) } });
      }
      const maxSteps = core.budgetsOf(run).max_steps;
      if (maxSteps !== undefined && fresh.length > 0 && total + fresh.length > maxSteps) {
        // Passing a budget ends the run; the request that tried is refused.
        const error = core.budgetError("max_steps", maxSteps, total + fresh.length);
        const batch: WriteBatch = { runs: [], nodeRuns: [], events: [] };
        const inFlight = await core.endOpenRun(batch, run, "failed", error);
        await core.write(batch);
        return { refused: { error, inFlight } } as const;
      }
      const types: NodeType[] = [];
      for (const f of fresh) types.push(await core.o.resolver.nodeType(f.spec.node_type_ref));
      const bindingEvents = await this.checkBindings(fresh, run.run_id, parent.node_run_id);

      const now = clock.now();
      const nowIso = new Date(now).toISOString();
      const batch: WriteBatch = { runs: [], nodeRuns: [], events: [...bindingEvents], approvals: [] };
      const created: NodeRunRecord[] = [];
      for (let k = 0; k < fresh.length; k++) {
        const f = fresh[k];
        const nodeType = types[k];
        const id = newId("nr");
        const envelope = mergeConstraints(envelopes[k], nodeType.constraints);
        const ext: Record<string, unknown> = { "nodefabric.attempt": 1, "nodefabric.depth": parent.depth + 1 };
        if (f.spec.idempotency_key) ext["nodefabric.idempotency_key"] = f.spec.idempotency_key;
        if (f.spec.candidate_set_id) ext["nodefabric.candidate_set_id"] = f.spec.candidate_set_id;
        if (f.spec.binding_decision) ext["nodefabric.binding_decision"] = f.spec.binding_decision;
        if (f.spec.metadata) ext["nodefabric.metadata"] = f.spec.metadata;
        if (Object.keys(envelope).length > 0) ext[CONSTRAINTS_KEY] = envelope;
        for (const [key, value] of Object.entries(f.spec.extensions ?? {})) if (!(key in ext)) ext[key] = value;
        const node: NodeRun = {
          node_run_id: id,
          run_id: run.run_id,
          parent_node_run_id: parent.node_run_id,
          node_type_ref: { node_type_id: f.spec.node_type_ref.node_type_id, version: f.spec.node_type_ref.version },
          state: "queued",
          kind: nodeType.kind,
          created_at: nowIso,
          inputs: f.spec.inputs,
          extensions: ext,
        };
        const rec: NodeRunRecord = {
          node_run_id: id,
          run_id: run.run_id,
          parent_node_run_id: parent.node_run_id,
          state: "queued",
          node_run: node,
          attempt: 1,
          available_at: now,
          lease_owner: core.o.instanceId,
          lease_expires_at: now + core.leaseMs,
          approval_id: null,
          idempotency_key: f.spec.idempotency_key ?? null,
          spec_hash: f.hash,
          depth: parent.depth + 1,
          created_at: now,
        };
        const data: Record<string, unknown> = { node_type_ref: node.node_type_ref, kind: nodeType.kind, parent_node_run_id: parent.node_run_id };
        if (f.spec.idempotency_key) data.idempotency_key = f.spec.idempotency_key;
        batch.events!.push(event("node_run_created", run.run_id, id, data));
        core.noteCreatedIn(id);
        batch.nodeRuns!.push(rec);
        created.push(rec);
        result[f.index] = node;
      }
      // Specs that repeated a key within this request resolve to the child created for its first use.
      for (let i = 0; i < req.node_runs.length; i++) {
        if (result[i]) continue;
        const first = seenKeys.get(req.node_runs[i].idempotency_key!)!;
        result[i] = result[first];
      }
      if (created.length > 0) {
        batch.events!.push(event("composite_decomposed", run.run_id, parent.node_run_id, { child_node_run_ids: created.map((c) => c.node_run_id), round: rounds + 1 }));
        parent.node_run.extensions = { ...pExt, "nodefabric.children": children + created.length, "nodefabric.decomposition_rounds": rounds + 1 };
        batch.nodeRuns!.unshift(parent);
        core.addUsage(batch, run, { steps: created.length });
        core.noteProgress(parent.node_run_id, now);
      }

      // The node.run.create checkpoint, then each child's first dispatch step, written with its creation.
      const plans: SendPlan[] = [];
      const ended: NodeRunRecord[] = [];
      for (let k = 0; k < created.length; k++) {
        const rec = created[k];
        if (isTerminal(run.state)) break; // a budget ended the run while planning an earlier child
        if (core.o.policy) {
          const d = await core.decide({
            action: "node.run.create",
            run_id: run.run_id,
            node_run_id: rec.node_run_id,
            node_type_ref: rec.node_run.node_type_ref,
            run_context: run.run.run_context,
            constraints: (rec.node_run.extensions?.[CONSTRAINTS_KEY] as ConstraintEnvelope | undefined) ?? {},
            ...policyContextOf(rec.node_run),
          });
          batch.events!.push(event("policy_decided", run.run_id, rec.node_run_id, { action: "node.run.create", ...d.record }));
          if (d.error) {
            core.finishNodeRun(batch, run, rec, "failed", undefined, d.error);
            continue;
          }
          if (d.decision?.decision === "require_approval") {
            await core.park(batch, rec, d.decision, "node.run.create");
            continue;
          }
        }
        if (core.stopped) continue;
        const plan = await this.dispatcher.plan(batch, run, rec, types[k], ended);
        if (plan) plans.push(plan);
      }
      await core.write(batch);
      return { plans: isTerminal(run.state) ? [] : plans, ended, result: result as NodeRun[] };
    });
    if ("refused" in outcome) {
      for (const n of outcome.refused!.inFlight) core.cancelAtExecutor(n);
      throw stepsRefused(outcome.refused!.error);
    }
    for (const n of outcome.ended) core.cancelAtExecutor(n);
    for (const plan of outcome.plans) this.dispatcher.send(plan);
    return outcome.result;
  }

  /** Checks each spec bound to a candidate set against the set Selection stored; returns the events to record. */
  private async checkBindings(fresh: Array<{ index: number; spec: Spec }>, runId: string, parentId: string): Promise<NewRunEvent[]> {
    const events: NewRunEvent[] = [];
    for (const f of fresh) {
      const setId = f.spec.candidate_set_id ?? f.spec.binding_decision?.candidate_set_id;
      const chosen = f.spec.binding_decision?.chosen_node_type_ref ?? f.spec.node_type_ref;
      if (!setId && !f.spec.binding_decision) continue;
      const bad = (message: string) =>
        new FabricError("candidate_binding_violation", message, { details: { path: `/node_runs/${f.index}`, candidate_set_id: setId, node_type_ref: f.spec.node_type_ref } });
      if (chosen.node_type_id !== f.spec.node_type_ref.node_type_id || chosen.version !== f.spec.node_type_ref.version) {
        throw bad("binding_decision.chosen_node_type_ref differs from the node_type_ref of the spec");
      }
      if (!setId) throw bad("a binding_decision needs a candidate_set_id");
      if (!this.core.o.selection) throw bad("no Selection service is configured to check the binding against");
      let set: CandidateSet;
      try {
        set = await this.core.o.selection.getCandidateSet(setId);
      } catch (err) {
        if (FabricError.is(err) && err.statusCode === 404) throw bad(`candidate set ${setId} does not exist`);
        throw err;
      }
      const member = set.candidates.some((c) => c.node_type_ref.node_type_id === chosen.node_type_id && c.node_type_ref.version === chosen.version);
      if (!member) throw bad(`${chosen.node_type_id}@${chosen.version} is not a member of candidate set ${setId}`);
      events.push(event("candidate_set_generated", runId, parentId, { candidate_set_id: set.candidate_set_id, subtask_id: set.subtask_id, candidates: set.candidates.length }));
      events.push(
        event("subtask_mapped", runId, parentId, {
          subtask_id: f.spec.binding_decision?.subtask_id ?? set.subtask_id,
          candidate_set_id: setId,
          chosen_node_type_ref: chosen,
        }),
      );
    }
    return events;
  }
}

function idempotencyConflict(key: string): FabricError {
  return new FabricError("idempotency_conflict", `idempotency_key ${key} was already used under this parent for a different spec`, {
    details: { idempotency_key: key },
  });
}

function stepsRefused(error: FabricErrorBody): FabricError {
  return new FabricError("constraint_violation", `${error.message}; the run failed with budget_exceeded`, {
    details: { violations: [{ constraint: "budgets.max_steps", code: "budget_exceeded", message: error.message, path: "/node_runs" }], ...error.details },
  });
}
