/** A fabric Error (code, message, details, cause), as a person reads it. */
import type { FabricErrorBody } from "../api";
import { JsonView } from "./json-view";

export function ErrorView(props: { error: FabricErrorBody; testid?: string }) {
  const e = props.error;
  const cause = e.cause as { code?: string; message: string; details?: Record<string, unknown> } | undefined;
  return (
    <div class="error-box stack" data-testid={props.testid}>
      <div>
        <code class="error-text" data-testid="error-code">
          {e.code}
        </code>
        {e.retryable !== undefined && <span class="muted"> · {e.retryable ? "retryable" : "not retryable"}</span>}
      </div>
      <div data-testid="error-message">{e.message}</div>
      {e.details !== undefined && Object.keys(e.details).length > 0 && (
        <div>
          <h3>Details</h3>
          <JsonView value={e.details} testid="error-details" />
        </div>
      )}
      {cause && (
        <div data-testid="error-cause">
          <h3>Cause</h3>
          <div>
            {cause.code && <code>{cause.code}</code>} {cause.message}
          </div>
          {cause.details !== undefined && <JsonView value={cause.details} />}
        </div>
      )}
    </div>
  );
}
