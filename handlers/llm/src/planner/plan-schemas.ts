/**
 * What a planner reads and what its model answers: the planner's inputs, the plan of subtasks and the evaluation (the
 * schemas the model's answers must pass, and the checks beyond them), the declarative plan of mode "plan", and the
 * record of each child it ran.
 */
import type { JsonObject, JsonValue, NodeTypeRef } from "@nodefabric/sdk";
import type { Candidate } from "./candidates.js";

/** The planner's inputs (its input_schema is in planner.ts). */
export interface PlannerInputs {
  goal?: string;
  prompt?: string;
  context?: JsonObject;
  max_steps?: number;
  max_depth?: number;
  repair_max?: number;
  max_replans?: number;
  max_candidates?: number;
  profile?: string;
  model?: string;
  max_output_tokens?: number;
  allowed_node_type_ids?: string[];
  require_approval?: boolean;
  mode?: "subtasks" | "plan";
}

/** A subtask of the model's plan: its goal, and the ids of the earlier subtasks whose results it needs. */
export interface Subtask {
  id: string;
  goal: string;
  after: string[];
}

/** What the planner reports of each child it ran. */
export interface ChildRecord {
  subtask_id: string;
  node_type_ref: NodeTypeRef;
  node_run_id: string;
  state: "completed" | "failed";
  outputs?: JsonObject;
  error?: JsonObject;
  recovery?: string;
}

/** A step of a declarative plan, as the model writes it. */
export interface DeclarativeStep {
  id: string;
  node_type_ref: NodeTypeRef;
  inputs?: JsonValue;
  when?: JsonValue;
  for_each?: JsonValue;
  after?: string[];
}

/** The model's plan of subtasks. */
export const PLAN_SCHEMA = {
  type: "object",
  properties: {
    subtasks: {
      type: "array",
      items: {
        type: "object",
        properties: {
          id: { type: "string", pattern: "^[A-Za-z0-9_-]{1,32}$" },
          goal: { type: "string", minLength: 1, maxLength: 2000 },
          after: { type: "array", items: { type: "string" } },
        },
        required: ["id", "goal", "after"],
        additionalProperties: false,
      },
    },
  },
  required: ["subtasks"],
  additionalProperties: false,
};

/** The model's judgement of the results, with the recoveries it asks for. */
export const EVALUATION_SCHEMA = {
  type: "object",
  properties: {
    summary: { type: "string", maxLength: 4000 },
    success: { type: "boolean" },
    recovery: {
      type: "array",
      items: {
        type: "object",
        properties: {
          subtask_id: { type: "string" },
          action: { enum: ["retry", "remap", "decompose_further", "ask_user", "abort"] },
          reason: { type: "string", maxLength: 1000 },
        },
        required: ["subtask_id", "action", "reason"],
        additionalProperties: false,
      },
    },
  },
  required: ["summary", "success", "recovery"],
  additionalProperties: false,
};

/** The answer of a choice among `names`, the candidates' names. */
export function choiceSchema(names: string[]): JsonObject {
  return { type: "object", properties: { choice: { enum: names }, reason: { type: "string", maxLength: 500 } }, required: ["choice"], additionalProperties: false };
}

/** The declarative plan the model answers in mode "plan": steps of the listed node types only, then the outputs. */
export function declarativePlanSchema(usable: Candidate[]): JsonObject {
  return {
    type: "object",
    properties: {
      steps: {
        type: "array",
        items: {
          type: "object",
          properties: {
            id: { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_]{0,63}$" },
            node_type_ref: {
              type: "object",
              properties: { node_type_id: { enum: [...new Set(usable.map((c) => c.node_type_ref.node_type_id))] }, version: { type: "string" } },
              required: ["node_type_id", "version"],
              additionalProperties: false,
            },
            inputs: {},
            when: {},
            for_each: {},
            after: { type: "array", items: { type: "string" } },
          },
          required: ["id", "node_type_ref"],
          additionalProperties: false,
        },
      },
      outputs: {},
    },
    required: ["steps", "outputs"],
    additionalProperties: false,
  };
}

/** The checks a plan must pass beyond its schema; each problem is a line the model can act on. */
export function planProblems(subtasks: Subtask[]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [i, s] of subtasks.entries()) {
    if (seen.has(s.id)) problems.push(`/subtasks/${i}/id: "${s.id}" is used twice`);
    for (const a of s.after) {
      if (a === s.id) problems.push(`/subtasks/${i}/after: a subtask cannot wait for itself`);
      // Only earlier subtasks: this also makes a cycle impossible.
      else if (!seen.has(a)) problems.push(`/subtasks/${i}/after: "${a}" is not the id of an earlier subtask`);
    }
    seen.add(s.id);
  }
  if (subtasks.length === 0) problems.push("/subtasks: the plan has no subtask");
  return problems;
}
