/**
 * #/node-types/<id>?version=<v>: one node type: its versions, schemas, constraints, who serves it, a way to start a
 * run of it, and for a declarative composite its plan as a graph.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { ApiError, getNodeType, listNodeTypeVersions, type NodeType } from "../api";
import type { Route } from "../router";
import { JsonTree } from "../components/json-tree";
import { PlanGraph } from "../components/plan-graph";
import { useCatalogue } from "../components/use-node-types";
import { layoutPlan, planOf } from "../plan-layout";
import { nodeTypeHref, ServedBadge } from "./node-types";
import "./node-types.css";
import { VersionSelect } from "../components/version-select";

export function NodeTypePage({ route }: { route: Route }) {
  const id = route.path[1] ?? "";
  const query = route.query;
  const version = query.get("version") ?? undefined;
  const [nt, setNt] = useState<NodeType | undefined>();
  const [versions, setVersions] = useState<string[]>([]);
  const [error, setError] = useState<string | undefined>();
  const { catalogue } = useCatalogue();

  useEffect(() => {
    let live = true;
    setError(undefined);
    Promise.all([getNodeType(id, version), listNodeTypeVersions(id)]).then(
      ([t, vs]) => {
        if (!live) return;
        setNt(t);
        setVersions(vs);
      },
      (err: unknown) => {
        if (!live) return;
        setNt(undefined);
        setError(
          err instanceof ApiError && err.status === 404
            ? `Not found: no node type ${id}${version ? ` at version ${version}` : ""} in the registry.`
            : String((err as Error).message ?? err),
        );
      },
    );
    return () => {
      live = false;
    };
  }, [id, version]);

  const plan = nt ? planOf(nt) : undefined;
  const graph = useMemo(() => (plan ? layoutPlan(plan) : undefined), [nt]);

  if (error) {
    return (
      <section class="page node-type-page">
        <p class="error-box" role="alert" data-testid="node-type-error">
          {error}
        </p>
        <a href="#/node-types">All node types</a>
      </section>
    );
  }
  if (!nt) return <p class="muted">Loading…</p>;
  const served = catalogue?.served(nt);
  const labels = Object.entries(nt.metadata?.labels ?? {});
  return (
    <section class="page node-type-page" data-testid="node-type-detail">
      <nav class="crumbs">
        <a href="#/node-types">Node types</a> /
      </nav>
      <header class="page-header">
        <h1 class="mono">{nt.node_type_id}</h1>
        <div class="node-type-facts">
          <label>
            Version{" "}
            <VersionSelect testid="node-type-version" value={nt.version} versions={versions} onPick={(v) => (location.hash = nodeTypeHref(nt.node_type_id, v))} />
          </label>
          <span class="badge" data-testid="node-type-kind">
            {nt.kind}
          </span>
          {catalogue && <ServedBadge served={served} />}
          <a class="button" data-testid="start-run-link" href={`#/start?type=${encodeURIComponent(nt.node_type_id)}&version=${encodeURIComponent(nt.version)}`}>
            Start a run
          </a>
        </div>
        {nt.description && <p>{nt.description}</p>}
        {labels.length > 0 && (
          <p class="labels">
            {labels.map(([k, v]) => (
              <span key={k} class="badge label">
                {k}={v}
              </span>
            ))}
          </p>
        )}
      </header>

      {graph && (
        <section>
          <h2>Plan</h2>
          <p class="muted">
            Each box is a step and the node type it calls; an arrow leads from a step to the steps that wait for it. Stacked boxes fan out (for_each).
          </p>
          <PlanGraph
            graph={graph}
            nodeTypeHref={(ref) => (ref.includes("@") ? nodeTypeHref(ref.slice(0, ref.lastIndexOf("@")), ref.slice(ref.lastIndexOf("@") + 1)) : undefined)}
          />
        </section>
      )}

      <section>
        <h2>Input schema</h2>
        {nt.input_schema ? <JsonTree value={nt.input_schema} testid="node-type-input-schema" /> : <p class="muted">None: any object is accepted.</p>}
      </section>
      <section>
        <h2>Output schema</h2>
        {nt.output_schema ? <JsonTree value={nt.output_schema} testid="node-type-output-schema" /> : <p class="muted">None: any object is accepted.</p>}
      </section>
      {nt.constraints && (
        <section>
          <h2>Constraints</h2>
          <JsonTree value={nt.constraints} />
        </section>
      )}
      {served && served.executors.length > 0 && (
        <section>
          <h2>Served by</h2>
          <ul class="executors" data-testid="node-type-executors">
            {served.executors.map((e) => (
              <li key={e.executor_instance_id}>
                <code>{e.executor_instance_id}</code> ({e.kind}) at <code>{e.endpoint}</code>
              </li>
            ))}
          </ul>
        </section>
      )}
      <details class="raw">
        <summary>The whole node type as JSON</summary>
        <JsonTree value={nt} />
      </details>
    </section>
  );
}
