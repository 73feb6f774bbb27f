/**
 * #/start (?type=<id>&version=<v>; ?node_type_id= works too): pick a node type and version, fill a form generated
 * from its input_schema (or the input as raw JSON), check it in the page with that same schema, and start the run.
 */
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, getNodeType, listNodeTypeVersions, startRun, type NodeType } from "../api";
import { navigate, type Route } from "../router";
import { SchemaForm } from "../components/schema-form";
import { useNodeTypeIds } from "../components/use-node-types";
import { initialValue, type JsonSchema } from "../schema-model";
import { schemaChecker, serverFieldErrors, type FieldErrors } from "../schema-validation";
import "./start.css";
import { VersionSelect } from "../components/version-select";

/** With no input_schema, any object is accepted (schemas/v1/node_type.schema.json). */
const ANY_OBJECT: JsonSchema = { type: "object" };

export function StartPage({ route }: { route: Route }) {
  // The pick lives in the URL, so a link (from a node type's page, say) opens the form of that version.
  const typeId = (route.query.get("type") ?? route.query.get("node_type_id") ?? "").trim();
  const version = route.query.get("version") ?? "";
  const pick = (type: string, v = "") => navigate(["start"], { type, version: v }, true);
  const [versions, setVersions] = useState<string[]>([]);
  // What the person is typing, kept apart from the picked type (in the URL): a re-render while they type, such as the
  // catalogue arriving, must not put the old value back into the field.
  const [typed, setTyped] = useState(typeId);
  useEffect(() => setTyped(typeId), [typeId]);
  const [nodeType, setNodeType] = useState<NodeType | undefined>();
  const [loadError, setLoadError] = useState<string | undefined>();
  const ids = useNodeTypeIds();

  // The node type (its latest version unless one is picked) and its versions.
  useEffect(() => {
    setNodeType(undefined);
    setLoadError(undefined);
    if (typeId === "") return;
    let live = true;
    Promise.all([getNodeType(typeId, version || undefined), listNodeTypeVersions(typeId)]).then(
      ([nt, vs]) => {
        if (!live) return;
        setNodeType(nt);
        setVersions(vs);
      },
      (err: unknown) =>
        live &&
        setLoadError(
          err instanceof ApiError && err.status === 404
            ? `No node type ${typeId}${version ? ` at version ${version}` : ""} in the registry.`
            : String((err as Error).message ?? err),
        ),
    );
    return () => {
      live = false;
    };
  }, [typeId, version]);

  return (
    <section class="page start-page">
      <header class="page-header">
        <h1>Start a run</h1>
      </header>
      <div class="start-pick">
        <label>
          Node type
          <input
            type="text"
            list="start-node-type-ids"
            data-testid="start-node-type"
            value={typed}
            placeholder="demo.echo"
            onInput={(e) => setTyped((e.currentTarget as HTMLInputElement).value)}
            onChange={(e) => pick((e.currentTarget as HTMLInputElement).value.trim())}
          />
          <datalist id="start-node-type-ids">
            {ids.map((id) => (
              <option key={id} value={id} />
            ))}
          </datalist>
        </label>
        <label>
          Version
          <VersionSelect testid="start-version" value={nodeType?.version ?? version} versions={versions} disabled={versions.length === 0} onPick={(v) => pick(typeId, v)} />
        </label>
      </div>
      {typeId === "" && (
        <p class="muted" data-testid="start-hint">
          Type a node type's id (the registry's ids are suggested), or open one from <a href="#/node-types">Node types</a> and follow its "Start a run".
        </p>
      )}
      {loadError && (
        <p class="error-box" role="alert" data-testid="start-load-error">
          {loadError}
        </p>
      )}
      {nodeType && <StartForm key={`${nodeType.node_type_id}@${nodeType.version}`} nodeType={nodeType} />}
    </section>
  );
}

function StartForm({ nodeType }: { nodeType: NodeType }) {
  const schema = (nodeType.input_schema as JsonSchema | undefined) ?? ANY_OBJECT;
  const checker = useMemo(() => schemaChecker(schema), [schema]);
  const [value, setValue] = useState<unknown>(() => initialValue(schema, schema) ?? {});
  const [raw, setRaw] = useState<string | undefined>();
  const [rawProblem, setRawProblem] = useState<string | undefined>();
  const jsonProblems = useRef(new Map<string, string>());
  const [, setProblemCount] = useState(0);
  const [errors, setErrors] = useState<FieldErrors>(new Map());
  const [tried, setTried] = useState(false);
  const [sending, setSending] = useState(false);
  const [sendError, setSendError] = useState<string | undefined>();

  // Once a submit was tried, the errors follow every change, so the person sees each one go.
  useEffect(() => {
    if (tried && raw === undefined) setErrors(checker.check(value));
  }, [value, tried]);

  const setJsonProblem = (pointer: string, problem: string | undefined) => {
    if (problem === undefined) jsonProblems.current.delete(pointer);
    else jsonProblems.current.set(pointer, problem);
    setProblemCount(jsonProblems.current.size);
  };

  const toggleRaw = () => {
    if (raw === undefined) {
      setRaw(JSON.stringify(value ?? {}, null, 2));
      setRawProblem(undefined);
      return;
    }
    try {
      setValue(JSON.parse(raw));
      setRaw(undefined);
    } catch (err) {
      setRawProblem(`The input is not JSON, so the form cannot show it: ${(err as Error).message}`);
    }
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setTried(true);
    setSendError(undefined);
    let input = value;
    if (raw !== undefined) {
      try {
        input = JSON.parse(raw);
      } catch (err) {
        setRawProblem(`not JSON: ${(err as Error).message}`);
        return;
      }
    }
    if (raw === undefined && jsonProblems.current.size > 0) {
      setSendError("Some JSON fields do not parse; fix them first.");
      return;
    }
    const found = checker.check(input);
    setErrors(found);
    if (found.size > 0) return;
    setSending(true);
    try {
      const run = await startRun({
        root_node_type_ref: { node_type_id: nodeType.node_type_id, version: nodeType.version },
        input: input as Record<string, unknown>,
      });
      location.hash = `#/runs/${encodeURIComponent(run.run_id)}`;
    } catch (err) {
      setSending(false);
      if (err instanceof ApiError && err.status === 400) {
        const fromServer = serverFieldErrors(err.envelope?.error?.details);
        setErrors(fromServer);
        setSendError(`The fabric refused the input: ${err.message}`);
      } else if (err instanceof ApiError) {
        setSendError(`${err.code}: ${err.message}`);
      } else {
        setSendError((err as Error).message ?? String(err));
      }
    }
  };

  return (
    <form class="start-form" data-testid="start-form" onSubmit={submit} noValidate>
      <header>
        <h2 class="mono">
          {nodeType.node_type_id}@{nodeType.version} <span class="badge">{nodeType.kind}</span>
        </h2>
        {nodeType.description && <p>{nodeType.description}</p>}
        {checker.problem && <p class="notice">The page cannot check this input_schema ({checker.problem}); the executor will.</p>}
      </header>
      <div class="start-mode">
        <button type="button" class="secondary" data-testid="start-raw-toggle" onClick={toggleRaw} aria-pressed={raw !== undefined}>
          {raw === undefined ? "Edit as JSON" : "Back to the form"}
        </button>
      </div>
      {raw === undefined ? (
        <SchemaForm schema={schema} value={value} onChange={setValue} errors={errors} setJsonProblem={setJsonProblem} />
      ) : (
        <>
          <textarea
            class="json-input start-raw"
            data-testid="start-raw-json"
            aria-label="The run's input as JSON"
            rows={16}
            spellcheck={false}
            value={raw}
            onInput={(e) => {
              setRaw((e.currentTarget as HTMLTextAreaElement).value);
              setRawProblem(undefined);
            }}
          />
          {rawProblem && (
            <p class="field-errors" data-testid="start-raw-error">
              {rawProblem}
            </p>
          )}
        </>
      )}
      {sendError && (
        <p class="error-box" role="alert" data-testid="start-error">
          {sendError}
        </p>
      )}
      {errors.size > 0 && (
        <div class="error-box" role="alert" data-testid="start-errors">
          {sendError ? "" : "The input does not match the node type's input_schema:"}
          <ul>
            {[...errors].flatMap(([pointer, messages]) =>
              messages.map((m) => (
                <li key={pointer + m}>
                  <code>{pointer === "" ? "(input)" : pointer}</code> {m}
                </li>
              )),
            )}
          </ul>
        </div>
      )}
      <div class="actions">
        <button type="submit" data-testid="start-submit" disabled={sending}>
          {sending ? "Starting…" : "Start run"}
        </button>
      </div>
    </form>
  );
}
