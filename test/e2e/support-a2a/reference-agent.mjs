/**
 * A reference A2A 1.0 agent built only from the official JS SDK (@a2a-js/sdk/server + express), for the TCK harness:
 * the TCK runs against it first, which shows the harness reads the suite's verdicts right whatever the fabric does.
 *
 *   node test/e2e/support-a2a/reference-agent.mjs [port]    (prints "reference agent listening on <url>")
 *
 * It answers every message with a task: SUBMITTED, WORKING, one text artifact echoing the message, COMPLETED. A message
 * whose id starts with "test-resubscribe-message-id" stays WORKING for TCK_STREAMING_TIMEOUT × 2 seconds (and a bit),
 * as the TCK's SUT requirements ask, so that its SubscribeToTask tests find the task still running.
 *
 * The one departure from the SDK's defaults: a request with no A2A-Version header is served as 1.0. The SDK reads an
 * absent header as 0.3, as the spec says, but the TCK sends 1.0 method names and shapes with no header at all.
 */
import express from "express";
import { AGENT_CARD_PATH, TaskState, Role } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, InMemoryPushNotificationStore, DefaultPushNotificationSender, defaultServerCallContextBuilder } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const port = Number(process.argv[2] ?? 0);
const holdMs = Math.ceil(Number(process.env.TCK_STREAMING_TIMEOUT ?? "2") * 2000) + 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A 1.0 context for a request that names no version (the TCK's). */
const contextBuilder = (opts) => defaultServerCallContextBuilder({ ...opts, requestedVersion: opts.requestedVersion ?? "1.0" });

const canceled = new Set();
const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const msg = ctx.userMessage;
    const status = (state, text) => ({
      state,
      timestamp: new Date().toISOString(),
      message: text === undefined ? undefined : { messageId: `${taskId}-${state}`, contextId, taskId, role: Role.ROLE_AGENT, parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }], metadata: undefined, extensions: [], referenceTaskIds: [] },
    });
    if (!ctx.task) bus.publish(AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), artifacts: [], history: [msg], metadata: {} }));
    else bus.publish(AgentEvent.task(ctx.task));
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING), metadata: undefined }));
    await sleep(msg.messageId.startsWith("test-resubscribe-message-id") ? holdMs : 200);
    if (canceled.has(taskId)) return bus.finished();
    const said = msg.parts.map((p) => (p.content?.$case === "text" ? p.content.value : JSON.stringify(p.content?.value ?? null))).join(" ");
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: `${taskId}-echo`, name: "echo", description: "", parts: [{ content: { $case: "text", value: `echo: ${said}` }, metadata: undefined, filename: "", mediaType: "text/plain" }], metadata: undefined, extensions: [] },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED, `echo: ${said}`), metadata: undefined }));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    canceled.add(taskId);
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: "", status: { state: TaskState.TASK_STATE_CANCELED, timestamp: new Date().toISOString(), message: undefined }, metadata: undefined }));
    bus.finished();
  },
};

const app = express();
const server = app.listen(port, "127.0.0.1", () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: "TCK reference agent",
    description: "Echoes each message as a task with one text artifact (the official JS SDK, for the TCK harness).",
    supportedInterfaces: [
      { url: `${base}/a2a/jsonrpc`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" },
      { url: `${base}/a2a/rest`, protocolBinding: "HTTP+JSON", protocolVersion: "1.0", tenant: "" },
    ],
    provider: { organization: "NodeFabric tests", url: "https://example.invalid" },
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "echo", name: "Echo", description: "Echoes the message back", tags: ["echo"], examples: ["hello"], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
  const pushStore = new InMemoryPushNotificationStore();
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor, undefined, pushStore, new DefaultPushNotificationSender(pushStore));
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use("/a2a/jsonrpc", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, contextBuilder }));
  app.use("/a2a/rest", restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, contextBuilder }));
  console.log(`reference agent listening on ${base}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
