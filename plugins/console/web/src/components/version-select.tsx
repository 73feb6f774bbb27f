/** A select of a node type's versions; `onPick` gets the version chosen. */
export function VersionSelect(props: { testid: string; value: string; versions: string[]; disabled?: boolean; onPick(version: string): void }) {
  return (
    <select data-testid={props.testid} value={props.value} disabled={props.disabled} onChange={(e) => props.onPick((e.currentTarget as HTMLSelectElement).value)}>
      {props.versions.map((v) => (
        <option key={v} value={v}>
          {v}
        </option>
      ))}
    </select>
  );
}
