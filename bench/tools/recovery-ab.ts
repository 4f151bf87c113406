/**
 * Recovery's classification time per run, for A/B comparisons between two clones in the same hour:
 *
 *   npx tsx bench/tools/recovery-ab.ts [runs=10000] [repetitions=3] [--profile]
 *
 * Writes a fixture of `runs` interrupted runs (half held, in blocks of ten, as the bench's) once to
 * /tmp/rec-<runs>.db, then for each repetition recovers a fresh copy and prints µs per run of wall
 * and CPU time from `recover()` to every run classified. `--profile` CPU-profiles the last
 * repetition's classification into /tmp/rec.cpuprofile and prints a summary.
 */
import { copyFileSync, existsSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { openRuntime } from "../../src/index.js";
import { writeRecoveryFixture } from "../fixtures.js";
import { type CpuProfile, summarizeProfile } from "../lib/cpuprofile.js";
import { benchAgent, noopTool } from "../workload.js";

const runs = Number(process.argv[2] ?? 10000);
const reps = Number(process.argv[3] ?? 3);
const fixture = `/tmp/rec-${runs}.db`;
const stride = 10;
if (!Number.isSafeInteger(runs) || runs < 1 || !Number.isSafeInteger(reps) || reps < 1)
  throw new Error("usage: recovery-ab.ts [runs] [repetitions] [--profile]");
if (!existsSync(fixture))
  await writeRecoveryFixture(fixture, {
    interrupted: runs,
    fillerEvents: 0,
    isHeld: (n) => Math.floor(n / stride) % 2 === 0,
  });
const work = `/tmp/rec-work-${process.pid}.db`;
for (let r = 0; r < reps; r++) {
  for (const s of ["", "-wal", "-shm", "-anchor"]) rmSync(work + s, { force: true });
  copyFileSync(fixture, work);
  const runtime = await openRuntime({
    store: work,
    agents: [benchAgent],
    tools: [noopTool],
    recovery: { onOpen: false },
  });
  const prof = process.argv.includes("--profile") && r === reps - 1;
  const session = new Session();
  if (prof) {
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 200 });
    await session.post("Profiler.start");
  }
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const report = await runtime.recover();
  const t1 = performance.now();
  if (prof) {
    const { profile } = (await session.post("Profiler.stop")) as { profile: CpuProfile };
    writeFileSync("/tmp/rec.cpuprofile", JSON.stringify(profile));
    process.stdout.write(summarizeProfile(profile));
  }
  const cpu = process.cpuUsage(c0);
  const results = await report.done;
  const completed = results.filter((r) => r.status === "completed").length;
  if (completed !== report.resumed.length)
    throw new Error(`${report.resumed.length} runs resumed, ${completed} completed`);
  const t2 = performance.now();
  await runtime.close();
  console.log(
    `classify ${(((t1 - t0) * 1000) / runs).toFixed(0)} µs/run cpu ${((cpu.user + cpu.system) / runs).toFixed(0)} µs/run; settle ${(t2 - t1).toFixed(0)} ms; held ${report.held.length} resumed ${report.resumed.length}`,
  );
}
for (const s of ["", "-wal", "-shm", "-anchor"]) rmSync(work + s, { force: true });
