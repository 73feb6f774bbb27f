/** A run's, NodeRun's or approval's state as a coloured badge. */
export function StateBadge(props: { state: string; testid?: string }) {
  return (
    <span class={`badge ${props.state}`} data-testid={props.testid} data-state={props.state}>
      {props.state}
    </span>
  );
}
