/** #/approvals: everything waiting for a person. A placeholder until the approvals page lands. */
import type { Route } from "../router";
export function ApprovalsPage(_props: { route: Route }) {
  return (
    <section class="page">
      <h1>Approvals</h1>
      <p class="muted">This page is being built.</p>
    </section>
  );
}
