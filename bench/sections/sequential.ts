import { join } from "node:path";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { benchStreams } from "../fixtures.js";
import { figure, type Metric, targeted } from "../lib/metric.js";
import { progress } from "../lib/progress.js";
import { openBenchRuntime, runToCompletion } from "../lib/runtime.js";
import type { Section } from "../lib/section.js";
import { median, microsSince, round, spreadOf } from "../lib/stats.js";
import { walPagesPerCommit } from "../lib/wal.js";
import { setCallSink } from "../workload.js";

/** Calls per run: an agent of realistic length, so the per-run fold does not dominate. */
const CALLS_PER_RUN = 100;
/** Floor commits taken in each round: the floor and the calls alternate under the same load. */
const FLOOR_PER_ROUND = 100;
const WINDOW = 100;

/** CPU time (user + system) of this process since `start`, in µs: what a busy neighbour changes least. */
const cpuMicrosSince = (start: NodeJS.CpuUsage): number => {
  const { user, system } = process.cpuUsage(start);
  return user + system;
};
let journalCpuMicros = 0;

/**
 * The same intent/outcome appends made straight to the journal, one at a time: what the store
 * costs per call, without the agent, the turn API or the run machine. Returns µs per call (the
 * intent's append plus the outcome's).
 */
const journalOnlyCalls = async (journal: LibsqlJournal, runId: string, calls: number): Promise<number[]> => {
  const stream = benchStreams(journal.fingerprintKey, runId, calls);
  const cpu = process.cpuUsage();
  const perAppend: number[] = [];
  let version = 0;
  for (const events of stream.appends) {
    const started = process.hrtime.bigint();
    await journal.append({ streamId: stream.streamId, expectedVersion: version || "no-stream", events });
    perAppend.push(microsSince(started));
    version += events.length;
  }
  journalCpuMicros += cpuMicrosSince(cpu);
  // Drop the admission and the completion; pair each intent with its outcome.
  const callAppends = perAppend.slice(1, -1);
  return Array.from(
    { length: callAppends.length / 2 },
    (_, i) => callAppends[2 * i]! + callAppends[2 * i + 1]!,
  );
};

/** 2. A journaled no-op tool call (intent + outcome), sequential within one run. */
export const sequentialSection: Section = {
  name: "sequential",
  async run({ options, temp, floor }) {
    const rounds = options.quick ? 4 : 16;
    // The long run shows how the cost of one call grows with the calls already in its run.
    const longRunCalls = options.quick ? 200 : 1000;
    const folder = temp.folder("sequential");
    const runtime = await openBenchRuntime(folder);
    const journalPath = join(folder, "journal-only.db");
    const journal = LibsqlJournal.open(journalPath);
    const calls: number[] = [];
    const storeCalls: number[] = [];
    const floorSamples: number[] = [];
    let runtimeCpuMicros = 0;
    try {
      setCallSink(null);
      await runToCompletion(runtime, "warm-up", 20);
      await journalOnlyCalls(journal, "warm-up", 20);
      journalCpuMicros = 0;
      for (let round = 0; round < rounds; round++) {
        floorSamples.push(...floor.single(FLOOR_PER_ROUND));
        setCallSink((us) => calls.push(us));
        const cpu = process.cpuUsage();
        await runToCompletion(runtime, `sequential-${round}`, CALLS_PER_RUN);
        runtimeCpuMicros += cpuMicrosSince(cpu);
        setCallSink(null);
        storeCalls.push(...(await journalOnlyCalls(journal, `sequential-${round}`, CALLS_PER_RUN)));
      }
      progress("sequential", `${calls.length} calls in ${rounds} runs; now one run of ${longRunCalls} calls`);
      const long: number[] = [];
      setCallSink((us) => long.push(us));
      await runToCompletion(runtime, "sequential-long", longRunCalls);
      setCallSink(null);
      const journalCpu = journalCpuMicros / storeCalls.length;
      const floorPages = await floor.walPagesPerCommit();
      const journalPages = await walPagesPerCommit(
        journal.unsafeDatabase(),
        `${journalPath}-wal`,
        2 * 25,
        async () => {
          await journalOnlyCalls(journal, "wal-pages", 25);
        },
      );

      const call = spreadOf(calls);
      const store = spreadOf(storeCalls);
      const floorMedian = median(floorSamples);
      const floorSpread = spreadOf(floorSamples);
      const early = median(long.slice(0, WINDOW));
      const late = median(long.slice(-WINDOW));
      const range = (s: typeof call) => ({ n: s.n, p95: round(s.p95), min: round(s.min), max: round(s.max) });
      const metrics: Metric[] = [
        targeted(
          {
            name: "sequential.call",
            value: round(call.median),
            unit: "µs/call",
            ratio: round(call.median / floorMedian),
            spread: range(call),
            note: `median of ${call.n} no-op tool calls, ${CALLS_PER_RUN} per run; ratio to the single-row floor commit (median ${round(floorMedian)} µs) sampled between the runs`,
          },
          "<=",
          2.5,
        ),
        figure({
          name: "sequential.call.p95",
          value: round(call.p95),
          unit: "µs/call",
          ratio: round(call.p95 / floorSpread.p95),
          note: "ratio to the floor's p95",
        }),
        figure({
          name: "sequential.journal_only.call",
          value: round(store.median),
          unit: "µs/call",
          ratio: round(store.median / floorMedian),
          spread: range(store),
          note: `the intent's and the outcome's LibsqlJournal.append alone (no agent, turn API or run machine); WAL pages per commit: journal ${round(journalPages)}, floor ${round(floorPages)}`,
        }),
        targeted(
          {
            name: "sequential.call.cpu",
            value: round(runtimeCpuMicros / calls.length),
            unit: "µs CPU/call",
            ratio: null,
            note: "user + system CPU time of the bench process per call over the runs (admission and completion included), whatever the waits; the part of a call a busy neighbour changes least",
          },
          "<=",
          300,
          "value",
        ),
        figure({
          name: "sequential.journal_only.call.cpu",
          value: round(journalCpu),
          unit: "µs CPU/call",
          note: "the same for the two appends straight to the journal",
        }),
        figure({
          name: "sequential.call.late_in_long_run",
          value: round(late),
          unit: "µs/call",
          ratio: round(late / early),
          note: `median of calls ${longRunCalls - WINDOW + 1}-${longRunCalls} of a ${longRunCalls}-call run; ratio to its first ${WINDOW} calls (${round(early)} µs)`,
        }),
      ];
      return { metrics };
    } finally {
      setCallSink(null);
      await journal.close();
      await runtime.close();
    }
  },
};
