/**
 * #/runs/<id>: one run, live. Its NodeRuns are read once (GET /v1/runs/{id}/node-runs), then its NDJSON event stream
 * is followed from the start and applied as it arrives, so the tree, states, attempts and timeline move with the run.
 * Events are applied in batches, once per animation frame, not one render per event: a fan-out of 10,000 children
 * sends tens of thousands of events. ?node=<id> opens that NodeRun's panel.
 */
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, cancelRun, getRun, listNodeRuns, streamRunEvents, type FabricErrorBody, type RunEvent } from "../api";
import { ErrorView } from "../components/error-view";
import { JsonView } from "../components/json-view";
import { NodePanel, StreamedText } from "../components/node-panel";
import { NodeTree } from "../components/node-tree";
import { StateBadge } from "../components/state-badge";
import { useConfig } from "../config-context";
import { elapsed, formatCount, formatDuration, formatTime, traceHref } from "../format";
import { href, navigate, type Route } from "../router";
import { RunModel, isTerminal } from "../run-model";
import { keysToReveal, treeRows, type TreeOpenState } from "../tree-rows";

/** How long to wait before following the stream again after it broke, doubling up to the last. */
const RECONNECT_MS = [500, 1000, 2000, 5000];

/**
 * Follows the run: its NodeRuns, then its events until the run has ended. Events are queued and handed over once per
 * frame through `flush`.
 */
function useRunModel(runId: string): { model: RunModel; version: number; failure?: ApiError | Error; refresh: () => void } {
  const model = useMemo(() => new RunModel(), [runId]);
  const [version, setVersion] = useState(0);
  const [failure, setFailure] = useState<ApiError | Error | undefined>();
  const bump = () => setVersion((v) => v + 1);

  useEffect(() => {
    const ac = new AbortController();
    const queue: RunEvent[] = [];
    let frame = 0;
    const flush = () => {
      frame = 0;
      if (queue.length === 0) return;
      model.applyAll(queue.splice(0));
      bump();
    };
    const enqueue = (e: RunEvent) => {
      queue.push(e);
      if (frame === 0) frame = requestAnimationFrame(flush);
    };
    let ended = false;
    let lastSeq: number | undefined;
    (async () => {
      try {
        const [run, nodeRuns] = await Promise.all([getRun(runId), listNodeRuns(runId)]);
        if (ac.signal.aborted) return;
        model.setRun(run);
        model.loadSnapshot(nodeRuns);
        bump();
      } catch (err) {
        if (!ac.signal.aborted) setFailure(err as Error);
        return;
      }
      let attempt = 0;
      while (!ac.signal.aborted) {
        try {
          await streamRunEvents(runId, {
            afterSeq: lastSeq,
            signal: ac.signal,
            onEvent: (e) => {
              lastSeq = e.seq;
              if (e.type === "run_completed") ended = true;
              enqueue(e);
            },
          });
          attempt = 0;
          // The stream closes after the run's last event; closed any earlier (a gateway restart), it is opened again.
          if (ended) break;
        } catch (err) {
          if (ac.signal.aborted) break;
          if (err instanceof ApiError && err.status < 500 && err.status !== 429) {
            setFailure(err);
            break;
          }
        }
        await new Promise((r) => setTimeout(r, RECONNECT_MS[Math.min(attempt++, RECONNECT_MS.length - 1)]));
      }
      if (ended && !ac.signal.aborted) {
        // The ended Run carries its outputs or its error.
        getRun(runId).then((run) => {
          model.setRun(run);
          bump();
        }, () => undefined);
      }
    })();
    return () => {
      ac.abort();
      if (frame !== 0) cancelAnimationFrame(frame);
    };
  }, [runId]);

  const refresh = () => {
    getRun(runId).then((run) => {
      model.setRun(run);
      bump();
    }, setFailure);
  };
  return { model, version, failure, refresh };
}

/** A clock for live durations: ticks each second while the run runs, stops once it has ended. */
function useNow(running: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!running) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [running]);
  return running ? now : Date.now();
}

/**
 * The run's trace id (run_context.trace, set by the telemetry plugin or sent by the client): a link to the trace when
 * FABRIC_CONSOLE_TRACE_URL is configured, else the id alone.
 */
function TraceFact(props: { traceId: string }) {
  const link = traceHref(useConfig().trace_url, props.traceId);
  return (
    <span data-testid="run-trace">
      Trace{" "}
      {link ? (
        <a class="mono" href={link} target="_blank" rel="noopener noreferrer">
          {props.traceId}
        </a>
      ) : (
        <b class="mono">{props.traceId}</b>
      )}
    </span>
  );
}

/** Cancels the run after the browser's own confirmation (a real dialog: keyboard and screen readers know it). */
function CancelButton(props: { runId: string; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const cancel = async () => {
    if (!window.confirm(`Cancel run ${props.runId} and every NodeRun still open in it?`)) return;
    setBusy(true);
    setError(undefined);
    try {
      await cancelRun(props.runId);
      props.onDone();
    } catch (err) {
      setError(err instanceof ApiError ? `${err.code}: ${err.message}` : (err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="row-flex">
      <button type="button" class="danger" data-testid="cancel-run" disabled={busy} onClick={cancel}>
        {busy ? "Cancelling…" : "Cancel run"}
      </button>
      {error && (
        <span class="error-text" data-testid="cancel-error">
          {error}
        </span>
      )}
    </span>
  );
}

export function RunPage(props: { route: Route }) {
  const runId = props.route.path[1]!;
  const selectedId = props.route.query.get("node") ?? undefined;
  const { model, version, failure, refresh } = useRunModel(runId);
  const run = model.run;
  const running = run !== undefined && !isTerminal(run.state);
  const now = useNow(running);

  // What the user opened or closed in the tree (anything else follows the defaults of tree-rows.ts).
  const [opened, setOpened] = useState<Set<string>>(() => new Set());
  const [closed, setClosed] = useState<Set<string>>(() => new Set());
  const open: TreeOpenState = { opened, closed };
  const toggle = (key: string, isOpen: boolean) => {
    const o = new Set(opened);
    const c = new Set(closed);
    if (isOpen) {
      o.add(key);
      c.delete(key);
    } else {
      o.delete(key);
      c.add(key);
    }
    setOpened(o);
    setClosed(c);
  };
  const rows = useMemo(() => treeRows(model, open), [model, version, opened, closed]);

  // Opening a NodeRun by link (or "first failure") opens the way to its row, once it is known.
  const revealed = useRef<string | undefined>(undefined);
  const [scrollTo, setScrollTo] = useState<number | undefined>();
  useEffect(() => {
    if (!selectedId || revealed.current === selectedId || !model.nodes.has(selectedId)) return;
    revealed.current = selectedId;
    const keys = keysToReveal(model, selectedId);
    if (keys.some((k) => !opened.has(k))) {
      const o = new Set(opened);
      const c = new Set(closed);
      for (const k of keys) {
        o.add(k);
        c.delete(k);
      }
      setOpened(o);
      setClosed(c);
    }
  }, [selectedId, version]);
  useEffect(() => {
    if (!selectedId) return;
    const i = rows.findIndex((r) => r.kind === "node" && r.node.id === selectedId);
    if (i >= 0) setScrollTo(i);
  }, [selectedId, rows.length]);

  const select = (id: string | undefined) => navigate(["runs", runId], { node: id }, true);
  const selected = selectedId ? model.nodes.get(selectedId) : undefined;
  const counts = model.counts();
  const root = model.rootId ? model.nodes.get(model.rootId) : undefined;
  const firstFailed = counts.failed > 0 ? model.firstFailed() : undefined;
  const runError = run?.extensions?.["nodefabric.error"] as FabricErrorBody | undefined;
  const outputs = run?.extensions?.["nodefabric.outputs"];
  // The root's text as it is written (a run of llm.chat): shown above the tree while the run goes.
  const rootStreamed = model.rootId ? model.nodes.get(model.rootId)?.streamed : undefined;

  if (failure && !run) {
    return (
      <section class="page">
        <h1 class="mono">{runId}</h1>
        <div class="error-box" data-testid="run-error-load">
          {failure instanceof ApiError ? `${failure.code}: ${failure.message}` : failure.message}
        </div>
        <p>
          <a href={href(["runs"])}>Back to the runs</a>
        </p>
      </section>
    );
  }

  return (
    <section class="page" data-testid="run-page" data-run-id={runId}>
      <div class="run-header">
        <a href={href(["runs"])} data-testid="back-to-runs">
          ← Runs
        </a>
        <h1 class="mono">{runId}</h1>
        {run && <StateBadge state={run.state} testid="run-state" />}
        <span class="spacer" />
        {run && running && <CancelButton runId={runId} onDone={refresh} />}
      </div>
      <div class="facts">
        {root && (
          <span>
            Root <b class="mono">{root.nodeTypeId}</b>@{root.version}
          </span>
        )}
        {run?.started_at && (
          <span title={run.started_at}>
            Created <b>{formatTime(run.started_at)}</b>
          </span>
        )}
        {run && (
          <span data-testid="run-duration">
            Duration <b>{formatDuration(elapsed(run.started_at, run.ended_at, now))}</b>
          </span>
        )}
        {run?.run_context?.tenant_id && (
          <span>
            Tenant <b class="mono">{run.run_context.tenant_id}</b>
          </span>
        )}
        {run?.run_context?.trace?.trace_id && <TraceFact traceId={run.run_context.trace.trace_id} />}
        <span data-testid="run-counts">
          <b>{formatCount(model.nodes.size)}</b> NodeRuns
          {(["running", "queued", "completed", "failed", "canceled"] as const)
            .filter((s) => counts[s] > 0)
            .map((s) => ` · ${formatCount(counts[s])} ${s}`)
            .join("")}
        </span>
        {firstFailed && (
          <button type="button" class="link" data-testid="jump-failed" onClick={() => select(firstFailed.id)}>
            Show the first failure
          </button>
        )}
        {failure && <span class="error-text">{failure instanceof ApiError ? `${failure.code}: ${failure.message}` : failure.message}</span>}
      </div>
      {runError && run && isTerminal(run.state) && (
        <div>
          <h2>Why the run {run.state}</h2>
          <ErrorView error={runError} testid="run-error" />
        </div>
      )}
      {outputs !== undefined && run?.state === "completed" && (
        <details>
          <summary>Outputs</summary>
          <JsonView value={outputs} testid="run-outputs" />
        </details>
      )}
      {rootStreamed && run && !isTerminal(run.state) && <StreamedText streamed={rootStreamed} writing testid="run-streamed-text" />}
      <h2>NodeRuns</h2>
      {!run && <p class="muted">Loading…</p>}
      <div class={`run-body${selected ? " with-panel" : ""}`}>
        <NodeTree model={model} rows={rows} now={now} selectedId={selectedId} scrollToIndex={scrollTo} onSelect={(id) => select(id)} onToggle={toggle} />
        {selected && <NodePanel key={selected.id} node={selected} runEvents={selected.id === model.rootId ? model.runEvents : undefined} onClose={() => select(undefined)} onSelect={(id) => select(id)} />}
      </div>
    </section>
  );
}
