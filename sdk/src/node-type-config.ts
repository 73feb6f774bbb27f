/**
 * For template handlers (`http.request`, `mcp.call`), whose node types carry their configuration in an extension:
 * the configuration is compiled once per NodeType object, and a configuration that does not compile fails every
 * execution with the same HandlerError. The executor hands the same object to every execution of a node type, and a
 * published version never changes, so the cache is keyed by the object and lets it go with it.
 */
import { HandlerError } from "./handler-error.js";

export function compiledPerNodeType<N extends object, C>(compile: (nodeType: N) => C): (nodeType: N) => C {
  const compiled = new WeakMap<N, C | HandlerError>();
  return (nodeType) => {
    let config = compiled.get(nodeType);
    if (config === undefined) {
      try {
        config = compile(nodeType);
      } catch (err) {
        if (!HandlerError.is(err)) throw err;
        config = err;
      }
      compiled.set(nodeType, config);
    }
    if (HandlerError.is(config)) throw config;
    return config as C;
  };
}
