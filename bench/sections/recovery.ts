import { closeSync, copyFileSync, fsyncSync, openSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { openRuntime } from "../../src/index.js";
import { stopInterruptedRuns, writeRecoveryFixture } from "../fixtures.js";
import { figure, type Metric, targeted } from "../lib/metric.js";
import { progress, throttled } from "../lib/progress.js";
import type { Section, Series } from "../lib/section.js";
import { median, round, spreadOf } from "../lib/stats.js";
import { type Usage, usageMark } from "../lib/usage.js";
import { benchAgent, noopTool } from "../workload.js";

interface Timing {
  /** Opening the journal file (checks, migrations) and building the engine. */
  readonly openMs: number;
  /** `recover()` until every active run is classified (held or resumed). */
  readonly classifyMs: number;
  readonly totalMs: number;
  /** From classification until every resumed run has finished re-executing. */
  readonly settleMs: number;
  readonly open: Usage;
  readonly classify: Usage;
}

interface Expected {
  readonly interrupted: number;
  readonly held: number;
}

/**
 * Fixtures are checkpointed when written, so the main file is the whole journal. The copy is made
 * durable before it is measured, as the file a crashed process left would be: otherwise the
 * journal's first fsync on opening writes back the whole copy (~290 ms for the 620 MiB log with 1M
 * events), which is the bench's copying, not recovery.
 */
const copyJournal = (from: string, to: string): void => {
  removeJournal(to);
  copyFileSync(from, to);
  const fd = openSync(to, "r+");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
};

const removeJournal = (path: string): void => {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(path + suffix, { force: true });
};

/**
 * Time from opening a runtime to every interrupted run classified. Each measurement works on a
 * fresh copy of the fixture, because recovery writes to the journal it recovers.
 */
const measure = async (fixture: string, work: string | null, expected: Expected): Promise<Timing> => {
  // The last measurement on a fixture may use it in place: saves copying a large log.
  if (work) copyJournal(fixture, work);
  const path = work ?? fixture;
  const openMark = usageMark();
  const t0 = performance.now();
  // Recovery on open runs exactly `recover()`; calling it apart splits open cost from classification.
  const runtime = await openRuntime({
    store: path,
    agents: [benchAgent],
    tools: [noopTool],
    recovery: { onOpen: false },
  });
  const t1 = performance.now();
  const open = openMark();
  const classifyMark = usageMark();
  const report = await runtime.recover();
  const t2 = performance.now();
  const classify = classifyMark();
  const results = await report.done;
  const t3 = performance.now();
  await runtime.close();
  removeJournal(path);
  const resumedOk = results.filter((r) => r.status === "completed").length;
  const wanted = expected.interrupted - expected.held;
  if (
    report.interrupted.length !== expected.interrupted ||
    report.held.length !== expected.held ||
    report.resumed.length !== wanted ||
    resumedOk !== wanted ||
    report.needsAttention.length > 0
  ) {
    throw new Error(
      `recovery classified ${report.interrupted.length} interrupted, ${report.held.length} held, ${report.resumed.length} resumed (${resumedOk} completed), ${report.needsAttention.length} needing attention; the fixture has ${expected.interrupted} interrupted of which ${expected.held} held`,
    );
  }
  return { openMs: t1 - t0, classifyMs: t2 - t1, totalMs: t2 - t0, settleMs: t3 - t2, open, classify };
};

const describe = (timings: ReadonlyArray<Timing>, expected: Expected): string => {
  const m = (pick: (t: Timing) => number | null) => {
    const values = timings.map(pick).filter((v): v is number => v !== null);
    return values.length ? round(median(values)) : "n/a";
  };
  const open = `open ${m((t) => t.openMs)} ms (cpu ${m((t) => t.open.cpuMs)} ms, read ${m((t) => t.open.readMiB)} MiB)`;
  const classify = `classify ${m((t) => t.classifyMs)} ms (cpu ${m((t) => t.classify.cpuMs)} ms, read ${m((t) => t.classify.readMiB)} MiB, written ${m((t) => t.classify.writtenMiB)} MiB)`;
  const runs = `${expected.interrupted} interrupted: ${expected.held} held, ${expected.interrupted - expected.held} resumed (re-executions settled ${m((t) => t.settleMs)} ms later)`;
  return `${open} + ${classify}; ${runs}`;
};

const formatCount = (n: number): string =>
  n >= 1_000_000 && n % 1_000_000 === 0
    ? `${n / 1_000_000}M`
    : n >= 1000 && n % 1000 === 0
      ? `${n / 1000}k`
      : String(n);

/** 4. Recovery: cost against active runs, and against the size of the log. */
export const recoverySection: Section = {
  name: "recovery",
  async run({ options, temp, logs, floor }) {
    const [small, large] = options.quick ? [100, 500] : [1000, 10_000];
    const fillerEvents = options.quick ? 40_000 : 1_000_000;
    const folder = temp.folder("recovery");
    const stride = large / small;
    // Alternate held and resumable runs in blocks of `stride`, so the evenly spread subset kept for
    // the small scenario (every stride-th run) is half held too.
    const isHeld = (n: number) => Math.floor(n / stride) % 2 === 0;
    const heldAmong = (count: number, pick: (k: number) => number) =>
      Array.from({ length: count }, (_, k) => pick(k)).filter(isHeld).length;

    const plain = new Map<number, { path: string; expected: Expected }>();
    for (const count of [small, large]) {
      const path = join(folder, `plain-${count}.db`);
      progress("recovery", `writing ${count} interrupted runs`);
      await writeRecoveryFixture(path, { interrupted: count, fillerEvents: 0, isHeld });
      plain.set(count, { path, expected: { interrupted: count, held: heldAmong(count, (k) => k) } });
    }

    // One filler log, written once (it is the slow part): the large scenario uses it as is, the small
    // one a copy where every interrupted run but each stride-th is stopped.
    const withFiller = new Map<number, { path: string; expected: Expected }>();
    const base = join(folder, `filler-${large}.db`);
    const started = performance.now();
    const written = await writeRecoveryFixture(base, {
      interrupted: large,
      fillerEvents,
      isHeld,
      onProgress: throttled("recovery", `writing ${formatCount(fillerEvents)} finished events (runs)`, 5000),
    });
    const writeSeconds = (performance.now() - started) / 1000;
    progress(
      "recovery",
      `filler log: ${written.totalEvents.toLocaleString("en-US")} events, ${round(statSync(base).size / 2 ** 20)} MiB, written in ${round(writeSeconds)} s`,
    );
    withFiller.set(large, { path: base, expected: { interrupted: large, held: written.held } });
    // The audit section reads the same log: it is measured on copies only, never in place.
    logs.set("filler", { path: base, events: written.totalEvents });
    const trimmed = join(folder, `filler-${small}.db`);
    copyJournal(base, trimmed);
    const kept = await stopInterruptedRuns(trimmed, large, (n) => n % stride === 0);
    withFiller.set(small, {
      path: trimmed,
      expected: { interrupted: kept, held: heldAmong(kept, (k) => k * stride) },
    });

    let measurements = 0;
    const repetitions = (count: number) => (count === small ? (options.quick ? 2 : 3) : 1);
    const timings = new Map<string, Timing[]>();
    // The single-row floor commit, sampled between the measurements: per_run is compared with it.
    const floorSamples: number[] = [];
    for (const count of [small, large]) {
      for (let rep = 0; rep < repetitions(count); rep++) {
        // Alternating with and without filler keeps the growth ratio a side-by-side comparison.
        for (const [label, fixtures] of [
          ["plain", plain],
          ["filler", withFiller],
        ] as const) {
          const fixture = fixtures.get(count)!;
          const key = `${label}-${count}`;
          const last = rep === repetitions(count) - 1 && fixture.path !== base;
          const work = last ? null : join(folder, `work-${measurements++}.db`);
          const timing = await measure(fixture.path, work, fixture.expected);
          timings.set(key, [...(timings.get(key) ?? []), timing]);
          floorSamples.push(...floor.single(40));
          progress(
            "recovery",
            `${count} interrupted runs${label === "filler" ? ` + ${formatCount(fillerEvents)} finished events` : ""}: ${round(timing.totalMs)} ms (open ${round(timing.openMs)} ms; classify cpu ${round(timing.classify.cpuMs)} ms, read ${timing.classify.readMiB} MiB)`,
          );
        }
      }
    }

    const metrics: Metric[] = [];
    const series: Series[] = [
      { chart: "recovery", label: "interrupted runs only", points: [] },
      { chart: "recovery", label: `+ ${formatCount(fillerEvents)} finished events`, points: [] },
    ];
    const cpu = (ts: ReadonlyArray<Timing>) => median(ts.map((t) => t.open.cpuMs + t.classify.cpuMs));
    for (const count of [small, large]) {
      const plainT = timings.get(`plain-${count}`)!;
      const fillerT = timings.get(`filler-${count}`)!;
      const p = spreadOf(plainT.map((t) => t.totalMs));
      const f = spreadOf(fillerT.map((t) => t.totalMs));
      const spread = (s: typeof p) =>
        s.n > 1 ? { spread: { n: s.n, p95: round(s.p95), min: round(s.min), max: round(s.max) } } : {};
      (series[0]!.points as Array<[number, number]>).push([count, p.median]);
      (series[1]!.points as Array<[number, number]>).push([count, f.median]);
      metrics.push(
        figure({
          name: `recovery.runs_${formatCount(count)}`,
          value: round(p.median),
          unit: "ms",
          ...spread(p),
          note: describe(plainT, plain.get(count)!.expected),
        }),
        figure({
          name: `recovery.runs_${formatCount(count)}.filler_${formatCount(fillerEvents)}`,
          value: round(f.median),
          unit: "ms",
          ...spread(f),
          note: describe(fillerT, withFiller.get(count)!.expected),
        }),
        targeted(
          {
            name: `recovery.runs_${formatCount(count)}.growth`,
            value: round(f.median / p.median),
            unit: "×",
            ratio: round(f.median / p.median),
            note: `recovery with ${formatCount(fillerEvents)} finished events over recovery without them`,
          },
          "<=",
          1.2,
        ),
        figure({
          name: `recovery.runs_${formatCount(count)}.growth_cpu`,
          value: round(cpu(fillerT) / cpu(plainT)),
          unit: "×",
          ratio: round(cpu(fillerT) / cpu(plainT)),
          note: "the same ratio in CPU time (open + classify), which a busy neighbour disturbs less than wall time",
        }),
      );
    }
    const largeT = timings.get(`plain-${large}`)!;
    const perRun = (median(largeT.map((t) => t.classifyMs)) * 1000) / large;
    const floorMedian = median(floorSamples);
    metrics.push(
      targeted(
        {
          name: "recovery.per_run",
          value: round(perRun),
          unit: "µs/run",
          ratio: round(perRun / floorMedian),
          note: `classification time per interrupted run at ${formatCount(large)} runs (no filler); ratio in single-row floor commits (median ${round(floorMedian)} µs, sampled between the measurements)`,
        },
        "<=",
        4,
      ),
    );
    // Resumed runs re-execute while the pass goes on: what the pass leaves to them shifts between
    // the two windows, so the time until every resumed run has finished is shown beside it.
    const untilSettled = (median(largeT.map((t) => t.classifyMs + t.settleMs)) * 1000) / large;
    metrics.push(
      figure({
        name: "recovery.per_run.until_settled",
        value: round(untilSettled),
        unit: "µs/run",
        ratio: round(untilSettled / floorMedian),
        note: `from recover() until every resumed run has finished re-executing, per interrupted run at ${formatCount(large)} runs (half held, half resumed); ratio in the same floor commits`,
      }),
    );
    // What opening adds after a machine crash (decision 0008): the whole-file check, timed alone.
    const checked = new Database(base, { readonly: true });
    try {
      const mark = usageMark();
      const t0 = performance.now();
      const result = checked.prepare("PRAGMA quick_check").all() as Array<Record<string, unknown>>;
      const ms = performance.now() - t0;
      const usage = mark();
      metrics.push(
        figure({
          name: `recovery.integrity_check.filler_${formatCount(fillerEvents)}`,
          value: round(ms),
          unit: "ms",
          note: `PRAGMA quick_check over the ${round(statSync(base).size / 2 ** 20)} MiB log with ${formatCount(fillerEvents)} finished events (read ${usage.readMiB} MiB, result ${String(Object.values(result[0] ?? {})[0])}): paid when opening only after the machine went down with the journal open, so not in the recovery figures above`,
        }),
      );
    } finally {
      checked.close();
    }
    return { metrics, series };
  },
};
