import { join } from "node:path";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { Runtime } from "../../src/index.js";
import { benchStreams } from "../fixtures.js";
import { figure, type Metric, targeted } from "../lib/metric.js";
import { progress } from "../lib/progress.js";
import { openBenchRuntime, runToCompletion } from "../lib/runtime.js";
import type { Section, Series } from "../lib/section.js";
import { median, round, spreadOf } from "../lib/stats.js";
import { setCallSink } from "../workload.js";

/** Issue 15: journaled events/s at 64 runs at least this share of the batched floor. */
const C64_TARGET = 0.25;

import { BATCH_ROWS } from "./floor.js";

/**
 * Runs each parallel lane makes one after another in a sample, so every sample holds a few
 * thousand calls whatever the concurrency (one lane alone is too short to time well).
 */
export const RUNS_PER_LANE: Record<number, number> = { 1: 8, 8: 2, 64: 1 };
export const CONCURRENCY = [1, 8, 64] as const;
const FLOOR_PER_SAMPLE = 20;

export interface Sample {
  readonly calls: number;
  readonly events: number;
  readonly seconds: number;
  /** User + system CPU time of the process while the sample ran. */
  readonly cpuMicros: number;
}

export const sample = async (
  runtime: Runtime,
  concurrency: number,
  callsPerRun: number,
  tag: string,
): Promise<Sample> => {
  const runsPerLane = RUNS_PER_LANE[concurrency] ?? 1;
  const runIds: string[] = [];
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      for (let r = 0; r < runsPerLane; r++) {
        runIds.push(await runToCompletion(runtime, `${tag}-lane${lane}-run${r}`, callsPerRun));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const { user, system } = process.cpuUsage(cpu);
  // Counted from the journal, after the clock stopped: admissions and completions are journaled too.
  let events = 0;
  for (const runId of runIds) events += (await runtime.events(runId)).length;
  return { calls: runIds.length * callsPerRun, events, seconds, cpuMicros: user + system };
};

/**
 * The store alone at 64 streams: the same intent/outcome appends with no agent, turn or run
 * machine above them. Separates what the journal costs from what the runtime adds, and counts
 * commits, which shows how many appends each group commit carried.
 */
const journalOnly = async (folder: string, streams: number, pairs: number) => {
  let commits = 0;
  const journal = LibsqlJournal.open(join(folder, "journal-only.db"), { onBeforeCommit: () => commits++ });
  try {
    const started = performance.now();
    let events = 0;
    await Promise.all(
      Array.from({ length: streams }, async (_, s) => {
        const stream = benchStreams(journal.fingerprintKey, `journal-only-${s}`, pairs);
        let version = 0;
        for (const batch of stream.appends) {
          await journal.append({
            streamId: stream.streamId,
            expectedVersion: version || "no-stream",
            events: batch,
          });
          version += batch.length;
          events += batch.length;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    return { eventsPerS: events / seconds, appendsPerCommit: (streams * (2 * pairs + 2)) / commits };
  } finally {
    await journal.close();
  }
};

/** 3. 1, 8 and 64 runs in parallel: where group commit shows. */
export const concurrencySection: Section = {
  name: "concurrency",
  async run({ options, temp, floor }) {
    const samplesPerLevel = options.quick ? 2 : 4;
    const callsPerRun = options.quick ? 25 : 50;
    const folder = temp.folder("concurrency");
    const runtime = await openBenchRuntime(folder);
    const results = new Map<number, Sample[]>(CONCURRENCY.map((c) => [c, []]));
    const latencies = new Map<number, number[]>(CONCURRENCY.map((c) => [c, []]));
    const floorSamples: number[] = [];
    try {
      await runToCompletion(runtime, "warm-up", 20);
      for (let s = 0; s < samplesPerLevel; s++) {
        for (const c of CONCURRENCY) {
          floorSamples.push(...floor.batched(FLOOR_PER_SAMPLE));
          const lat = latencies.get(c)!;
          setCallSink((us) => lat.push(us));
          results.get(c)!.push(await sample(runtime, c, callsPerRun, `c${c}-s${s}`));
          setCallSink(null);
        }
        progress("concurrency", `sample ${s + 1}/${samplesPerLevel} at ${CONCURRENCY.join(", ")} runs done`);
      }
    } finally {
      setCallSink(null);
      await runtime.close();
    }
    const batchedRowsPerS = (BATCH_ROWS * 1e6) / median(floorSamples);
    const metrics: Metric[] = [];
    const points: Array<[number, number]> = [];
    for (const c of CONCURRENCY) {
      const samples = results.get(c)!;
      const callsPerS = spreadOf(samples.map((x) => x.calls / x.seconds));
      const eventsPerS = spreadOf(samples.map((x) => x.events / x.seconds));
      const lat = spreadOf(latencies.get(c)!);
      points.push([c, callsPerS.median]);
      const range = (s: typeof callsPerS) => ({
        n: s.n,
        p95: round(s.p95),
        min: round(s.min),
        max: round(s.max),
      });
      metrics.push(
        figure({
          name: `concurrency.c${c}.calls_per_s`,
          value: round(callsPerS.median),
          unit: "calls/s",
          spread: range(callsPerS),
          note: `${c} run(s) in parallel, ${callsPerRun} no-op calls each; per-call latency median ${round(lat.median)} µs, p95 ${round(lat.p95)} µs`,
        }),
      );
      const events = {
        name: `concurrency.c${c}.events_per_s`,
        value: round(eventsPerS.median),
        unit: "events/s",
        ratio: round(eventsPerS.median / batchedRowsPerS),
        spread: range(eventsPerS),
        note: `journaled events/s (intents, outcomes, admissions, completions) over the batched floor's ${round(batchedRowsPerS)} rows/s sampled alongside`,
      };
      metrics.push(c === 64 ? targeted(events, ">=", C64_TARGET) : figure(events));
    }
    progress("concurrency", "the journal alone at 64 streams");
    const only = await journalOnly(folder, 64, callsPerRun);
    metrics.push(
      figure({
        name: "concurrency.c64.journal_only.events_per_s",
        value: round(only.eventsPerS),
        unit: "events/s",
        ratio: round(only.eventsPerS / batchedRowsPerS),
        note: `LibsqlJournal.append directly, 64 streams, no runtime above it; ${round(only.appendsPerCommit)} appends per group commit`,
      }),
    );
    const c64 = results.get(64)!;
    metrics.push(
      targeted(
        {
          name: "concurrency.c64.cpu_per_event",
          value: round(median(c64.map((x) => x.cpuMicros / x.events))),
          unit: "µs CPU/event",
          ratio: null,
          note: `user + system CPU time of the bench process per journaled event at 64 runs; the events/s target alone implies 1e6 / (${C64_TARGET} × batched floor rows/s) = ${round(1e6 / (C64_TARGET * batchedRowsPerS))} µs per event on one core`,
        },
        "<=",
        30,
        "value",
      ),
    );
    const eventsPerCall = c64.reduce((a, x) => a + x.events, 0) / c64.reduce((a, x) => a + x.calls, 0);
    const targetCalls = (C64_TARGET * batchedRowsPerS) / eventsPerCall;
    const series: Series[] = [
      { chart: "concurrency", label: "journaled calls/s (median)", points },
      {
        chart: "concurrency",
        label: `target at 64: ${C64_TARGET} × batched floor (${round(batchedRowsPerS)} rows/s) in calls`,
        points: [
          [1, targetCalls],
          [64, targetCalls],
        ],
        reference: true,
      },
    ];
    return { metrics, series };
  },
};
