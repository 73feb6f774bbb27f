/**
 * Cedar's policy engine, loaded at the first policy parsed or decided with it rather than when the PDP starts: a
 * fabric on the built-in allow-all policy never loads it (its WebAssembly module costs about 10 MB of memory and
 * 100 ms to start). The Node.js build is CommonJS, so it loads synchronously and what uses it stays synchronous.
 */
import { createRequire } from "node:module";

type CedarModule = typeof import("@cedar-policy/cedar-wasm/nodejs");

let cedar: CedarModule | undefined;

/** The Cedar module, loaded on the first call. */
export function cedarEngine(): CedarModule {
  cedar ??= createRequire(import.meta.url)("@cedar-policy/cedar-wasm/nodejs") as CedarModule;
  return cedar;
}
