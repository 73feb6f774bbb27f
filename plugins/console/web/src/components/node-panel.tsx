/**
 * One NodeRun, opened from the tree: what it is, its error, inputs and outputs (read from GET /v1/node-runs/{id},
 * again whenever its state or attempt changes), its attempts and retries, the policy decisions about it, and every
 * event about it as the API sent them.
 */
import { useEffect, useState } from "preact/hooks";
import { ApiError, approve, getNodeRun, reject, type FabricErrorBody, type NodeRun, type RunEvent } from "../api";
import { isTerminal, type NodeView } from "../run-model";
import { formatDuration, formatTime } from "../format";
import { href } from "../router";
import { ErrorView } from "./error-view";
import { JsonView, LongText } from "./json-view";
import { StateBadge } from "./state-badge";
import { useConfig } from "../config-context";
import { llmCallOf, redactor, type LlmCallView } from "../redact";

export interface NodePanelProps {
  node: NodeView;
  /** Events about the whole run (the root's panel shows the run.start policy decision among them). */
  runEvents?: RunEvent[];
  onClose: () => void;
  onSelect: (id: string) => void;
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

function Attempts(props: { events: RunEvent[] }) {
  const items = props.events.filter((e) => e.type === "atomic_executed" || e.type === "node_run_retrying" || e.type === "node_run_assigned");
  if (items.length === 0) return <p class="muted">No attempt yet.</p>;
  return (
    <ul class="plain" data-testid="node-retries">
      {items.map((e) => {
        const d = (e.data ?? {}) as { attempt?: number; state?: string; duration_ms?: number; delay_ms?: number; reason?: string; error?: FabricErrorBody; executor_instance_id?: string };
        return (
          <li key={e.seq} data-testid="node-attempt-item" data-type={e.type}>
            <span class="muted">{formatTime(e.time)}</span>{" "}
            {e.type === "node_run_assigned" && (
              <span>
                attempt {d.attempt ?? 1} assigned to <code>{d.executor_instance_id}</code>
              </span>
            )}
            {e.type === "atomic_executed" && (
              <span>
                attempt {d.attempt ?? 1} ran {formatDuration(d.duration_ms)}: <StateBadge state={d.state ?? "?"} />
                {d.error && (
                  <span>
                    {" "}
                    <code>{d.error.code}</code> {d.error.message}
                  </span>
                )}
              </span>
            )}
            {e.type === "node_run_retrying" && (
              <span>
                retrying as attempt {d.attempt}
                {d.delay_ms !== undefined && ` in ${formatDuration(d.delay_ms)}`}
                {d.reason && ` (${d.reason})`}
                {d.error && (
                  <span>
                    {" "}
                    after <code>{d.error.code}</code> {d.error.message}
                  </span>
                )}
              </span>
            )}
          </li>
        );
      })}
    </ul>
  );
}

function PolicyDecisions(props: { events: RunEvent[] }) {
  const items = props.events.filter((e) => e.type === "policy_decided" || e.type === "approval_requested" || e.type === "approval_resolved");
  if (items.length === 0) return <p class="muted">No policy decision recorded.</p>;
  return (
    <ul class="plain" data-testid="node-policy">
      {items.map((e) => {
        const d = (e.data ?? {}) as { action?: string; decision?: string; reason_code?: string; message?: string; approval_id?: string };
        return (
          <li key={e.seq} data-testid="node-policy-item">
            <span class="muted">{formatTime(e.time)}</span> <code>{d.action}</code>:{" "}
            {e.type === "approval_requested" ? (
              <span>
                waits for approval <a href={href(["approvals"])}>{d.approval_id}</a>
              </span>
            ) : e.type === "approval_resolved" ? (
              <span>approval {d.decision}</span>
            ) : (
              <b>{d.decision}</b>
            )}
            {d.reason_code && <span class="muted"> · {d.reason_code}</span>}
            {d.message && <span> · {d.message}</span>}
          </li>
        );
      })}
    </ul>
  );
}

/** Every event about the NodeRun, one JSON object a line (a composite's decomposition of thousands is cut short). */
function RawEvents(props: { events: RunEvent[] }) {
  return <LongText text={props.events.map((e) => JSON.stringify(e)).join("\n")} limit={200_000} testid="raw-events" />;
}

/** A NodeRun parked at a policy checkpoint: a person may let it proceed or fail it from here. */
function WaitingApproval(props: { approvalId: string }) {
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<string | undefined>();
  const [error, setError] = useState<string | undefined>();
  const act = async (what: "approved" | "rejected") => {
    setBusy(true);
    setError(undefined);
    try {
      await (what === "approved" ? approve(props.approvalId) : reject(props.approvalId));
      setDone(what);
    } catch (err) {
      setError(err instanceof ApiError ? `${err.code}: ${err.message}` : (err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="notice row-flex" data-testid="node-waiting-approval">
      <span>
        Waits for a person's approval <code>{props.approvalId}</code>
        {done && ` · ${done}`}
      </span>
      <span class="spacer" />
      <button type="button" data-testid="node-approve" disabled={busy || done !== undefined} onClick={() => act("approved")}>
        Approve
      </button>
      <button type="button" class="danger" data-testid="node-reject" disabled={busy || done !== undefined} onClick={() => act("rejected")}>
        Reject
      </button>
      {error && <span class="error-text">{error}</span>}
    </div>
  );
}

/** An llm.chat NodeRun as a conversation: the prompt's messages, the answer and the tokens it used (all redacted). */
function LlmCall(props: { call: LlmCallView }) {
  const c = props.call;
  return (
    <div data-testid="node-llm-call">
      <dl class="kv">
        {c.model && (
          <>
            <dt>Model</dt>
            <dd class="mono">
              {c.model}
              {c.profile && <span class="muted"> · profile {c.profile}</span>}
            </dd>
          </>
        )}
        {c.usage && (
          <>
            <dt>Tokens</dt>
            <dd data-testid="node-llm-usage">
              {c.usage.prompt_tokens ?? 0} prompt + {c.usage.completion_tokens ?? 0} completion = {c.usage.total_tokens ?? 0}
              {c.cost !== undefined && c.cost > 0 && <span class="muted"> · cost {c.cost}</span>}
            </dd>
          </>
        )}
      </dl>
      <ul class="plain" data-testid="node-llm-prompt">
        {c.messages.map((m, i) => (
          <li key={i} data-role={m.role}>
            <b>{m.role}</b>
            <LongText text={m.text} limit={20_000} />
          </li>
        ))}
      </ul>
      {c.answer !== undefined && (
        <>
          <b>answer</b>
          <LongText text={c.answer} limit={20_000} testid="node-llm-answer" />
        </>
      )}
    </div>
  );
}

/** The text a NodeRun writes as it goes (an LLM's answer, from node_run_output_delta events), as it arrives. */
export function StreamedText(props: { streamed: NonNullable<NodeView["streamed"]>; writing: boolean; testid: string }) {
  const { streamed } = props;
  return (
    <>
      <h2>{props.writing ? "Writing…" : "Text written"}</h2>
      <pre class="streamed-text" data-testid={props.testid} data-attempt={streamed.attempt} data-writing={props.writing ? "true" : "false"}>
        {streamed.text}
        {streamed.truncated ? "\n… (cut here; the outputs hold all of it)" : ""}
      </pre>
      {streamed.attempt > 1 && <p class="muted">Attempt {streamed.attempt}: the call was made again, and its text written anew.</p>}
    </>
  );
}

export function NodePanel(props: NodePanelProps) {
  const n = props.node;
  const [nodeRun, setNodeRun] = useState<NodeRun | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    let stale = false;
    getNodeRun(n.id).then(
      (nr) => !stale && (setNodeRun(nr), setError(undefined)),
      (err: Error) => !stale && setError(err instanceof ApiError ? `${err.code}: ${err.message}` : err.message),
    );
    return () => {
      stale = true;
    };
  }, [n.id, n.state, n.attempt]);
  const redact = redactor(useConfig().redact);
  const shown = nodeRun?.node_run_id === n.id ? nodeRun : undefined;
  const rawFailure = n.error ?? (shown?.extensions?.["nodefabric.error"] as FabricErrorBody | undefined);
  const failure = rawFailure && (redact(rawFailure) as FabricErrorBody);
  const llmCall = shown && llmCallOf(n.nodeTypeId, redact(shown.inputs), redact(shown.outputs));
  const start = n.startedAt ?? n.createdAt;
  return (
    <aside class="panel" data-testid="node-panel" data-node-run-id={n.id} data-state={n.state}>
      <div class="row-flex">
        <h2 class="mono">{n.nodeTypeId}</h2>
        <span class="muted">@{n.version}</span>
        <span class="spacer" />
        <button type="button" class="link" data-testid="node-panel-close" onClick={props.onClose}>
          Close
        </button>
      </div>
      <dl class="kv">
        <dt>NodeRun</dt>
        <dd class="mono">{n.id}</dd>
        <dt>State</dt>
        <dd>
          <StateBadge state={n.state} testid="node-panel-state" />
        </dd>
        {n.kind && (
          <>
            <dt>Kind</dt>
            <dd>{n.kind}</dd>
          </>
        )}
        <dt>Attempt</dt>
        <dd data-testid="node-panel-attempt">{n.attempt}</dd>
        {n.parentId && (
          <>
            <dt>Parent</dt>
            <dd class="mono">
              <button type="button" class="link mono" onClick={() => props.onSelect(n.parentId!)}>
                {n.parentId}
              </button>
            </dd>
          </>
        )}
        <dt>Created</dt>
        <dd title={iso(n.createdAt)}>{formatTime(iso(n.createdAt))}</dd>
        <dt>Started</dt>
        <dd title={iso(n.startedAt)}>{formatTime(iso(n.startedAt))}</dd>
        <dt>Ended</dt>
        <dd title={iso(n.endedAt)}>{formatTime(iso(n.endedAt))}</dd>
        <dt>Duration</dt>
        <dd>{start !== undefined && n.endedAt !== undefined ? formatDuration(n.endedAt - start) : ""}</dd>
        {shown?.executor_binding && (
          <>
            <dt>Executor</dt>
            <dd class="mono">{shown.executor_binding.executor_instance_id}</dd>
          </>
        )}
        {n.children.length > 0 && (
          <>
            <dt>Children</dt>
            <dd>{n.children.length.toLocaleString("en-US")}</dd>
          </>
        )}
      </dl>
      {n.approvalId && <WaitingApproval key={n.approvalId} approvalId={n.approvalId} />}
      {error && <p class="error-text">Reading the NodeRun failed: {error}</p>}
      {failure && (
        <>
          <h2>Error</h2>
          <ErrorView error={failure} testid="node-error" />
        </>
      )}
      {n.streamed && <StreamedText streamed={n.streamed} writing={!isTerminal(n.state)} testid="node-streamed-text" />}
      {llmCall && (
        <>
          <h2>LLM call</h2>
          <LlmCall call={llmCall} />
        </>
      )}
      <h2>Inputs</h2>
      {shown ? <JsonView value={redact(shown.inputs)} testid="node-inputs" /> : <p class="muted">Loading…</p>}
      <h2>Outputs</h2>
      {shown ? <JsonView value={redact(shown.outputs)} testid="node-outputs" empty={isTerminal(n.state) ? "none" : "none yet"} /> : <p class="muted">Loading…</p>}
      <h2>Attempts and retries</h2>
      <Attempts events={n.events} />
      <h2>Policy decisions</h2>
      <PolicyDecisions events={props.runEvents ? [...props.runEvents.filter((e) => e.type === "policy_decided"), ...n.events] : n.events} />
      <h2>Raw events</h2>
      <RawEvents events={redact(n.events) as RunEvent[]} />
    </aside>
  );
}
