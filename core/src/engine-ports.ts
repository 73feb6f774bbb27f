/**
 * The ports of the coordinator's engine: what it calls out to (the PDP, the executors, the registry's directory).
 * The engine depends on these interfaces and the clients (clients/) implement them, so neither imports the other:
 * both stand on this file, a floor below them (docs/architecture.md, "Floors").
 */
import type {
  AtomicExecuteRequest,
  AtomicExecuteResult,
  CompositeBeginRequest,
  CompositeBeginResponse,
  NodeType,
  PolicyDecision,
  PolicyDecisionRequest,
} from "@nodefabric/schemas";

/** Asks the PDP; throws when it cannot be reached. */
export interface PolicyClient {
  decide(request: PolicyDecisionRequest): Promise<PolicyDecision>;
  /**
   * Asks several questions in one exchange, when the PDP takes several at once: the decisions in the order of the
   * requests, each what `decide` answers for it. Undefined when this PDP answers only one at a time (the caller then
   * asks with `decide`, each question when it is reached); throws when the PDP cannot be reached. Optional: a client
   * without it (the PDP called in process, where a request costs no exchange) is always asked one at a time.
   */
  decideMany?(requests: PolicyDecisionRequest[]): Promise<PolicyDecision[] | undefined>;
}

/** What an atomic execution is sent with, besides its request. */
export interface ExecuteOptions {
  idempotencyKey: string;
  timeoutMs: number;
  /**
   * Mints the NodeRun's assignment token, for an executor of this process (`inProcess`) to call when its handler
   * first reports progress or saves a checkpoint: most executions do neither, and then no token is signed.
   */
  assignmentToken?: () => Promise<string>;
}

/** Sends work to executors. */
export interface ExecutorCaller {
  /** Executes an atomic NodeRun; throws a FabricError for transport failures and non-2xx answers. */
  execute(endpoint: string, body: AtomicExecuteRequest, options: ExecuteOptions): Promise<AtomicExecuteResult>;
  /** Whether an endpoint is an atomic executor of this process, called without a socket (and given `assignmentToken`). */
  inProcess?(endpoint: string): boolean;
  /**
   * The answer an executor gave for `idempotencyKey` is recorded: its NodeRun has ended or moved on to another attempt,
   * so no coordinator sends that key again, and an executor of this process may forget the result it keeps for it.
   */
  answerRecorded?(endpoint: string, idempotencyKey: string): void;
  /** Asks an atomic executor to cancel a NodeRun in flight; never throws. */
  cancel(endpoint: string, nodeRunId: string): Promise<void>;
  /** Hands a composite NodeRun to a composite executor; throws a FabricError for transport failures and non-2xx. */
  begin(endpoint: string, body: CompositeBeginRequest): Promise<CompositeBeginResponse>;
  /** Asks a composite executor to stop driving a NodeRun; never throws. */
  cancelComposite(endpoint: string, nodeRunId: string): Promise<void>;
}

/** An executor as the registry's directory lists it. */
export interface DirectoryEntry {
  executor_instance_id: string;
  endpoint: string;
  kind: string;
}

/** What the engine asks the Node Registry (the registry's client answers it). */
export interface NodeTypeDirectory {
  /** The NodeType of an (id, version); throws the registry's FabricError (e.g. node_type_not_found). */
  get(nodeTypeId: string, version?: string): Promise<NodeType>;
  /** The executors that serve a node type, as the directory lists them. */
  listExecutors(filter: { node_type_id?: string; version?: string }): Promise<DirectoryEntry[]>;
}
