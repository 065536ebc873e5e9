// `node --import ./node20-fs.mjs`: lets @modelcontextprotocol/conformance load on Node.js 20.
// Its bundle imports `globSync` from "fs" (Node.js 22+) for `tier-check` only; server mode never
// calls it, but an ESM import of a missing name fails at load. On Node.js 20 this hook hands the
// package an "fs" that re-exports the real one plus a globSync that says what it needs.
import fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  const shim = "data:text/javascript," + encodeURIComponent(
    'export * from "node:fs"; import fs from "node:fs"; export default fs;' +
    'export function globSync() { throw new Error("fs.globSync needs Node.js 22 or later"); }');
  register("data:text/javascript," + encodeURIComponent(`
    export async function resolve(specifier, context, next) {
      if ((specifier === "fs" || specifier === "node:fs")
          && context.parentURL?.includes("/@modelcontextprotocol/conformance/"))
        return { url: ${JSON.stringify(shim)}, shortCircuit: true };
      return next(specifier, context);
    }`));
}
