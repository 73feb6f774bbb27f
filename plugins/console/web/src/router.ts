/**
 * The console's hash router: `#/runs/<id>?node=<nr>` is `{ path: ["runs", "<id>"], query }`. A hash route needs no
 * server routing (the gateway serves one index.html) and survives reloads and shared links.
 */
import { useEffect, useState } from "preact/hooks";

export interface Route {
  /** Decoded path segments: `#/node-types/weather.current` is ["node-types", "weather.current"]. */
  path: string[];
  query: URLSearchParams;
  /** The hash as it is, without the leading "#". */
  raw: string;
}

/** Parses a location hash (with or without its "#"). */
export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#/, "");
  const q = raw.indexOf("?");
  const pathPart = q < 0 ? raw : raw.slice(0, q);
  const path = pathPart
    .split("/")
    .filter((s) => s !== "")
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  return { path, query: new URLSearchParams(q < 0 ? "" : raw.slice(q + 1)), raw };
}

export type QueryValues = Record<string, string | number | undefined | null>;

/** A hash for path segments and query values (empty values left out): href(["runs", id], { node: nr }). */
export function href(path: readonly string[], query: QueryValues = {}): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") qs.set(k, String(v));
  const s = qs.toString();
  return `#/${path.map(encodeURIComponent).join("/")}${s ? `?${s}` : ""}`;
}

/**
 * Goes to a route. `replace` changes the current history entry instead of adding one (filters, panels), so the back
 * button goes to the previous page rather than through every keystroke.
 */
export function navigate(path: readonly string[], query: QueryValues = {}, replace = false): void {
  const target = href(path, query);
  if (target === location.hash) return;
  if (replace) {
    history.replaceState(history.state, "", target);
    // replaceState fires no hashchange: tell the router ourselves.
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } else {
    location.hash = target;
  }
}

/** The current route, re-rendering on every hash change. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return route;
}

/** The current hash as a `next` value for the login page. */
export function currentHash(): string {
  return location.hash.replace(/^#/, "") || "/runs";
}
