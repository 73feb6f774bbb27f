/** #/node-types/<id>: one node type. A placeholder until the node type page lands. */
import type { Route } from "../router";
export function NodeTypePage(props: { route: Route }) {
  const nodeTypeId = props.route.path[1] ?? "";
  return (
    <section class="page">
      <h1>{nodeTypeId}</h1>
      <p class="muted">This page is being built.</p>
    </section>
  );
}
