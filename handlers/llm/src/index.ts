/**
 * @nodefabric/handler-llm: `llm.chat`, one call to an OpenAI-compatible endpoint as a durable NodeRun, and
 * `llm.planner`, a composite whose every model call is an `llm.chat` child NodeRun, and `llm.agent`, the tool-calling
 * loop as a composite whose model calls and tool calls are child NodeRuns (docs/llm.md).
 */
import { llmChat } from "./chat.js";
import { llmPlanner, planApproval } from "./planner.js";
import { llmAgent } from "./agent.js";

export { llmChat, estimatePromptTokens, readErrorBody, resetLlmConfig, LLM_MAX_TOKENS_EXTENSION, DEFAULT_MAX_OUTPUT_TOKENS } from "./chat.js";
export type { ChatInputs, ChatOutputs, ChatMessage, ChatUsage } from "./chat.js";
export { loadLlmConfig, profileFor, priceOf, costOf, type LlmConfig, type LlmProfile, type ModelPrice, type StructuredMode } from "./config.js";
export { strictSchema, dropStrictNulls, parseJsonAnswer } from "./structured.js";
export { llmPlanner, planApproval, stableJson, PLAN_APPROVAL, type PlannerInputs } from "./planner.js";
export { llmAgent, functionNameOf, type AgentInputs } from "./agent.js";
export { LLM_FAILURE_CODES } from "./failure-codes.js";
export { LLM_SETTINGS } from "./settings.js";
export default [llmChat, llmPlanner, planApproval, llmAgent];
