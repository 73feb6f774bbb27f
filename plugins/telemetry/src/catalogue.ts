/**
 * Every metric the telemetry plugin serves: its name, type, help text and labels. The Prometheus registry is built
 * from this list, and docs/grafana/nodefabric.json may use only what it names (a test holds them together).
 *
 * Labels are bounded: node type ids (as registered), states, error codes, checkpoints, routes (patterns, not paths),
 * methods and status classes. A run id or NodeRun id is never a label.
 */
export type MetricType = "counter" | "gauge" | "histogram";

export interface MetricSpec {
  name: string;
  type: MetricType;
  help: string;
  labels: readonly string[];
  /** Histogram bucket bounds (seconds, or counts for batch sizes). */
  buckets?: readonly number[];
}

/** Latency buckets, in seconds: 1 ms to 5 min. */
export const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300] as const;
/** Fast operations (HTTP handling, store commits, policy decisions), in seconds: 0.1 ms to 10 s. */
export const FAST_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;
/** How many callers' parts one store transaction grouped. */
export const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] as const;

export const METRICS = {
  runsStarted: { name: "nodefabric_runs_started_total", type: "counter", help: "Runs started, by the node type of their root.", labels: ["node_type_id"] },
  runsEnded: { name: "nodefabric_runs_ended_total", type: "counter", help: "Runs ended, by the node type of their root and their final state.", labels: ["node_type_id", "state"] },
  runDuration: { name: "nodefabric_run_duration_seconds", type: "histogram", help: "From a run's start to its end, by root node type and final state.", labels: ["node_type_id", "state"], buckets: SECONDS_BUCKETS },
  nodeRunDuration: { name: "nodefabric_node_run_duration_seconds", type: "histogram", help: "From a NodeRun's creation to its end, by node type, kind and final state.", labels: ["node_type_id", "kind", "state"], buckets: SECONDS_BUCKETS },
  nodeRunRetries: { name: "nodefabric_node_run_retries_total", type: "counter", help: "NodeRun attempts retried, by node type and the code of the failure retried (lease_expired when its coordinator died).", labels: ["node_type_id", "reason"] },
  nodeRunTimeouts: { name: "nodefabric_node_run_timeouts_total", type: "counter", help: "NodeRun attempts that ran out of time (upstream_timeout, deadline_exceeded), retried or not, by node type.", labels: ["node_type_id"] },
  budgetExceeded: { name: "nodefabric_budget_exceeded_total", type: "counter", help: "Runs failed for passing a budget, by budget.", labels: ["budget"] },
  queueDepth: { name: "nodefabric_queue_depth", type: "gauge", help: "NodeRuns ready to be dispatched that no coordinator has sent yet.", labels: [] },
  queueOldestAge: { name: "nodefabric_queue_oldest_age_seconds", type: "gauge", help: "How long the oldest NodeRun ready to be dispatched has waited (0 with none).", labels: [] },
  dispatchInFlight: { name: "nodefabric_dispatch_in_flight", type: "gauge", help: "NodeRuns this coordinator has sent to executors and awaits.", labels: [] },
  executorInFlight: { name: "nodefabric_executor_in_flight", type: "gauge", help: "NodeRuns this executor is working on now, by executor kind.", labels: ["executor"] },
  pdpDecisions: { name: "nodefabric_pdp_decisions_total", type: "counter", help: "Policy decisions, by checkpoint and outcome (allow, deny, require_approval, error).", labels: ["action", "decision"] },
  pdpDecisionDuration: { name: "nodefabric_pdp_decision_duration_seconds", type: "histogram", help: "Time to reach a policy decision, by checkpoint.", labels: ["action"], buckets: FAST_BUCKETS },
  httpDuration: { name: "nodefabric_http_request_duration_seconds", type: "histogram", help: "HTTP requests served, by service, method, route pattern and status class.", labels: ["service", "method", "route", "status_class"], buckets: FAST_BUCKETS },
  storeWriteDuration: { name: "nodefabric_store_write_duration_seconds", type: "histogram", help: "Store transactions, by store and outcome.", labels: ["store", "outcome"], buckets: FAST_BUCKETS },
  storeWriteBatchParts: { name: "nodefabric_store_write_batch_parts", type: "histogram", help: "Callers' writes grouped into one store transaction, by store.", labels: ["store"], buckets: BATCH_BUCKETS },
  storeWriteEvents: { name: "nodefabric_store_write_events", type: "histogram", help: "Run events written by one store transaction, by store.", labels: ["store"], buckets: BATCH_BUCKETS },
  eventFollowers: { name: "nodefabric_event_followers", type: "gauge", help: "Run event streams being followed through this service, by service.", labels: ["service"] },
  cacheEntries: { name: "nodefabric_cache_entries", type: "gauge", help: "Entries an in-memory cache, map or queue of this process holds now, by cache (docs/memory.md lists them).", labels: ["cache"] },
  cacheBytes: { name: "nodefabric_cache_bytes", type: "gauge", help: "Approximate bytes an in-memory cache holds now (the text of what it keeps), by cache; only caches that can tell cheaply.", labels: ["cache"] },
  cacheMaxEntries: { name: "nodefabric_cache_max_entries", type: "gauge", help: "The bound in entries of an in-memory cache, by cache; only bounded caches.", labels: ["cache"] },
  cacheMaxBytes: { name: "nodefabric_cache_max_bytes", type: "gauge", help: "The bound in bytes of an in-memory cache, by cache; only caches bounded in bytes.", labels: ["cache"] },
  labelOverflow: { name: "nodefabric_metric_label_overflow_total", type: "counter", help: "Label values folded into \"other\" because a metric reached its bound of distinct values, by metric.", labels: ["metric"] },
} as const satisfies Record<string, MetricSpec>;

/** How many distinct values one label of one metric may take before new ones are counted as "other". */
export const MAX_LABEL_VALUES = 500;
