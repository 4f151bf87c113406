import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import type { RecordedEvent } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime, type Runtime, type RuntimeOptions } from "../../src/index.js";
import { RunLaws } from "../../src/runtime/audit/laws.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const SLEEP_WORKER = join(import.meta.dirname, "..", "support", "sleep-worker.ts");

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Every effect that ran, in order: a sleep that was waited twice or a step run twice shows here. */
const effects: string[] = [];

const note = defineTool({
  name: "note",
  args: Schema.Struct({ step: Schema.String }),
  run: async ({ step }) => {
    effects.push(step);
    return step;
  },
});

const napper = defineAgent({
  name: "napper",
  version: "1",
  run: async (turn, input: { ms: number }) => {
    await turn.tool(note, { step: "before" });
    await turn.sleep(input.ms);
    await turn.tool(note, { step: "after" });
    return "rested";
  },
});

/** A sleep between two calls started together: the one before it settles first, the one after waits for the wake. */
const together = defineAgent({
  name: "together",
  version: "1",
  run: async (turn) => {
    await turn.all([
      () => turn.tool(note, { step: "a" }),
      () => turn.sleep(200),
      () => turn.tool(note, { step: "b" }),
    ] as const);
    return "both";
  },
});

/** A parent whose child sleeps longer than three leases: the parent waits for it, nothing in doubt. */
const sleepyChild = defineAgent({
  name: "sleepy-child",
  version: "1",
  run: async (turn, input: { ms: number }) => {
    await turn.sleep(input.ms);
    return "child rested";
  },
});
const parentOfSleeper = defineAgent({
  name: "parent-of-sleeper",
  version: "1",
  run: async (turn, input: { ms: number }) => turn.child("sleepy-child", input),
});

const engines: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["libSQL", async () => join(tempDir(), "journal.db")],
  [
    "PostgreSQL",
    async () => {
      await requirePg();
      return pgUrl(schemas.fresh());
    },
  ],
];

const open = (store: string, extra: Partial<RuntimeOptions> = {}): Promise<Runtime> =>
  openRuntime({ store, agents: [napper, together], tools: [note], tracing: false, ...extra });

/** Wait (polling the journal) until `runId` ends; a woken run is executed by the wake loop. */
const ended = async (runtime: Runtime, runId: string) => {
  for (;;) {
    const row = await runtime.run(runId);
    if (row && ["completed", "failed", "stopped", "cancelled", "held"].includes(row.status))
      return runtime.wait(runId);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe.each(engines)("durable sleep (%s)", (_name, storeOf) => {
  it("a parent waits for a child that sleeps longer than three leases: the child call is never left in doubt", async () => {
    const runtime = await open(await storeOf(), {
      agents: [napper, together, sleepyChild, parentOfSleeper],
      recovery: { leaseMs: 3_000 },
    });
    try {
      const handle = await runtime.submit({
        chatId: "parent",
        inputId: "p1",
        agent: "parent-of-sleeper",
        content: { ms: 10_000 },
      });
      const result = await handle.result;
      expect(result).toMatchObject({ status: "completed", output: "child rested" });
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  }, 60_000);

  it("a sleeping run parks, holds no execution, and is woken once after its due time", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const startedAt = Date.now();
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "napper",
        content: { ms: 400 },
      });
      const parked = await handle.result;
      expect(parked.status).toBe("waiting");
      expect(runtime.executing).toBe(0);
      expect((await runtime.run(handle.runId))?.status).toBe("waiting");
      const result = await ended(runtime, handle.runId);
      expect(result).toMatchObject({ status: "completed", output: "rested" });
      const events = await runtime.events(handle.runId);
      const woken = events.filter((e) => e.event.type === "run.woken");
      expect(woken).toHaveLength(1);
      const w = woken[0]!.event;
      if (w.type !== "run.woken") throw new Error("not woken");
      expect(Date.parse(w.firedAt)).toBeGreaterThanOrEqual(Date.parse(w.dueAt!));
      expect(Date.parse(w.dueAt!)).toBeGreaterThanOrEqual(startedAt + 400);
      // The step before the sleep ran once: the re-execution served it, and the sleep, from the
      // journal — one wait recorded, one wait intent, so the woken execution did not wait again.
      expect(effects).toEqual(["before", "after"]);
      const types = events.map((e) => e.event.type);
      expect(types.filter((t) => t === "run.waiting")).toHaveLength(1);
      expect(events.filter((e) => e.event.type === "call.intended" && e.event.kind === "wait")).toHaveLength(
        1,
      );
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});

const typesOf = (events: ReadonlyArray<RecordedEvent>) => events.map((e) => e.event.type);

describe.each(engines)("a waiting run (%s)", (_name, storeOf) => {
  it("calls started before a sleep settle before the run parks; calls started after it run once it is woken", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "together", content: null });
      expect((await handle.result).status).toBe("waiting");
      expect(effects).toEqual(["a"]);
      expect(await ended(runtime, handle.runId)).toMatchObject({ status: "completed", output: "both" });
      expect(effects).toEqual(["a", "b"]);
      const calls = await runtime.calls(handle.runId);
      expect(calls.map((c) => [c.kind, c.name, c.status])).toEqual([
        ["tool", "note", "completed"],
        ["wait", "sleep", "completed"],
        ["tool", "note", "completed"],
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a run sleeping an hour holds no execution, only its row in the due index; cancel ends it at once", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "napper",
        content: { ms: 3_600_000 },
      });
      const parked = await handle.result;
      expect(parked).toMatchObject({ status: "waiting", wait: "timer" });
      expect(runtime.executing).toBe(0);
      const row = await runtime.run(handle.runId);
      expect(row?.status).toBe("waiting");
      expect(row?.waiting?.dueAt).toBe(parked.status === "waiting" ? parked.wakesAt : "");
      // The due index finds it at its due time, and not before.
      const journal = await openJournal(runtime);
      const dueAt = Date.parse(row!.waiting!.dueAt!);
      expect((await journal.dueWaits(dueAt, 10)).map((w) => w.runId)).toEqual([handle.runId]);
      expect(await journal.dueWaits(dueAt - 1, 10)).toEqual([]);
      const cancelled = await runtime.cancel(handle.runId, { by: "ada", note: "not needed" });
      expect(cancelled).toMatchObject({ accepted: true, status: "cancelled" });
      expect(await runtime.wait(handle.runId)).toMatchObject({ status: "cancelled", by: "ada" });
      expect(await journal.dueWaits(dueAt, 10)).toEqual([]);
      expect(runtime.executing).toBe(0);
      expect(effects).toEqual(["before"]);
      expect((await runtime.audit()).findings).toEqual([]);
      await journal.close();
    } finally {
      await runtime.close();
    }
  });

  it("a waiting run asked to pause keeps waiting, then parks paused when woken; resume serves the sleep", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "napper",
        content: { ms: 300 },
      });
      expect((await handle.result).status).toBe("waiting");
      const paused = await runtime.pause(handle.runId, { by: "ada" });
      expect(paused).toMatchObject({ accepted: true, status: "pause-requested" });
      expect((await runtime.run(handle.runId))?.status).toBe("waiting");
      for (;;) {
        if ((await runtime.run(handle.runId))?.status === "paused") break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(effects).toEqual(["before"]);
      const { result } = await runtime.resume(handle.runId, { by: "ada" });
      expect(await result).toMatchObject({ status: "completed", output: "rested" });
      expect(effects).toEqual(["before", "after"]);
      const types = typesOf(await runtime.events(handle.runId));
      expect(types.filter((t) => t === "run.woken")).toHaveLength(1);
      expect(types.filter((t) => t === "run.waiting")).toHaveLength(1);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});

/** The runtime's journal, opened a second time for the due index (the same store). */
const openJournal = async (runtime: Runtime) => {
  const { openStore } = await import("../../src/adapters/store.js");
  return openStore(runtime.location);
};

/** The run's events once it completed, read by a runtime without agents (it wakes nothing). */
const completedEvents = async (store: string, runId: string): Promise<ReadonlyArray<RecordedEvent>> => {
  const reader = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const row = await reader.run(runId);
      if (row?.status === "completed") return await reader.events(runId);
      if (Date.now() > deadline) throw new Error(`run ${runId} is still ${row?.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await reader.close();
  }
};

const expectWokenOnce = (events: ReadonlyArray<RecordedEvent>) => {
  const woken = events.flatMap((e) => (e.event.type === "run.woken" ? [e.event] : []));
  expect(woken).toHaveLength(1);
  expect(Date.parse(woken[0]!.firedAt)).toBeGreaterThanOrEqual(Date.parse(woken[0]!.dueAt!));
  expect(typesOf(events).at(-1)).toBe("run.completed");
  return woken[0]!;
};

describe("a 2-second sleep survives a SIGKILL", () => {
  it("libSQL: the process is killed while the run waits; reopened, the run wakes after its due time, once, and completes", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const first = startScript(SLEEP_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "submit" });
    await first.waitFor("waiting");
    const runId = String(first.lines.find((l) => l.kind === "waiting")!.runId);
    await first.kill();
    const second = startScript(SLEEP_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "serve" });
    try {
      await second.waitFor("open");
      const events = await completedEvents(store, runId);
      const woken = expectWokenOnce(events);
      expect(woken.by).toBe(String(second.lines.find((l) => l.kind === "open")!.workerId));
      expect(witnessLines(witness)).toEqual(["before", "after"]);
    } finally {
      await second.kill();
    }
    const auditor = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
    try {
      expect((await auditor.audit()).findings).toEqual([]);
    } finally {
      await auditor.close();
    }
  });

  it("PostgreSQL with two workers: the owner is killed while the run waits; exactly one worker wakes it", async () => {
    await requirePg();
    const store = pgUrl(schemas.fresh());
    const witness = join(tempDir(), "witness.txt");
    const first = startScript(SLEEP_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "submit" });
    await first.waitFor("waiting");
    const runId = String(first.lines.find((l) => l.kind === "waiting")!.runId);
    await first.kill();
    const workers = [1, 2].map(() =>
      startScript(SLEEP_WORKER, { HF_DB: store, HF_WITNESS: witness, HF_MODE: "serve" }),
    );
    try {
      await Promise.all(workers.map((w) => w.waitFor("open")));
      const events = await completedEvents(store, runId);
      const woken = expectWokenOnce(events);
      const ids = workers.map((w) => String(w.lines.find((l) => l.kind === "open")!.workerId));
      expect(ids).toContain(woken.by);
      expect(witnessLines(witness)).toEqual(["before", "after"]);
    } finally {
      await Promise.all(workers.map((w) => w.kill()));
    }
    const auditor = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
    try {
      expect((await auditor.audit()).findings).toEqual([]);
    } finally {
      await auditor.close();
    }
  });
});

describe("the audit of waits", () => {
  it("finds a timer fired before its due time, and one fired without a recorded due time (hand-made journals)", async () => {
    effects.length = 0;
    const runtime = await open(join(tempDir(), "journal.db"));
    try {
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "napper",
        content: { ms: 50 },
      });
      const recorded = await completedEvents(runtime.location, handle.runId);
      const check = (log: ReadonlyArray<RecordedEvent>) => {
        const laws = new RunLaws();
        return log.map((r) => laws.check(r.event, r.recordedAt)).filter((b) => b !== null);
      };
      expect(check(recorded)).toEqual([]);
      // The due time an hour after the wake-up the log records.
      const early = recorded.map((r) =>
        r.event.type === "run.waiting" || r.event.type === "run.woken"
          ? {
              ...r,
              event: { ...r.event, dueAt: new Date(Date.parse(r.recordedAt) + 3_600_000).toISOString() },
            }
          : r,
      );
      expect(check(early)).toEqual([
        expect.objectContaining({
          kind: "wake-before-due",
          detail: expect.stringMatching(/woken .* before its due time/),
        }),
      ]);
      // No run.waiting at all: the timer fired with no due time recorded.
      const undue = recorded.filter((r) => r.event.type !== "run.waiting");
      expect(check(undue)).toEqual([expect.objectContaining({ kind: "wake-without-due" })]);
    } finally {
      await runtime.close();
    }
  });
});

describe("the wake pass reads past waits it cannot wake", () => {
  const sleeperOf = (name: string) =>
    defineAgent({
      name,
      version: "1",
      run: async (turn, input: { until: string }) => {
        await turn.sleepUntil(new Date(input.until));
        return `${name} woke`;
      },
    });
  const other = sleeperOf("other-sleeper");
  const mine = sleeperOf("my-sleeper");

  it("70 due waits of an agent no live runtime has do not keep a runtime from waking its own", async () => {
    const store = join(tempDir(), "journal.db");
    const until = new Date(Date.now() + 6_000).toISOString();
    const first = await openRuntime({ store, agents: [other], tools: [], tracing: false });
    try {
      for (let i = 0; i < 70; i++)
        await first.submit({ chatId: `o${i}`, inputId: "i", agent: "other-sleeper", content: { until } });
      for (;;) {
        const waiting = (await first.runs()).filter((r) => r.status === "waiting").length;
        if (waiting === 70) break;
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await first.close();
    }
    // Due after all 70 of the other agent's: the index lists them first.
    const later = new Date(Date.parse(until) + 500).toISOString();
    const second = await openRuntime({ store, agents: [mine], tools: [], tracing: false });
    try {
      const handle = await second.submit({
        chatId: "m",
        inputId: "i",
        agent: "my-sleeper",
        content: { until: later },
      });
      const row = await ended(second, handle.runId);
      expect(row).toMatchObject({ status: "completed", output: "my-sleeper woke" });
      // The other agent's runs were left waiting for a runtime that has it.
      expect((await second.runs()).filter((r) => r.status === "waiting")).toHaveLength(70);
    } finally {
      await second.close();
    }
  }, 120_000);
});
