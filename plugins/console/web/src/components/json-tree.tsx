/**
 * JSON shown as a tree whose objects and arrays fold (native <details>, so no state to keep), the upper levels open.
 */
import "./json-tree.css";

const OPEN_LEVELS = 3;
/** Children shown per object or array; a schema of thousands of properties still draws at once. */
const SHOWN_CHILDREN = 500;

function Scalar({ value }: { value: unknown }) {
  const cls = value === null ? "jt-null" : `jt-${typeof value}`;
  return <span class={cls}>{JSON.stringify(value)}</span>;
}

function Node({ name, value, depth }: { name?: string; value: unknown; depth: number }) {
  const key = name !== undefined ? <span class="jt-key">{JSON.stringify(name)}: </span> : null;
  if (value === null || typeof value !== "object") {
    return (
      <div class="jt-row">
        {key}
        <Scalar value={value} />
      </div>
    );
  }
  const entries: Array<[string | undefined, unknown]> = Array.isArray(value) ? value.map((v) => [undefined, v]) : Object.entries(value);
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) {
    return (
      <div class="jt-row">
        {key}
        {open}
        {close}
      </div>
    );
  }
  return (
    <details class="jt-node" open={depth < OPEN_LEVELS}>
      <summary>
        {key}
        {open}
        <span class="jt-count">
          {" "}
          {entries.length} {Array.isArray(value) ? (entries.length === 1 ? "item" : "items") : entries.length === 1 ? "key" : "keys"}{" "}
        </span>
        <span class="jt-closed">{close}</span>
      </summary>
      <div class="jt-children">
        {entries.slice(0, SHOWN_CHILDREN).map(([k, v], i) => (
          <Node key={k ?? i} name={k} value={v} depth={depth + 1} />
        ))}
        {entries.length > SHOWN_CHILDREN && <div class="jt-row muted">… {entries.length - SHOWN_CHILDREN} more</div>}
      </div>
      <div class="jt-row">{close}</div>
    </details>
  );
}

export function JsonTree({ value, testid }: { value: unknown; testid?: string }) {
  return (
    <div class="json-tree" data-testid={testid}>
      <Node value={value} depth={0} />
    </div>
  );
}
