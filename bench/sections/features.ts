import { join } from "node:path";
import { openRuntime } from "../../src/index.js";
import { figure, type Metric, targeted } from "../lib/metric.js";
import { progress } from "../lib/progress.js";
import type { Section } from "../lib/section.js";
import { round, spreadOf } from "../lib/stats.js";
import {
  declaredNoopTool,
  type FeaturesInput,
  featuresAgent,
  noopTool,
  setFeatureSink,
  sleeperAgent,
} from "../workload.js";

/** Calls per run, as in the sequential section. */
const CALLS_PER_RUN = 100;
/**
 * The most CPU a waiting run may cost, in µs per second of waiting: 1% of one core. A waiting run
 * holds no execution (decision 0050); what a process spends meanwhile is the runtime's own wake
 * poll (a read of the due index every 300 ms) and timers, which are counted here, and nothing that
 * grows with the wait. 1% leaves room for those polls and for the clock's granularity while still
 * failing on anything that spins (a poll at 1 ms, a busy loop, a timer re-armed at once).
 */
const WAIT_CPU_LIMIT = 10_000;
/** How much longer than the measured window the run sleeps: time for it to park first. */
const PARK_MARGIN_MS = 1_500;

const cpuMicrosSince = (start: NodeJS.CpuUsage): number => {
  const { user, system } = process.cpuUsage(start);
  return user + system;
};

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** CPU time of this process over `ms` of doing nothing but waiting: µs, and the seconds it lasted. */
const idleFor = async (ms: number): Promise<{ cpu: number; seconds: number }> => {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await pause(ms);
  return { cpu: cpuMicrosSince(cpu), seconds: (performance.now() - started) / 1000 };
};

/**
 * The figures of the ordinary-day features (issue 37 item 6, DESIGN §13): a sequential call with a
 * retry policy and a timeout declared that never come into play, against the same call without
 * them, interleaved run by run; and the CPU a process spends while a run waits on a durable timer,
 * against the same process idle for as long.
 */
export const featuresSection: Section = {
  name: "features",
  async run({ options, temp }) {
    const runs = options.quick ? 8 : 32;
    const waitRounds = options.quick ? 1 : 3;
    const waitMs = options.quick ? 1_000 : 2_000;
    const folder = temp.folder("features");

    // 1. A/B: the same journaled no-op call, with and without retry + timeoutMs declared.
    const runtime = await openRuntime({
      store: join(folder, "calls.db"),
      agents: [featuresAgent],
      tools: [noopTool, declaredNoopTool],
      recovery: { onOpen: false },
    });
    const plain: number[] = [];
    const declared: number[] = [];
    const cpu = { plain: 0, declared: 0 };
    try {
      const submit = async (chatId: string, input: FeaturesInput): Promise<void> => {
        const handle = await runtime.submit({
          chatId,
          inputId: "input",
          agent: featuresAgent.name,
          content: input,
        });
        const result = await handle.result;
        if (result.status !== "completed")
          throw new Error(`bench run ${handle.runId} ended ${result.status}: ${JSON.stringify(result)}`);
      };
      setFeatureSink(null);
      await submit("warm-up", { calls: 40, declaredFirst: false });
      setFeatureSink((micros, cpuMicros, isDeclared) => {
        (isDeclared ? declared : plain).push(micros);
        cpu[isDeclared ? "declared" : "plain"] += cpuMicros;
      });
      // Call by call, the two alternate within each run; which comes first alternates run by run.
      for (let r = 0; r < runs; r++)
        await submit(`features-${r}`, { calls: CALLS_PER_RUN, declaredFirst: r % 2 === 1 });
    } finally {
      setFeatureSink(null);
      await runtime.close();
    }
    progress("features", `${plain.length + declared.length} calls in ${runs} runs; now the waits`);

    // 2. A run waiting on a durable timer, against the process idle (no runtime open) and the
    // runtime open with nothing to do, each for the same time, in every round.
    let bare = { cpu: 0, seconds: 0 };
    let idle = { cpu: 0, seconds: 0 };
    let waiting = { cpu: 0, seconds: 0 };
    let executingWhileWaiting = 0;
    const wakeDelays: number[] = [];
    const add = (a: typeof bare, b: typeof bare) => ({ cpu: a.cpu + b.cpu, seconds: a.seconds + b.seconds });
    for (let r = 0; r < waitRounds; r++) {
      await pause(200);
      bare = add(bare, await idleFor(waitMs));
      const sleeping = await openRuntime({
        store: join(folder, `wait-${r}.db`),
        agents: [sleeperAgent],
        recovery: { onOpen: false },
      });
      try {
        await pause(200);
        idle = add(idle, await idleFor(waitMs));
        const sleepMs = waitMs + PARK_MARGIN_MS;
        const submitted = Date.now();
        const handle = await sleeping.submit({
          chatId: `sleeper-${r}`,
          inputId: "input",
          agent: sleeperAgent.name,
          content: { ms: sleepMs },
        });
        // The result a submit gives for a run that parks: `waiting`, with its due time.
        const parked = await handle.result;
        if (parked.status !== "waiting")
          throw new Error(
            `the sleeper run ended ${parked.status} before it waited: ${JSON.stringify(parked)}`,
          );
        if (parked.wakesAt === null) throw new Error("the sleeper run waits with no due time");
        const due = new Date(parked.wakesAt).getTime();
        const window = due - Date.now() - 300;
        if (window < waitMs / 2) throw new Error(`the sleeper took ${Date.now() - submitted} ms to park`);
        waiting = add(waiting, await idleFor(Math.min(waitMs, window)));
        executingWhileWaiting = Math.max(executingWhileWaiting, sleeping.executing);
        for (;;) {
          const row = await sleeping.run(handle.runId);
          if (row?.status === "completed") break;
          if (row && row.status !== "waiting" && row.status !== "running")
            throw new Error(`the sleeper run ended ${row.status}`);
          await pause(5);
        }
        wakeDelays.push(Date.now() - due);
      } finally {
        await sleeping.close();
      }
    }

    const a = spreadOf(plain);
    const b = spreadOf(declared);
    const range = (s: typeof a) => ({ n: s.n, p95: round(s.p95), min: round(s.min), max: round(s.max) });
    const perSecond = (x: typeof bare) => x.cpu / x.seconds;
    const waitCpu = perSecond(waiting) - perSecond(bare);
    const metrics: Metric[] = [
      figure({
        name: "features.call.plain",
        value: round(a.median),
        unit: "µs/call",
        spread: range(a),
        note: `median of ${a.n} sequential no-op tool calls, ${CALLS_PER_RUN} per run, without a retry policy or a timeout, alternating call by call with those of the next figure`,
      }),
      targeted(
        {
          name: "features.call.retry_timeout",
          value: round(b.median),
          unit: "µs/call",
          ratio: round(b.median / a.median),
          spread: range(b),
          note: `median of ${b.n} of the same calls to a tool declaring retry { attempts: 3 } and timeoutMs 30000 (neither comes into play); ratio to features.call.plain, the two alternating call by call in the same runs`,
        },
        "<=",
        1.05,
      ),
      figure({
        name: "features.call.retry_timeout.cpu",
        value: round(cpu.declared / b.n),
        unit: "µs CPU/call",
        ratio: round(cpu.declared / b.n / (cpu.plain / a.n)),
        note: `user + system CPU of the process per call (read around each call); ratio to the plain calls' ${round(cpu.plain / a.n)} µs`,
      }),
      targeted(
        {
          name: "features.wait.cpu",
          value: round(waitCpu),
          unit: "µs CPU/s",
          ratio: null,
          note: `CPU of the process per second while one run waits on turn.sleep (${waitRounds} × ${waitMs} ms, runtime.executing ${executingWhileWaiting}), the runtime's wake poll and timers included, minus the same process idle with no runtime open (${round(perSecond(bare))} µs/s); ≤ ${WAIT_CPU_LIMIT} is 1% of one core`,
        },
        "<=",
        WAIT_CPU_LIMIT,
        "value",
      ),
      figure({
        name: "features.wait.runtime_idle.cpu",
        value: round(perSecond(idle) - perSecond(bare)),
        unit: "µs CPU/s",
        note: `the same runtime open with no run at all, minus the idle process: the share of features.wait.cpu the waiting run does not cause (the wake poll)`,
      }),
      figure({
        name: "features.wait.wake_delay",
        value: round(Math.max(...wakeDelays)),
        unit: "ms",
        note: `the longest time, over ${wakeDelays.length} sleeps, from the timer's recorded due time to the run's row saying completed (read every 5 ms)`,
      }),
    ];
    return { metrics };
  },
};
