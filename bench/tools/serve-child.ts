import { createInterface } from "node:readline";
import { serve } from "../../src/adapters/surfaces/http/serve.js";

/**
 * `node --import tsx bench/tools/serve-child.ts <journal> [pollMs]` with `HOLDFAST_TOKEN` set:
 * `holdfast serve` in a process of its own, as it runs next to a runtime, so the clients and the
 * writer of the bench do not share its event loop. Prints `{"url": …, "panelUrl": …}` once listening; answers
 * each `cpu` line on stdin with `{"cpuMicros": …}` (user + system so far); closes on end of stdin.
 */
const [path, pollMs] = process.argv.slice(2);
if (!path) throw new Error("usage: serve-child.ts <journal file> [pollMs]");
const server = await serve({
  store: path,
  port: 0,
  ...(pollMs === undefined ? {} : { live: { pollMs: Number(pollMs) } }),
});
process.stdout.write(`${JSON.stringify({ url: server.url, panelUrl: server.panelUrl })}\n`);
const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line.trim() !== "cpu") return;
  const { user, system } = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ cpuMicros: user + system })}\n`);
});
lines.on("close", () => {
  void server.close().then(() => process.exit(0));
});
