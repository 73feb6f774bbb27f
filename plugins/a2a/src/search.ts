/**
 * Search mode, for catalogues no card can list (an imported API of 1,000 operations and more), as MCP's search mode:
 * the card lists a `fabric.search` skill, and a message to it is a query that core's searchCatalogue answers through
 * Selection, narrowed to what the caller may start. The answer is a task that is COMPLETED at once, its artifact the
 * matching skills with their ids, descriptions and input schemas; any of them is then named in metadata.skillId.
 */
import type { AgentSkill, Part } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import { MAX_SEARCH_RESULTS } from "@nodefabric/core";
import type { NodeType } from "@nodefabric/schemas";
import { textOfParts } from "./message-run.js";

export const SEARCH_SKILL = "fabric.search";
const DEFAULT_LIMIT = 10;

export function searchSkill(): AgentSkill {
  return {
    id: SEARCH_SKILL,
    name: "Find skills",
    description:
      "Searches this fabric's catalogue for the skills (node types) that fit a goal, best first, with their input schemas. " +
      `Send a text part with the goal, or a data part {"query": "…", "limit": 1-${MAX_SEARCH_RESULTS}}; the task completes at once, its artifact the skills found. ` +
      "Then name one in message.metadata.skillId with its input as a data part.",
    tags: ["search", "fabric"],
    examples: [`metadata.skillId "${SEARCH_SKILL}" with the text "send an email"`, `metadata.skillId "${SEARCH_SKILL}" with the data part {"query":"weather in a city","limit":5}`],
    inputModes: ["text/plain", "application/json"],
    outputModes: ["application/json"],
    securityRequirements: [],
  };
}

/** The query and limit a message to the search skill gives (its data part {query, limit?}, else its text). */
export function queryOf(parts: readonly Part[]): { query: string; limit: number } {
  const data = parts.find((p) => p.content?.$case === "data")?.content?.value as Record<string, unknown> | undefined;
  const query = data !== undefined ? data.query : textOfParts(parts);
  const limit = data?.limit ?? DEFAULT_LIMIT;
  if (typeof query !== "string" || query.trim() === "" || query.length > 2000) throw new RequestMalformedError(`${SEARCH_SKILL} takes a query: a text part, or a data part {"query": …} of at most 2000 characters`);
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_SEARCH_RESULTS) throw new RequestMalformedError(`${SEARCH_SKILL}: limit must be an integer from 1 to ${MAX_SEARCH_RESULTS}`);
  return { query, limit };
}

/** The search's answer, the artifact's data part. */
export function foundSkills(found: readonly { nodeType: NodeType; score?: number }[]): { skills: Record<string, unknown>[] } {
  return {
    skills: found.map(({ nodeType: t, score }) => ({
      id: t.node_type_id,
      version: t.version,
      ...(t.description ? { description: t.description } : {}),
      ...(score !== undefined ? { score } : {}),
      input_schema: t.input_schema ?? { type: "object" },
    })),
  };
}
