/**
 * #/approvals: everything waiting for a person, newest first, a page at a time, polled so new requests appear and
 * decided ones leave. A decision made here stays on its row (approved, rejected, or why it could not be) until the
 * person moves on.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, approve, listApprovals, reject, type Approval } from "../api";
import type { Route } from "../router";
import { usePolling } from "../components/use-polling";
import { When } from "../components/when";
import "./approvals.css";

const PAGE_SIZE = 50;
const POLL_MS = 3000;

/** What happened to a row the person acted on, here in this tab. */
type Outcome = { kind: "busy" } | { kind: "done"; decision: "approved" | "rejected" } | { kind: "error"; text: string; gone: boolean };

function explain(err: unknown): { text: string; gone: boolean } {
  if (err instanceof ApiError) {
    if (err.status === 409) {
      const state = (err.envelope?.error?.details as { approval_state?: unknown } | undefined)?.approval_state;
      return { text: `Already ${typeof state === "string" ? state : "decided"}, elsewhere: ${err.message}`, gone: true };
    }
    if (err.status === 404) return { text: `No longer there: ${err.message}`, gone: true };
    if (err.status === 403) {
      const scope = (err.envelope?.error?.details as { required_scope?: unknown } | undefined)?.required_scope;
      const need = typeof scope === "string" && !err.message.includes(scope) ? ` (it needs ${scope})` : "";
      return { text: `Not allowed: ${err.message}${need}`, gone: false };
    }
    return { text: `${err.code}: ${err.message}`, gone: false };
  }
  return { text: (err as Error)?.message ?? String(err), gone: false };
}

export function ApprovalsPage(_props: { route: Route }) {
  // Tokens of the pages before this one, so "Newer" can go back; the first page has no token.
  const [tokens, setTokens] = useState<Array<string | undefined>>([undefined]);
  const token = tokens[tokens.length - 1];
  const [rows, setRows] = useState<Approval[] | undefined>();
  const [next, setNext] = useState<string | undefined>();
  const [loadError, setLoadError] = useState<string | undefined>();
  const [outcomes, setOutcomes] = useState<Record<string, Outcome>>({});
  // Rows decided here are kept in view after the server stops listing them as pending.
  const decided = useRef(new Map<string, Approval>());

  const load = async (signal: AbortSignal) => {
    try {
      const page = await listApprovals({ state: "pending", limit: PAGE_SIZE, page_token: token });
      if (signal.aborted) return;
      const byId = new Map(page.approvals.map((a) => [a.approval_id, a]));
      for (const [id, a] of decided.current) if (!byId.has(id)) byId.set(id, a);
      setRows([...byId.values()].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0)));
      setNext(page.nextPageToken);
      setLoadError(undefined);
    } catch (err) {
      if (signal.aborted) return;
      setLoadError(explain(err).text);
    }
  };
  usePolling(load, POLL_MS, [token]);
  useEffect(() => {
    decided.current.clear();
  }, [token]);

  const act = async (a: Approval, decision: "approved" | "rejected", reason?: string) => {
    setOutcomes((o) => ({ ...o, [a.approval_id]: { kind: "busy" } }));
    try {
      if (decision === "approved") await approve(a.approval_id);
      else await reject(a.approval_id, reason ? { reason } : undefined);
      decided.current.set(a.approval_id, a);
      setOutcomes((o) => ({ ...o, [a.approval_id]: { kind: "done", decision } }));
    } catch (err) {
      const why = explain(err);
      if (why.gone) decided.current.set(a.approval_id, a);
      setOutcomes((o) => ({ ...o, [a.approval_id]: { kind: "error", ...why } }));
    }
  };

  return (
    <section class="page approvals-page">
      <header class="page-header">
        <h1>Approvals</h1>
        <p class="muted">NodeRuns a policy holds until a person decides. This list refreshes every few seconds.</p>
      </header>
      {loadError && (
        <p class="error-box" data-testid="approvals-error" role="alert">
          {loadError}
        </p>
      )}
      {rows === undefined ? (
        !loadError && <p class="muted">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="empty" data-testid="approvals-empty">
          Nothing is waiting for a person{tokens.length > 1 ? " on this page" : ""}.
        </p>
      ) : (
        <div class="table-scroll">
          <table class="table approvals-table" data-testid="approvals-table">
            <thead>
              <tr>
                <th>Run</th>
                <th>NodeRun</th>
                <th>Node type</th>
                <th>Checkpoint</th>
                <th>Reason</th>
                <th>Asked</th>
                <th>Decision</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((a) => (
                <ApprovalRow key={a.approval_id} a={a} outcome={outcomes[a.approval_id]} act={act} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <nav class="pager">
        <button type="button" class="secondary" data-testid="approvals-newer" disabled={tokens.length <= 1} onClick={() => setTokens((t) => t.slice(0, -1))}>
          ← Newer
        </button>
        <button type="button" class="secondary" data-testid="approvals-older" disabled={!next} onClick={() => next && setTokens((t) => [...t, next])}>
          Older →
        </button>
      </nav>
    </section>
  );
}

function ApprovalRow({ a, outcome, act }: { a: Approval; outcome: Outcome | undefined; act(a: Approval, d: "approved" | "rejected", reason?: string): void }) {
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  const runHref = `#/runs/${encodeURIComponent(a.run_id)}`;
  const open = outcome === undefined || (outcome.kind === "error" && !outcome.gone);
  const busy = outcome?.kind === "busy";
  return (
    <tr data-testid="approval-row" data-approval-id={a.approval_id} class={outcome?.kind === "done" ? `decided ${outcome.decision}` : ""}>
      <td>
        <a href={runHref} class="mono">
          {a.run_id}
        </a>
        {a.tenant_id && <div class="muted small">tenant {a.tenant_id}</div>}
      </td>
      <td>
        <a href={`${runHref}?node=${encodeURIComponent(a.node_run_id)}`} class="mono">
          {a.node_run_id}
        </a>
      </td>
      <td>
        <a href={`#/node-types/${encodeURIComponent(a.node_type_ref.node_type_id)}?version=${encodeURIComponent(a.node_type_ref.version)}`} class="mono">
          {a.node_type_ref.node_type_id}@{a.node_type_ref.version}
        </a>
      </td>
      <td class="mono">{a.action}</td>
      <td>
        {a.reason_code && <code>{a.reason_code}</code>}
        {a.message && <div>{a.message}</div>}
        {!a.reason_code && !a.message && <span class="muted">—</span>}
      </td>
      <td class="when">
        <When iso={a.created_at} />
      </td>
      <td class="decision" data-testid="approval-state">
        {outcome?.kind === "done" && <strong class={`badge ${outcome.decision}`}>{outcome.decision}</strong>}
        {outcome?.kind === "error" && (
          <p class="error-box" data-testid="approval-error" role="alert">
            {outcome.text}
          </p>
        )}
        {open && !rejecting && (
          <span class="actions">
            <button type="button" data-testid="approve" disabled={busy} onClick={() => act(a, "approved")}>
              Approve
            </button>
            <button type="button" class="danger" data-testid="reject" disabled={busy} onClick={() => setRejecting(true)}>
              Reject
            </button>
          </span>
        )}
        {open && rejecting && (
          <form
            class="reject-form"
            onSubmit={(e) => {
              e.preventDefault();
              setRejecting(false);
              act(a, "rejected", reason.trim() || undefined);
            }}
          >
            <input
              type="text"
              data-testid="reject-reason"
              maxLength={1000}
              placeholder="Reason (optional)"
              aria-label="Reason for rejecting (optional)"
              value={reason}
              onInput={(e) => setReason((e.currentTarget as HTMLInputElement).value)}
            />
            <button type="submit" class="danger" data-testid="reject-confirm" disabled={busy}>
              Reject
            </button>
            <button type="button" class="secondary" data-testid="reject-cancel" onClick={() => setRejecting(false)}>
              Keep
            </button>
          </form>
        )}
        {busy && <span class="muted"> sending…</span>}
      </td>
    </tr>
  );
}
