import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { openRuntime } from "../../src/index.js";
import { benchStreams, writeRecoveryFixture } from "../fixtures.js";
import { type CpuProfile, summarizeProfile } from "../lib/cpuprofile.js";
import { progress, throttled } from "../lib/progress.js";
import { openBenchRuntime, runToCompletion } from "../lib/runtime.js";
import { TempRoot } from "../lib/temp.js";
import { benchAgent, noopTool } from "../workload.js";

/**
 * CPU-profile one bench workload, and only it: set-up (fixtures, warm-up) runs outside the
 * profiler, so the profile shows the measured path alone.
 *
 *   npx tsx bench/tools/profile.ts sequential  [--runs 10] [--calls 100]
 *   npx tsx bench/tools/profile.ts concurrency [--parallel 64] [--samples 3]
 *   npx tsx bench/tools/profile.ts journal-only [--parallel 64]
 *   npx tsx bench/tools/profile.ts recovery --runs 1000 [--filler 1000000]
 *
 * Writes reports/profiles/<workload>.cpuprofile (open it in Chrome DevTools) and prints a summary.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const argv = process.argv.slice(2);
const workload = argv[0];
const option = (name: string, fallback: number): number => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};

const profiled = async (label: string, body: () => Promise<void>): Promise<void> => {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  await session.post("Profiler.start");
  const started = performance.now();
  try {
    await body();
  } finally {
    const seconds = (performance.now() - started) / 1000;
    const { profile } = (await session.post("Profiler.stop")) as { profile: CpuProfile };
    session.disconnect();
    const folder = join(ROOT, "reports", "profiles");
    mkdirSync(folder, { recursive: true });
    const file = join(folder, `${label}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    process.stdout.write(`${label}: ${seconds.toFixed(2)} s wall; ${file}\n${summarizeProfile(profile)}`);
  }
};

const main = async (): Promise<void> => {
  const temp = new TempRoot();
  try {
    const folder = temp.folder("profile");
    switch (workload) {
      case "sequential": {
        const runtime = await openBenchRuntime(folder);
        await runToCompletion(runtime, "warm-up", 20);
        const runs = option("runs", 10);
        const calls = option("calls", 100);
        await profiled(`sequential-${runs}x${calls}`, async () => {
          for (let r = 0; r < runs; r++) await runToCompletion(runtime, `run-${r}`, calls);
        });
        await runtime.close();
        break;
      }
      case "concurrency": {
        const runtime = await openBenchRuntime(folder);
        await runToCompletion(runtime, "warm-up", 20);
        const parallel = option("parallel", 64);
        const samples = option("samples", 3);
        await profiled(`concurrency-${parallel}`, async () => {
          for (let s = 0; s < samples; s++) {
            await Promise.all(
              Array.from({ length: parallel }, (_, i) => runToCompletion(runtime, `s${s}-r${i}`, 50)),
            );
          }
        });
        await runtime.close();
        break;
      }
      case "journal-only": {
        const journal = LibsqlJournal.open(join(folder, "journal.db"));
        const parallel = option("parallel", 64);
        await profiled(`journal-only-${parallel}`, async () => {
          await Promise.all(
            Array.from({ length: parallel }, async (_, s) => {
              const stream = benchStreams(journal.fingerprintKey, `stream-${s}`, 50);
              let version = 0;
              for (const events of stream.appends) {
                await journal.append({
                  streamId: stream.streamId,
                  expectedVersion: version || "no-stream",
                  events,
                });
                version += events.length;
              }
            }),
          );
        });
        await journal.close();
        break;
      }
      case "recovery": {
        const runs = option("runs", 1000);
        const filler = option("filler", 0);
        const path = join(folder, "journal.db");
        await writeRecoveryFixture(path, {
          interrupted: runs,
          fillerEvents: filler,
          isHeld: (n) => n % 2 === 0,
          onProgress: throttled("profile", "writing the fixture (runs)", 5000),
        });
        progress("profile", "fixture written; profiling open + recover()");
        await profiled(`recovery-${runs}-filler-${filler}`, async () => {
          const runtime = await openRuntime({
            store: path,
            agents: [benchAgent],
            tools: [noopTool],
            recovery: { onOpen: false },
          });
          const report = await runtime.recover();
          await report.done;
          await runtime.close();
        });
        break;
      }
      default:
        throw new Error("usage: profile.ts sequential|concurrency|journal-only|recovery [options]");
    }
  } finally {
    temp.remove();
  }
};

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
