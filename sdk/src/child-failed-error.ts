/**
 * The error `ctx.call` rejects with when a child NodeRun failed or was canceled. Left uncaught, it fails the composite
 * with `child_failed`; caught, the composite carries on.
 */
import type { FabricErrorBody, NodeTypeRef } from "@nodefabric/schemas";

const CHILD_FAILED = Symbol.for("nodefabric.ChildFailedError");

/** A child NodeRun ended without outputs; recognised by `ChildFailedError.is` across installed copies of the SDK. */
export class ChildFailedError extends Error {
  readonly code = "child_failed";
  readonly node_run_id: string;
  readonly node_type_ref: NodeTypeRef;
  /** The child's own error, as the coordinator recorded it. */
  readonly error: FabricErrorBody;
  readonly state: "failed" | "canceled";

  constructor(child: { node_run_id: string; node_type_ref: NodeTypeRef; error: FabricErrorBody; state: "failed" | "canceled" }) {
    const ref = `${child.node_type_ref.node_type_id}@${child.node_type_ref.version}`;
    super(`child ${child.node_run_id} (${ref}) ${child.state}: ${child.error.code}: ${child.error.message}`);
    this.name = "ChildFailedError";
    this.node_run_id = child.node_run_id;
    this.node_type_ref = child.node_type_ref;
    this.error = child.error;
    this.state = child.state;
    // A symbol from the global registry, not `instanceof`: the executor and the composite may each load their own copy.
    Object.defineProperty(this, CHILD_FAILED, { value: true });
  }

  /** True for a ChildFailedError made by any installed copy of the SDK. */
  static is(value: unknown): value is ChildFailedError {
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[CHILD_FAILED] === true;
  }
}
