/** A JSON value, pretty printed; a very large one shows its start until asked for all of it. */
import { useState } from "preact/hooks";

const SHOWN = 100_000;

export function JsonView(props: { value: unknown; testid?: string; empty?: string }) {
  if (props.value === undefined) return <p class="muted">{props.empty ?? "none"}</p>;
  const text = JSON.stringify(props.value, null, 2) ?? String(props.value);
  return <LongText text={text} limit={SHOWN} testid={props.testid} />;
}

/** Preformatted text; past `limit` characters it shows the start until asked for all of it. */
export function LongText(props: { text: string; limit: number; testid?: string }) {
  const [all, setAll] = useState(false);
  const { text } = props;
  const cut = !all && text.length > props.limit;
  return (
    <div>
      <pre class="json" data-testid={props.testid}>
        {cut ? `${text.slice(0, props.limit)}\n…` : text}
      </pre>
      {cut && (
        <button type="button" class="link" onClick={() => setAll(true)}>
          Show all {text.length.toLocaleString("en-US")} characters
        </button>
      )}
    </div>
  );
}
