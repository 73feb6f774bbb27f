/**
 * #/node-types: the registry's catalogue, searched in the page over id, title, description and labels. The list may
 * hold thousands: the search waits for a pause in typing, and only the first matches are drawn until asked for more.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import type { NodeType } from "../api";
import type { Route } from "../router";
import { useCatalogue, type NodeTypeGroup } from "../components/use-node-types";
import type { Served } from "../serving";
import "./node-types.css";

const SHOWN_AT_FIRST = 100;
const TYPING_PAUSE_MS = 150;

export function ServedBadge({ served }: { served: Served }) {
  if (served === undefined)
    return (
      <span class="badge unknown" data-testid="node-type-served" title="the executor directory could not be read">
        served: ?
      </span>
    );
  const n = served.executors.length;
  return n > 0 ? (
    <span class="badge ok" data-testid="node-type-served" title={served.executors.map((e) => `${e.executor_instance_id} (${e.endpoint})`).join("\n")}>
      served
    </span>
  ) : (
    <span class="badge warn" data-testid="node-type-served" title="no executor in the directory serves this version">
      no executor
    </span>
  );
}

export function nodeTypeHref(id: string, version?: string): string {
  return `#/node-types/${encodeURIComponent(id)}${version ? `?version=${encodeURIComponent(version)}` : ""}`;
}

export function NodeTypesPage({ route }: { route: Route }) {
  const query = route.query;
  const { catalogue, error } = useCatalogue();
  const [text, setText] = useState(query.get("q") ?? "");
  const [search, setSearch] = useState(text);
  const [kind, setKind] = useState("");
  const [shown, setShown] = useState(SHOWN_AT_FIRST);

  useEffect(() => {
    const t = setTimeout(() => {
      setSearch(text);
      setShown(SHOWN_AT_FIRST);
    }, TYPING_PAUSE_MS);
    return () => clearTimeout(t);
  }, [text]);

  const matches = useMemo(() => {
    if (!catalogue) return [];
    const terms = search.toLowerCase().split(/\s+/).filter(Boolean);
    return catalogue.groups.filter((g) => (kind === "" || g.versions.some((v) => v.kind === kind)) && terms.every((t) => g.haystack.includes(t)));
  }, [catalogue, search, kind]);

  return (
    <section class="page node-types-page">
      <header class="page-header">
        <h1>Node types</h1>
        <div class="filters">
          <input
            type="search"
            data-testid="node-types-search"
            placeholder="Search id, title, description, labels"
            aria-label="Search node types"
            value={text}
            onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)}
          />
          <select data-testid="node-types-kind" aria-label="Kind" value={kind} onChange={(e) => setKind((e.currentTarget as HTMLSelectElement).value)}>
            <option value="">any kind</option>
            <option value="atomic">atomic</option>
            <option value="composite">composite</option>
          </select>
          {catalogue && (
            <span class="muted" data-testid="node-types-count">
              {matches.length === catalogue.groups.length ? `${matches.length} node types` : `${matches.length} of ${catalogue.groups.length}`}
            </span>
          )}
        </div>
      </header>
      {error !== undefined && (
        <p class="error-box" role="alert">
          The registry could not be read: {String((error as Error).message ?? error)}
        </p>
      )}
      {catalogue && catalogue.executors === undefined && (
        <p class="notice">The executor directory could not be read, so whether each node type is served is unknown.</p>
      )}
      {!catalogue && error === undefined && <p class="muted">Loading…</p>}
      {catalogue && (
        <table class="table node-types-table" data-testid="node-types-table">
          <thead>
            <tr>
              <th>Node type</th>
              <th>Kind</th>
              <th>Versions</th>
              <th>Executor</th>
            </tr>
          </thead>
          <tbody>
            {matches.slice(0, shown).map((g) => (
              <Row key={g.id} g={g} served={catalogue.served} />
            ))}
          </tbody>
        </table>
      )}
      {matches.length > shown && (
        <button type="button" class="secondary" data-testid="node-types-more" onClick={() => setShown((n) => n + SHOWN_AT_FIRST * 5)}>
          Show more ({matches.length - shown} left)
        </button>
      )}
    </section>
  );
}

function Row({ g, served }: { g: NodeTypeGroup; served(nt: NodeType): Served }) {
  const kinds = [...new Set(g.versions.map((v) => v.kind))];
  return (
    <tr data-testid="node-type-row" data-node-type-id={g.id}>
      <td>
        <a href={nodeTypeHref(g.id)} class="mono">
          {g.id}
        </a>
        {g.latest.description && <div class="muted description">{g.latest.description}</div>}
      </td>
      <td>{kinds.join(", ")}</td>
      <td class="versions">
        {g.versions.map((v) => (
          <a key={v.version} href={nodeTypeHref(g.id, v.version)} class="version mono">
            {v.version}
          </a>
        ))}
      </td>
      <td>
        <ServedBadge served={served(g.latest)} />
      </td>
    </tr>
  );
}
