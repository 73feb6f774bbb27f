/**
 * Calls `load` now and again `everyMs` after each call ends (never two at once), and stops when the component goes or
 * `deps` change: the page's "live" for lists the API offers no stream for.
 */
import { useEffect } from "preact/hooks";

export function usePolling(load: (signal: AbortSignal) => Promise<void>, everyMs: number, deps: unknown[]): void {
  useEffect(() => {
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      // A hidden tab asks nothing; it catches up when shown again.
      if (document.visibilityState !== "hidden") await load(ctrl.signal).catch(() => undefined);
      if (!ctrl.signal.aborted) timer = setTimeout(tick, everyMs);
    };
    const onShow = () => {
      if (document.visibilityState === "visible" && timer !== undefined) {
        clearTimeout(timer);
        void tick();
      }
    };
    document.addEventListener("visibilitychange", onShow);
    void tick();
    return () => {
      ctrl.abort();
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", onShow);
    };
  }, deps);
}
