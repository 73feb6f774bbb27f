/**
 * #/runs: the runs, newest first, one keyset page at a time (never all of them), filtered by state, root node type,
 * tenant and creation time. The filters and the page live in the hash, so a reload or a shared link shows the same.
 *
 * It refreshes by polling the page on view every 2 s while the tab is visible, rather than by a stream: the API's
 * streams are per run, and following every run on a page would take a connection each, while a keyset page asked
 * again returns the same slice with fresh states (rows are keyed by run id, so the DOM and the scroll stay put).
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, getNodeRun, listRuns, type Run } from "../api";
import { getToken, tokenTenant } from "../auth";
import { useConfig } from "../config-context";
import { StateBadge } from "../components/state-badge";
import { elapsed, formatDuration, formatTime, isoToLocalInput, localInputToIso } from "../format";
import { href, navigate, type Route } from "../router";
import type { ConsoleConfig } from "../api";

const PAGE_SIZE = 50;
const POLL_MS = 2000;
const RUN_STATES = ["queued", "running", "completed", "failed", "canceled"] as const;
const FILTERS = ["state", "node_type_id", "tenant_id", "created_after", "created_before"] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** Page tokens of the pages before the current one, per filter set: "Newer" walks back through them. */
const previousPages = new Map<string, Array<string | undefined>>();

/** Root node types already looked up, by run id: a run's root never changes. */
const rootTypes = new Map<string, string>();

/** Whether the caller may filter by tenant: a token confined to a tenant sees only that tenant anyway. */
function mayFilterTenant(config: ConsoleConfig): boolean {
  const token = getToken();
  if (!token) return !config.auth.required;
  return tokenTenant(token) === undefined;
}

function filtersOf(route: Route): Filters {
  const f: Filters = {};
  for (const k of FILTERS) {
    const v = route.query.get(k);
    if (v) f[k] = v;
  }
  return f;
}

/** The root node type a Run names (an extension of newer coordinators), else one looked up earlier. */
function rootTypeOf(run: Run): string | undefined {
  const ext = run.extensions?.["nodefabric.root_node_type_ref"] as { node_type_id?: string; version?: string } | undefined;
  if (ext?.node_type_id) return `${ext.node_type_id}@${ext.version ?? "?"}`;
  return rootTypes.get(run.run_id);
}

/** Looks up the root node types of the runs shown that do not carry theirs, a few at a time. */
async function fillRootTypes(runs: Run[], done: () => void): Promise<void> {
  const missing = runs.filter((r) => rootTypeOf(r) === undefined);
  let i = 0;
  const worker = async () => {
    while (i < missing.length) {
      const run = missing[i++]!;
      try {
        const nr = await getNodeRun(run.root_node_run_id);
        rootTypes.set(run.run_id, `${nr.node_type_ref.node_type_id}@${nr.node_type_ref.version}`);
      } catch {
        rootTypes.set(run.run_id, "?");
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(6, missing.length) }, worker));
  if (missing.length > 0) done();
}

export function RunsPage(props: { route: Route }) {
  const config = useConfig();
  const filters = filtersOf(props.route);
  const pageToken = props.route.query.get("page_token") ?? undefined;
  const filterKey = JSON.stringify(filters);
  const [runs, setRuns] = useState<Run[] | undefined>();
  const [next, setNext] = useState<string | undefined>();
  const [error, setError] = useState<ApiError | Error | undefined>();
  const [, setTick] = useState(0);
  const showTenant = mayFilterTenant(config);

  // Reloads the page on view now and every POLL_MS while visible; a reload in flight is not doubled.
  const inFlight = useRef(false);
  useEffect(() => {
    let stopped = false;
    const load = async () => {
      if (inFlight.current) return;
      inFlight.current = true;
      try {
        const res = await listRuns({ ...filters, limit: PAGE_SIZE, page_token: pageToken });
        if (stopped) return;
        setRuns(res.runs);
        setNext(res.nextPageToken);
        setError(undefined);
        void fillRootTypes(res.runs, () => !stopped && setTick((t) => t + 1));
      } catch (err) {
        if (!stopped) setError(err as Error);
      } finally {
        inFlight.current = false;
      }
    };
    setRuns(undefined);
    void load();
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") void load();
    }, POLL_MS);
    const onVisible = () => {
      if (document.visibilityState === "visible") void load();
    };
    document.addEventListener("visibilitychange", onVisible);
    return () => {
      stopped = true;
      clearInterval(timer);
      document.removeEventListener("visibilitychange", onVisible);
    };
  }, [filterKey, pageToken]);

  const go = (f: Filters, token?: string) => navigate(["runs"], { ...f, page_token: token }, true);
  const stack = previousPages.get(filterKey) ?? [];
  const older = () => {
    if (!next) return;
    previousPages.set(filterKey, [...stack, pageToken]);
    navigate(["runs"], { ...filters, page_token: next });
  };
  const newer = () => {
    const prev = stack.slice(0, -1);
    previousPages.set(filterKey, prev);
    navigate(["runs"], { ...filters, page_token: stack.length > 0 ? stack[stack.length - 1] : undefined });
  };

  return (
    <section class="page">
      <div class="row-flex">
        <h1>Runs</h1>
        <span class="spacer" />
        <span class="muted" data-testid="runs-live" title="This list is asked again every 2 seconds while the tab is visible">
          live
        </span>
      </div>
      <FilterBar filters={filters} showTenant={showTenant} onApply={(f) => go(f)} />
      {error && (
        <p class="error-box" data-testid="runs-error">
          {error instanceof ApiError ? `${error.code}: ${error.message}` : error.message}
        </p>
      )}
      <table data-testid="runs-table">
        <thead>
          <tr>
            <th>Run</th>
            <th>Root node type</th>
            <th>State</th>
            <th>Created</th>
            <th class="num">Duration</th>
            {showTenant && <th>Tenant</th>}
          </tr>
        </thead>
        <tbody>
          {runs?.map((run) => (
            <tr
              key={run.run_id}
              class="clickable"
              data-testid="run-row"
              data-run-id={run.run_id}
              data-state={run.state}
              onClick={(e) => {
                // The whole row opens the run; the id is a real link too (new tab, copy).
                if (!(e.target as HTMLElement).closest("a")) navigate(["runs", run.run_id]);
              }}
            >
              <td class="mono">
                <a href={href(["runs", run.run_id])} data-testid="run-link">
                  {run.run_id}
                </a>
              </td>
              <td class="mono" data-testid="run-node-type">
                {rootTypeOf(run) ?? <span class="muted">…</span>}
              </td>
              <td>
                <StateBadge state={run.state} testid="run-state" />
              </td>
              <td title={run.started_at}>{formatTime(run.started_at)}</td>
              <td class="num">{formatDuration(elapsed(run.started_at, run.ended_at))}</td>
              {showTenant && <td class="mono">{run.run_context?.tenant_id ?? ""}</td>}
            </tr>
          ))}
        </tbody>
      </table>
      {runs === undefined && !error && <p class="muted">Loading…</p>}
      {runs?.length === 0 && (
        <p class="muted" data-testid="runs-empty">
          {Object.keys(filters).length > 0 ? "No run matches these filters." : "No runs yet."} <a href={href(["start"])}>Start a run</a>.
        </p>
      )}
      <div class="pager">
        <button type="button" class="secondary" data-testid="page-newer" disabled={pageToken === undefined} onClick={newer}>
          ← Newer
        </button>
        <button type="button" class="secondary" data-testid="page-older" disabled={!next} onClick={older}>
          Older →
        </button>
        {pageToken !== undefined && (
          <a href={href(["runs"], filters)} data-testid="page-newest">
            Newest
          </a>
        )}
      </div>
    </section>
  );
}

function FilterBar(props: { filters: Filters; showTenant: boolean; onApply: (f: Filters) => void }) {
  const f = props.filters;
  const [nodeType, setNodeType] = useState(f.node_type_id ?? "");
  const [tenant, setTenant] = useState(f.tenant_id ?? "");
  const [after, setAfter] = useState(isoToLocalInput(f.created_after));
  const [before, setBefore] = useState(isoToLocalInput(f.created_before));
  const apply = (state = f.state) =>
    props.onApply({
      state,
      node_type_id: nodeType.trim() || undefined,
      tenant_id: props.showTenant ? tenant.trim() || undefined : undefined,
      created_after: localInputToIso(after),
      created_before: localInputToIso(before),
    });
  const value = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value);
  return (
    <form
      class="filters"
      onSubmit={(e) => {
        e.preventDefault();
        apply();
      }}
    >
      <label>
        State
        <select data-testid="filter-state" value={f.state ?? ""} onChange={(e) => apply((e.target as HTMLSelectElement).value || undefined)}>
          <option value="">any</option>
          {RUN_STATES.map((s) => (
            <option value={s}>{s}</option>
          ))}
        </select>
      </label>
      <label>
        Root node type
        <input data-testid="filter-node-type" placeholder="node_type_id" value={nodeType} onInput={value(setNodeType)} />
      </label>
      {props.showTenant && (
        <label>
          Tenant
          <input data-testid="filter-tenant" placeholder="tenant_id" value={tenant} onInput={value(setTenant)} />
        </label>
      )}
      <label>
        Created after
        <input type="datetime-local" data-testid="filter-created-after" value={after} onInput={value(setAfter)} />
      </label>
      <label>
        Created before
        <input type="datetime-local" data-testid="filter-created-before" value={before} onInput={value(setBefore)} />
      </label>
      <button type="submit" data-testid="filter-apply">
        Apply
      </button>
      <button
        type="button"
        class="secondary"
        data-testid="filter-clear"
        onClick={() => {
          setNodeType("");
          setTenant("");
          setAfter("");
          setBefore("");
          props.onApply({});
        }}
      >
        Clear
      </button>
    </form>
  );
}
