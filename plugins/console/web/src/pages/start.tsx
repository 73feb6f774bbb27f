/** #/start: start a run from a node type. A placeholder until the start page lands. */
import type { Route } from "../router";
export function StartPage(_props: { route: Route }) {
  return (
    <section class="page">
      <h1>Start a run</h1>
      <p class="muted">This page is being built.</p>
    </section>
  );
}
