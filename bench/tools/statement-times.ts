/**
 * Where the libSQL journal's time goes at the runtime's level: every statement's time, by its SQL,
 * while `runs` bench runs of `calls` no-op calls each run together.
 *
 *   npx tsx bench/tools/statement-times.ts [runs=64] [calls=50]
 *
 * Prints the CPU time per journaled event, then the statements by total time: how many ran, µs per
 * event and µs each. `BEGIN`/`COMMIT` include the fsync. Run it from a clone, on a quiet machine.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { measuredRuns, openBenchRuntime } from "../lib/runtime.js";
import { statementLines, statementsPer, timeStatements } from "../lib/statementTimes.js";

const runs = Number(process.argv[2] ?? 64);
const calls = Number(process.argv[3] ?? 50);
if (!Number.isSafeInteger(runs) || runs < 1 || !Number.isSafeInteger(calls) || calls < 1)
  throw new Error("usage: statement-times.ts [runs] [calls]");

const timing = timeStatements();
const folder = mkdtempSync(join(tmpdir(), "holdfast-statements-"));
const runtime = await openBenchRuntime(folder);
try {
  const { events, wallMs, cpuMicros } = await measuredRuns(runtime, runs, calls, (on) => {
    timing.measuring = on;
  });
  const wall = Math.round(wallMs);
  console.log(
    `${runs} runs × ${calls} calls: ${events} events in ${wall} ms (${Math.round(events / (wall / 1000))} events/s), ` +
      `${Math.round(cpuMicros / events)} µs CPU per event; statements ${statementsPer(timing.times, events)} µs per event`,
  );
  for (const line of statementLines(timing.times, events, "event")) console.log(line);
} finally {
  await runtime.close();
  rmSync(folder, { recursive: true, force: true });
}
