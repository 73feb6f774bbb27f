/**
 * Installs a dispatcher (an undici MockAgent) as undici's global dispatcher for as long as a run or a fixture needs
 * it, then puts the previous one back. The global dispatcher lives under a `Symbol.for` key, so it also reaches a
 * handler package's own copy of undici and Node's global `fetch`.
 */
import { getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from "undici";

let installed: { dispatcher: Dispatcher; previous: Dispatcher; users: number } | undefined;

/**
 * Makes `dispatcher` undici's global dispatcher and returns the function that undoes it. Runs sharing one dispatcher
 * may overlap; a second, different dispatcher while the first is installed is refused, since one of the two runs
 * would silently reach the other's mocks (or the network).
 */
export function installGlobalDispatcher(dispatcher: Dispatcher): () => void {
  if (installed && installed.dispatcher !== dispatcher) {
    throw new Error(
      "another MockAgent is already undici's global dispatcher for a run or fabricFixture still in progress; " +
        "run handlers that use different MockAgents one after the other, or share one MockAgent",
    );
  }
  if (installed) installed.users++;
  else {
    installed = { dispatcher, previous: getGlobalDispatcher(), users: 1 };
    setGlobalDispatcher(dispatcher);
  }
  let undone = false;
  return () => {
    if (undone || !installed) return;
    undone = true;
    if (--installed.users === 0) {
      setGlobalDispatcher(installed.previous);
      installed = undefined;
    }
  };
}
