#!/usr/bin/env node
// The compiled CLI when the package is built; otherwise the TypeScript source through tsx, so the
// command works straight from a checkout.
import { existsSync } from "node:fs";

const compiled = new URL("../dist/adapters/surfaces/cli/main.js", import.meta.url);
let entry;
if (existsSync(compiled)) {
  entry = compiled.href;
} else {
  const { register } = await import("tsx/esm/api");
  register();
  entry = new URL("../src/adapters/surfaces/cli/main.ts", import.meta.url).href;
}
const { main, exitWhenAsked } = await import(entry);
process.exitCode = await main(process.argv.slice(2));
exitWhenAsked?.();
