/**
 * What the fabric tells observers, on `node:diagnostics_channel`: runs and NodeRuns ending, retries, budgets, policy
 * decisions, store writes and HTTP requests. Core measures and publishes; a plugin (plugins/telemetry) subscribes and
 * keeps the counts. Nothing is built or sent while no one subscribes, so a fabric without telemetry pays one check.
 *
 * Messages carry only bounded values (node type ids, states, codes, routes), never a run id, so an observer can use
 * every field as a metric label.
 */
import { channel, type Channel } from "node:diagnostics_channel";
import type { ServiceName } from "../service-names.js";

export interface RunStartedMessage {
  node_type_id: string;
}

export interface RunEndedMessage {
  node_type_id: string;
  state: "completed" | "failed" | "canceled";
  /** From the run's start to its end, in ms. */
  duration_ms: number;
}

export interface NodeRunEndedMessage {
  node_type_id: string;
  kind: "atomic" | "composite";
  state: "completed" | "failed" | "canceled";
  /** From the NodeRun's creation to its end, in ms. */
  duration_ms: number;
  /** The error's code when it failed or was canceled. */
  error_code?: string;
}

export interface NodeRunRetryingMessage {
  node_type_id: string;
  /** The code of the failure that is retried, or `lease_expired` when its holder died. */
  reason: string;
  /** The attempt about to be made (2 for the first retry). */
  attempt: number;
}

export interface BudgetExceededMessage {
  budget: string;
}

export interface PdpDecisionMessage {
  /** The checkpoint asked, e.g. `run.start`, `node.run.execute`. */
  action: string;
  decision: "allow" | "deny" | "require_approval" | "error";
  duration_ms: number;
}

export interface StoreWriteMessage {
  /** The store written: `runs` for the coordinator's run store. */
  store: string;
  /** Callers' parts grouped into this one transaction. */
  parts: number;
  events: number;
  node_runs: number;
  duration_ms: number;
  ok: boolean;
}

export interface HttpRequestMessage {
  service: ServiceName;
  method: string;
  /** The route's pattern (`/v1/runs/:run_id`), or `unmatched`. */
  route: string;
  status: number;
  duration_ms: number;
}

export interface FabricStartedMessage {
  /** How many services this start brought up (7 for `fabric dev`). */
  services: number;
  /** From the call to the last service listening, in ms. */
  duration_ms: number;
}

/** The channels, by name. Subscribe with `diagnostics_channel.subscribe(name, fn)`. */
export const CHANNEL_NAMES = {
  runStarted: "nodefabric:run.started",
  runEnded: "nodefabric:run.ended",
  nodeRunEnded: "nodefabric:node_run.ended",
  nodeRunRetrying: "nodefabric:node_run.retrying",
  budgetExceeded: "nodefabric:budget.exceeded",
  pdpDecision: "nodefabric:pdp.decision",
  storeWrite: "nodefabric:store.write",
  httpRequest: "nodefabric:http.request",
  fabricStarted: "nodefabric:fabric.started",
} as const;

export interface ChannelMessages {
  runStarted: RunStartedMessage;
  runEnded: RunEndedMessage;
  nodeRunEnded: NodeRunEndedMessage;
  nodeRunRetrying: NodeRunRetryingMessage;
  budgetExceeded: BudgetExceededMessage;
  pdpDecision: PdpDecisionMessage;
  storeWrite: StoreWriteMessage;
  httpRequest: HttpRequestMessage;
  fabricStarted: FabricStartedMessage;
}

type Channels = { [K in keyof ChannelMessages]: Channel };

/** The channel objects; `observed.x.hasSubscribers` is the cheap check before building a message. */
export const observed: Channels = Object.fromEntries(Object.entries(CHANNEL_NAMES).map(([k, name]) => [k, channel(name)])) as Channels;

/** Publishes a message when someone listens; `make` is called only then. */
export function publish<K extends keyof ChannelMessages>(kind: K, make: () => ChannelMessages[K]): void {
  const ch = observed[kind];
  if (ch.hasSubscribers) ch.publish(make());
}
