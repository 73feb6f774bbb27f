/**
 * A form generated from a JSON Schema (a node type's `input_schema`): objects as groups, arrays with add and remove,
 * enums as selects, formats as the matching inputs, numbers with their bounds, booleans as checkboxes. Whatever it
 * cannot render as inputs it offers as JSON to type, field by field, so every schema can be filled in.
 */
import { createContext } from "preact";
import { useContext, useEffect, useRef, useState } from "preact/hooks";
import { isoToLocalInput, localInputToIso } from "../format";
import type { FieldErrors } from "../schema-validation";
import { initialValue, kindOf, pointerSegment, resolve, stringInputType, withChild, type JsonSchema } from "../schema-model";
import "./schema-form.css";

interface FormContext {
  root: JsonSchema;
  errors: FieldErrors;
  /** A JSON field whose text does not parse says so here (undefined clears it), so the page can hold the submit. */
  setJsonProblem(pointer: string, problem: string | undefined): void;
}

const Ctx = createContext<FormContext>({ root: {}, errors: new Map(), setJsonProblem: () => undefined });

export interface SchemaFormProps {
  schema: JsonSchema;
  value: unknown;
  onChange(value: unknown): void;
  errors: FieldErrors;
  setJsonProblem(pointer: string, problem: string | undefined): void;
}

export function SchemaForm(props: SchemaFormProps) {
  return (
    <Ctx.Provider value={{ root: props.schema, errors: props.errors, setJsonProblem: props.setJsonProblem }}>
      <div class="schema-form">
        <Field schema={props.schema} value={props.value} onChange={props.onChange} pointer="" label="" required />
      </div>
    </Ctx.Provider>
  );
}

interface FieldProps {
  schema: unknown;
  value: unknown;
  onChange(value: unknown): void;
  pointer: string;
  label: string;
  required: boolean;
}

/** A DOM id for a pointer: ids must not be empty, and pointers may hold any character. */
function domId(pointer: string): string {
  return `f${Array.from(pointer, (c) => (/[A-Za-z0-9_-]/.test(c) ? c : `.${c.charCodeAt(0).toString(16)}.`)).join("")}`;
}

function Errors({ pointer }: { pointer: string }) {
  const messages = useContext(Ctx).errors.get(pointer);
  if (!messages || messages.length === 0) return null;
  return (
    <ul class="field-errors" data-testid="field-error" data-pointer={pointer} id={`${domId(pointer)}-errors`}>
      {messages.map((m) => (
        <li key={m}>{m}</li>
      ))}
    </ul>
  );
}

function Label({ s, pointer, label, required }: { s: JsonSchema; pointer: string; label: string; required: boolean }) {
  const title = typeof s.title === "string" ? s.title : label;
  if (title === "") return null;
  return (
    <label for={domId(pointer)} class="field-label">
      {title}
      {required && (
        <span class="required" title="required">
          {" "}
          *
        </span>
      )}
      {typeof s.title === "string" && label !== "" && <code class="field-key">{label}</code>}
    </label>
  );
}

function Help({ s }: { s: JsonSchema }) {
  return typeof s.description === "string" && s.description !== "" ? <p class="field-help">{s.description}</p> : null;
}

function Field(props: FieldProps) {
  const { root } = useContext(Ctx);
  const s = resolve(props.schema, root);
  const kind = kindOf(s);
  const common = { ...props, s };
  return (
    <div class={`field field-${kind}`} data-field={props.pointer}>
      {kind === "object" ? (
        <ObjectField {...common} />
      ) : kind === "array" ? (
        <ArrayField {...common} />
      ) : (
        <>
          <Label s={s} pointer={props.pointer} label={props.label} required={props.required} />
          {kind === "enum" ? (
            <EnumInput {...common} />
          ) : kind === "boolean" ? (
            <BooleanInput {...common} />
          ) : kind === "number" || kind === "integer" ? (
            <NumberInput {...common} integer={kind === "integer"} />
          ) : kind === "string" ? (
            <StringInput {...common} />
          ) : (
            <JsonInput {...common} />
          )}
          <Help s={s} />
        </>
      )}
      <Errors pointer={props.pointer} />
    </div>
  );
}

type InputProps = FieldProps & { s: JsonSchema };

function ObjectField({ s, value, onChange, pointer, label, required }: InputProps) {
  const { root } = useContext(Ctx);
  const props = s.properties as Record<string, unknown>;
  const requiredNames = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
  const obj = value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  const title = typeof s.title === "string" ? s.title : label;
  // Required fields first: the registry stores schemas with their keys sorted, so the author's order is gone anyway.
  const names = Object.keys(props).sort((a, b) => Number(requiredNames.has(b)) - Number(requiredNames.has(a)));
  const body = names
    .map((name) => [name, props[name]] as const)
    .map(([name, sub]) => (
      <Field
        key={name}
        schema={sub}
        value={obj?.[name]}
        onChange={(child) => {
          const next = withChild(obj ?? {}, name, child);
          // An optional object left empty is left out, rather than sent as {}.
          onChange(!required && pointer !== "" && Object.keys(next as object).length === 0 ? undefined : next);
        }}
        pointer={`${pointer}/${pointerSegment(name)}`}
        label={name}
        required={requiredNames.has(name)}
      />
    ));
  if (pointer === "") {
    return (
      <>
        <Help s={s} />
        {body.length > 0 ? body : <p class="field-help">This node type takes no inputs.</p>}
      </>
    );
  }
  return (
    <fieldset class="field-group">
      <legend>
        {title}
        {required && <span class="required"> *</span>}
        {!required && obj === undefined && (
          <button type="button" class="link" onClick={() => onChange(initialValue(s, root) ?? {})}>
            add
          </button>
        )}
      </legend>
      <Help s={s} />
      {body}
    </fieldset>
  );
}

function ArrayField({ s, value, onChange, pointer, label, required }: InputProps) {
  const { root } = useContext(Ctx);
  const items = Array.isArray(value) ? value : [];
  const itemSchema = resolve(s.items, root);
  const max = typeof s.maxItems === "number" ? s.maxItems : Infinity;
  const min = typeof s.minItems === "number" ? s.minItems : 0;
  const title = typeof s.title === "string" ? s.title : label;
  return (
    <fieldset class="field-group field-array">
      <legend>
        {title}
        {required && <span class="required"> *</span>}
        <span class="muted"> ({items.length})</span>
      </legend>
      <Help s={s} />
      <ol class="array-items">
        {items.map((item, i) => (
          <li key={i} class="array-item">
            <Field
              schema={itemSchema}
              value={item}
              onChange={(child) => onChange(withChild(items, i, child))}
              pointer={`${pointer}/${i}`}
              label={`#${i + 1}`}
              required
            />
            <button
              type="button"

              class="secondary"
              data-testid="array-remove"
              disabled={items.length <= min}
              onClick={() => {
                const next = items.filter((_, j) => j !== i);
                onChange(next.length === 0 && !required ? undefined : next);
              }}
            >
              Remove
            </button>
          </li>
        ))}
      </ol>
      <button
        type="button"
        class="secondary"
        data-testid="array-add"
        disabled={items.length >= max}
        onClick={() => onChange([...items, initialValue(itemSchema, root, 1) ?? emptyOf(itemSchema)])}
      >
        Add {typeof itemSchema.title === "string" ? itemSchema.title : "item"}
      </button>
    </fieldset>
  );
}

/** A new array item's value when its schema gives no default. */
function emptyOf(s: JsonSchema): unknown {
  switch (kindOf(s)) {
    case "object":
      return {};
    case "array":
      return [];
    case "string":
      return "";
    case "boolean":
      return false;
    case "enum":
      return (s.enum as unknown[])[0];
    default:
      return null;
  }
}

function describedBy(pointer: string): string {
  return `${domId(pointer)}-errors`;
}

function EnumInput({ s, value, onChange, pointer, required }: InputProps) {
  const options = s.enum as unknown[];
  const selected = options.findIndex((o) => JSON.stringify(o) === JSON.stringify(value));
  return (
    <select
      id={domId(pointer)}
      name={pointer}
      aria-describedby={describedBy(pointer)}
      value={selected < 0 ? "" : String(selected)}
      onChange={(e) => {
        const v = (e.currentTarget as HTMLSelectElement).value;
        onChange(v === "" ? undefined : options[Number(v)]);
      }}
    >
      {(!required || selected < 0) && <option value="">{required ? "choose…" : "(none)"}</option>}
      {options.map((o, i) => (
        <option key={i} value={String(i)}>
          {typeof o === "string" ? o : JSON.stringify(o)}
        </option>
      ))}
    </select>
  );
}

function BooleanInput({ value, onChange, pointer }: InputProps) {
  return (
    <input
      type="checkbox"
      id={domId(pointer)}
      name={pointer}
      aria-describedby={describedBy(pointer)}
      checked={value === true}
      onChange={(e) => onChange((e.currentTarget as HTMLInputElement).checked)}
    />
  );
}

function NumberInput({ s, value, onChange, pointer, integer }: InputProps & { integer: boolean }) {
  // The text is kept as typed ("1." on the way to "1.5"); the value is the number it reads as.
  const [text, setText] = useState(typeof value === "number" ? String(value) : "");
  useEffect(() => {
    if (typeof value === "number" && Number(text) !== value) setText(String(value));
    if (value === undefined && text !== "" && Number.isFinite(Number(text))) setText("");
  }, [value]);
  const bound = (k: string) => (typeof s[k] === "number" ? (s[k] as number) : undefined);
  return (
    <input
      type="number"
      id={domId(pointer)}
      name={pointer}
      aria-describedby={describedBy(pointer)}
      value={text}
      min={bound("minimum")}
      max={bound("maximum")}
      step={typeof s.multipleOf === "number" ? s.multipleOf : integer ? 1 : "any"}
      onInput={(e) => {
        const t = (e.currentTarget as HTMLInputElement).value;
        setText(t);
        // Text that is no number is passed on as it is, so the schema check says so rather than sending null.
        onChange(t.trim() === "" ? undefined : Number.isFinite(Number(t)) ? Number(t) : t);
      }}
    />
  );
}

function StringInput({ s, value, onChange, pointer, required }: InputProps) {
  const type = stringInputType(s);
  const placeholder = typeof s.examples === "object" && Array.isArray(s.examples) && typeof s.examples[0] === "string" ? s.examples[0] : undefined;
  const common = {
    id: domId(pointer),
    name: pointer,
    "aria-describedby": describedBy(pointer),
    placeholder,
  };
  if (type === "datetime-local") {
    return (
      <span class="datetime">
        <input
          type="datetime-local"
          {...common}
          value={isoToLocalInput(typeof value === "string" ? value : undefined)}
          onInput={(e) => {
            const v = (e.currentTarget as HTMLInputElement).value;
            // The schema wants an RFC 3339 instant: the local time typed, in UTC.
            onChange(localInputToIso(v));
          }}
        />
        <span class="muted"> your time zone; sent as UTC</span>
      </span>
    );
  }
  const text = typeof value === "string" ? value : "";
  const onInput = (e: Event) => {
    const v = (e.currentTarget as HTMLInputElement | HTMLTextAreaElement).value;
    // An optional string left empty is left out; a required one is sent as typed, "" included.
    onChange(v === "" && !required ? undefined : v);
  };
  return <input type={type} {...common} value={text} onInput={onInput} />;
}

function JsonInput({ value, onChange, pointer }: InputProps) {
  const { setJsonProblem } = useContext(Ctx);
  const show = (v: unknown) => (v === undefined ? "" : JSON.stringify(v, null, 2));
  const [text, setText] = useState(show(value));
  const [problem, setProblem] = useState<string | undefined>();
  // The value last sent up: a value that differs came from elsewhere (the raw JSON view), so the text follows it.
  const sent = useRef<unknown>(value);
  useEffect(() => {
    if (value !== sent.current) {
      sent.current = value;
      setText(show(value));
      setProblem(undefined);
      setJsonProblem(pointer, undefined);
    }
  }, [value]);
  useEffect(() => () => setJsonProblem(pointer, undefined), []);
  return (
    <>
      <textarea
        class="json-input"
        id={domId(pointer)}
        name={pointer}
        data-testid="json-field"
        aria-describedby={describedBy(pointer)}
        rows={Math.min(12, Math.max(3, text.split("\n").length))}
        spellcheck={false}
        value={text}
        onInput={(e) => {
          const t = (e.currentTarget as HTMLTextAreaElement).value;
          setText(t);
          let next: unknown;
          let why: string | undefined;
          if (t.trim() !== "") {
            try {
              next = JSON.parse(t);
            } catch (err) {
              why = `not JSON: ${(err as Error).message}`;
            }
          }
          setProblem(why);
          setJsonProblem(pointer, why);
          if (why === undefined) {
            sent.current = next;
            onChange(next);
          }
        }}
      />
      <p class="field-help">JSON{problem ? "" : " (this field is typed as JSON: the form has no input for its schema)"}</p>
      {problem && (
        <p class="field-errors" data-testid="json-field-error">
          {problem}
        </p>
      )}
    </>
  );
}
