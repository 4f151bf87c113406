/**
 * What a recovery pass costs per interrupted run, and which statements it runs: a journal of `runs`
 * interrupted bench runs (half held, half resumed, in blocks of ten), opened and recovered once.
 *
 *   npx tsx bench/tools/recovery-statements.ts [runs=10000]
 *
 * Prints the time and CPU per run until `recover()` returns and until every resumed run has
 * finished re-executing, then the statements by total time (count, µs per run, µs each). `COMMIT`
 * includes the fsync. Run it from a clone, on a quiet machine.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openRuntime } from "../../src/index.js";
import { writeRecoveryFixture } from "../fixtures.js";
import { statementLines, statementsPer, timeStatements } from "../lib/statementTimes.js";
import { benchAgent, noopTool } from "../workload.js";

const runs = Number(process.argv[2] ?? 10_000);
if (!Number.isSafeInteger(runs) || runs < 1) throw new Error("usage: recovery-statements.ts [runs]");

const timing = timeStatements();
const folder = mkdtempSync(join(tmpdir(), "holdfast-recovery-"));
try {
  const path = join(folder, "journal.db");
  await writeRecoveryFixture(path, {
    interrupted: runs,
    fillerEvents: 0,
    isHeld: (n) => Math.floor(n / 10) % 2 === 0,
  });
  const runtime = await openRuntime({
    store: path,
    agents: [benchAgent],
    tools: [noopTool],
    recovery: { onOpen: false },
  });
  try {
    timing.measuring = true;
    const cpu = process.cpuUsage();
    const started = performance.now();
    const report = await runtime.recover();
    const returned = { ms: performance.now() - started, cpu: process.cpuUsage(cpu) };
    await report.done;
    const settled = { ms: performance.now() - started, cpu: process.cpuUsage(cpu) };
    timing.measuring = false;
    const per = (t: typeof returned) =>
      `${Math.round((t.ms * 1000) / runs)} µs/run (CPU ${Math.round((t.cpu.user + t.cpu.system) / runs)})`;
    console.log(
      `${runs} interrupted runs (${report.held.length} held, ${report.resumed.length} resumed): recover() ${per(returned)}, ` +
        `until settled ${per(settled)}; statements ${statementsPer(timing.times, runs)} µs per run`,
    );
    for (const line of statementLines(timing.times, runs, "run")) console.log(line);
  } finally {
    await runtime.close();
  }
} finally {
  rmSync(folder, { recursive: true, force: true });
}
