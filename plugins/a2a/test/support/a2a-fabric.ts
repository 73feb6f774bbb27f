/**
 * A whole fabric for the A2A server's tests: the seven services in this process on ephemeral loopback ports, the demo
 * handlers and this plugin loaded from source; and the official A2A client (@a2a-js/sdk/client) for its card.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Role, type Message } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, type Client } from "@a2a-js/sdk/client";
import { startPluginFabric, type PluginFabric } from "../../../../core/test/support/plugin-fabric.js";
import a2aPlugin from "../../src/index.js";

const pluginDir = fileURLToPath(new URL("../..", import.meta.url));

export type A2aFabric = PluginFabric;

export interface A2aFabricOptions {
  auth?: Record<string, unknown>;
  /** Options of the plugin's gateway entry. */
  a2a?: Record<string, unknown>;
  policy?: string;
  extraFlags?: Record<string, unknown>;
  /** With auth: a token the registry accepts, to wait for the demo node types. */
  registryToken?: string;
}

export async function startA2aFabric(o: A2aFabricOptions = {}): Promise<A2aFabric> {
  return startPluginFabric({
    plugin: { definition: a2aPlugin, source: "@nodefabric/plugin-a2a", file: path.join(pluginDir, "src/index.ts") },
    ...(o.a2a ? { options: o.a2a } : {}),
    ...(o.auth ? { auth: o.auth } : {}),
    ...(o.policy ? { policy: o.policy } : {}),
    ...(o.extraFlags ? { extraFlags: o.extraFlags } : {}),
    ...(o.registryToken ? { registryToken: o.registryToken } : {}),
  });
}

/** The official client from the fabric's card, over JSON-RPC or HTTP+JSON, with a bearer token when given. */
export async function a2aClient(gateway: string, binding: "JSONRPC" | "HTTP+JSON" = "JSONRPC", token?: string): Promise<Client> {
  const authFetch: typeof fetch = (input, init) => fetch(input, token ? { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), authorization: `Bearer ${token}` } } : init);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch }), new RestTransportFactory({ fetchImpl: authFetch })],
      preferredTransports: [binding],
    }),
  );
  return factory.createFromUrl(gateway);
}

/** A JSON-RPC call as a client without the SDK sends it. */
export async function rpc(gateway: string, method: string, params: unknown, headers: Record<string, string> = {}, id: unknown = 1): Promise<{ status: number; body: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const res = await fetch(`${gateway}/a2a`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ jsonrpc: "2.0", id, method, params }) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // an event stream or a non-JSON body stays text
  }
  return { status: res.status, body };
}

/** A message naming a skill, with a data part as its input (A2A 1.0 JSON). */
export function skillMessage(skillId: string, data: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { messageId: `m-${Math.random().toString(16).slice(2)}`, role: "ROLE_USER", parts: [{ data }], metadata: { skillId }, ...extra };
}

/** A message for the official client: a skill, a data part as its input, a text part; or a reply to a task. */
let n = 0;
export function message(skillId: string | undefined, data?: unknown, o: { text?: string; contextId?: string; taskId?: string } = {}): Message {
  const parts: Message["parts"] = [];
  if (data !== undefined) parts.push({ content: { $case: "data", value: data }, metadata: undefined, filename: "", mediaType: "" });
  if (o.text !== undefined) parts.push({ content: { $case: "text", value: o.text }, metadata: undefined, filename: "", mediaType: "" });
  return { messageId: `m${++n}`, contextId: o.contextId ?? "", taskId: o.taskId ?? "", role: Role.ROLE_USER, parts, metadata: skillId ? { skillId } : undefined, extensions: [], referenceTaskIds: [] };
}

