/** #/node-types: the catalogue. A placeholder until the node types page lands. */
import type { Route } from "../router";
export function NodeTypesPage(_props: { route: Route }) {
  return (
    <section class="page">
      <h1>Node types</h1>
      <p class="muted">This page is being built.</p>
    </section>
  );
}
