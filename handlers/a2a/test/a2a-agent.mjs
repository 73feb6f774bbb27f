/**
 * A real A2A agent for the tests of a2a.send and the A2A importer, built with @a2a-js/sdk's server over express 5 on
 * loopback. Each skill behaves as its name says (echo, fail, reject, cancel-self, ask, login, slow, reply, text-only); the
 * agent counts the messages it received and the CancelTask calls, and records every request's headers. Its card can
 * be changed while it runs (`setSkills`), and it streams or not (`streaming`).
 *
 * Run as a child process (`node a2a-agent.mjs <port> [--slow-ms N] [--no-streaming]`) it prints `listening <url>` and
 * answers GET /counts with what it saw (the kill -9 end-to-end test reads it).
 */
import express from "express";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const S = { SUBMITTED: 1, WORKING: 2, COMPLETED: 3, FAILED: 4, CANCELED: 5, INPUT_REQUIRED: 6, REJECTED: 7, AUTH_REQUIRED: 8 };

/** The skills the agent lists by default. */
export const DEFAULT_SKILLS = [
  { id: "echo", name: "Echo", description: "Answers with what it was sent", tags: ["test"], examples: ['{"word":"hi"}'], inputModes: ["application/json"], outputModes: ["application/json", "text/plain"], securityRequirements: [] },
  { id: "fail", name: "Fail", description: "Always fails", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  { id: "reject", name: "Reject", description: "Refuses every task", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  { id: "cancel-self", name: "Cancel itself", description: "Cancels its own task", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  { id: "ask", name: "Ask", description: "Asks for more input", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  { id: "login", name: "Login", description: "Asks for credentials", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  { id: "slow", name: "Slow", description: "Works for a while, then echoes", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  { id: "reply", name: "Reply", description: "Answers with a message, making no task", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] },
  { id: "text-only", name: "Shout", description: "Answers a text in capitals", tags: ["text"], examples: ["hello"], inputModes: ["text/plain"], outputModes: ["text/plain"], securityRequirements: [] },
];

const part = (content, mediaType = "") => ({ content, mediaType, filename: "", metadata: {} });
const agentMessage = (taskId, contextId, text) => ({ role: 2, messageId: crypto.randomUUID(), taskId, contextId, parts: [part({ $case: "text", value: text }, "text/plain")], metadata: {}, extensions: [], referenceTaskIds: [] });

/**
 * Starts the agent on 127.0.0.1:`port` (0: any). Options: `streaming` (default true), `slowMs` (how long `slow`
 * works, default 1500), `auth` (a function of the request's headers: false answers 401).
 */
export async function startA2aAgent(options = {}) {
  const state = { messages: [], cancels: 0, headers: [], skills: structuredClone(options.skills ?? DEFAULT_SKILLS), streaming: options.streaming ?? true };
  const canceled = new Set();
  let base = "";
  const card = () => ({
    name: "Test Agent",
    description: "An A2A agent for tests",
    supportedInterfaces: [{ url: `${base}/a2a/jsonrpc`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: state.streaming, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["application/json", "text/plain"],
    defaultOutputModes: ["application/json", "text/plain"],
    skills: state.skills,
    signatures: [],
  });
  const executor = {
    async execute(rc, bus) {
      const message = rc.userMessage;
      const taskId = rc.taskId;
      const contextId = rc.contextId;
      state.messages.push({ messageId: message.messageId, skillId: message.metadata?.skillId, parts: message.parts.map((p) => p.content) });
      const status = (s, text, final = false) => bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: s, message: text ? agentMessage(taskId, contextId, text) : undefined, timestamp: new Date().toISOString() }, metadata: {} }));
      const skill = message.metadata?.skillId;
      if (skill === "reply") {
        bus.publish(AgentEvent.message({ ...agentMessage("", contextId, "a plain reply"), taskId: "" }));
        bus.finished();
        return;
      }
      if (!rc.task) bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: S.SUBMITTED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [message], metadata: {} }));
      const data = message.parts.find((p) => p.content?.$case === "data")?.content.value ?? {};
      const text = message.parts.find((p) => p.content?.$case === "text")?.content.value;
      status(S.WORKING, "started");
      const artifact = (parts) => bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact: { artifactId: crypto.randomUUID(), name: "result", description: "", parts, metadata: {}, extensions: [] }, append: false, lastChunk: true, metadata: {} }));
      switch (skill) {
        case "echo":
          artifact([part({ $case: "data", value: { echo: data, count: state.messages.length } }, "application/json"), part({ $case: "text", value: "echoed" }, "text/plain")]);
          status(S.COMPLETED, "done");
          break;
        case "text-only":
          artifact([part({ $case: "text", value: String(text ?? "").toUpperCase() }, "text/plain")]);
          status(S.COMPLETED);
          break;
        case "fail":
          status(S.FAILED, "the database is on fire");
          break;
        case "reject":
          status(S.REJECTED, "I do not do that");
          break;
        case "cancel-self":
          status(S.CANCELED, "changed my mind");
          break;
        case "ask":
          status(S.INPUT_REQUIRED, "Which city?");
          break;
        case "login":
          status(S.AUTH_REQUIRED, "Sign in first");
          break;
        case "slow": {
          const steps = 10;
          for (let i = 1; i <= steps; i++) {
            await new Promise((r) => setTimeout(r, (options.slowMs ?? 1500) / steps));
            if (canceled.has(taskId)) break;
            status(S.WORKING, `step ${i} of ${steps}`);
          }
          if (canceled.has(taskId)) break;
          artifact([part({ $case: "data", value: { echo: data, count: state.messages.length } }, "application/json")]);
          status(S.COMPLETED, "done");
          break;
        }
        default:
          status(S.REJECTED, `no skill ${skill}`);
      }
      bus.finished();
    },
    async cancelTask(taskId, bus) {
      state.cancels++;
      canceled.add(taskId);
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId: "", status: { state: S.CANCELED, message: undefined, timestamp: new Date().toISOString() }, metadata: {} }));
      bus.finished();
    },
  };
  const handler = new DefaultRequestHandler(card(), new InMemoryTaskStore(), executor);
  // The card is read fresh on every request, so a test can change the skills or streaming while the agent runs.
  handler.getAgentCard = async () => card();
  const app = express();
  app.use((req, res, next) => {
    state.headers.push({ path: req.path, ...req.headers });
    if (options.auth && !options.auth(req.headers)) return res.status(401).json({ error: "unauthorized" });
    next();
  });
  app.get("/counts", (_req, res) => res.json({ messages: state.messages, cancels: state.cancels }));
  app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: async () => card() }));
  app.use("/a2a/jsonrpc", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.use("/a2a/rest", restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  const server = await new Promise((resolve) => {
    const s = app.listen(options.port ?? 0, "127.0.0.1", () => resolve(s));
  });
  base = `http://127.0.0.1:${server.address().port}`;
  return {
    url: base,
    cardUrl: `${base}/.well-known/agent-card.json`,
    state,
    setSkills(skills) {
      state.skills = skills;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const slow = args.indexOf("--slow-ms");
  const agent = await startA2aAgent({ port: Number(args[0] ?? 0), slowMs: slow >= 0 ? Number(args[slow + 1]) : undefined, streaming: !args.includes("--no-streaming") });
  process.stdout.write(`listening ${agent.url}\n`);
}
