import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { type RecordedEvent, scheduleStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { Engine } from "../../src/runtime/engine.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { correctTick, tickSchedules, upsertSchedule } from "../../src/runtime/schedules.js";
import { checkSchedule } from "../../torture/check-waits.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

/**
 * The race of two workers at one schedule version (decision 0060, "the race of two workers"),
 * provoked step by step: the losing worker is held between its read of the schedule (and its
 * version re-read) and its admission, while the winner records the tick otherwise; then it admits
 * the tick's run, its `schedule.ticked` is refused on the version, and it corrects the record.
 */
const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const gates = new Map<string, Promise<void>>();
const opened = new Map<string, () => void>();
const gate = (key: string): void => {
  gates.set(key, new Promise<void>((resolve) => opened.set(key, resolve)));
};
const open = (key: string): void => opened.get(key)?.();

const mark = defineTool({
  name: "mark",
  args: Schema.Struct({ inputId: Schema.String }),
  run: async ({ inputId }) => {
    await gates.get(inputId);
    return inputId;
  },
});

const job = defineAgent({
  name: "job",
  version: "1",
  run: async (turn) => turn.tool(mark, { inputId: turn.inputId }),
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

/**
 * The real journal, held once at the worker's `activeRun` read of the schedule's chat (the first
 * thing a tick pass does after deciding to admit, past its version re-read) until released. Every
 * call goes to the real journal; nothing is answered in its place.
 */
const holding = (journal: Journal) => {
  let armed = false;
  let reached: () => void = () => undefined;
  let released: Promise<void> = Promise.resolve();
  const proxy = new Proxy(journal, {
    get(target, prop) {
      if (prop === "activeRun")
        return async (chatId: string) => {
          if (armed && chatId === "schedule-s") {
            armed = false;
            reached();
            await released;
          }
          return target.activeRun(chatId);
        };
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const arm = () => {
    armed = true;
    let release: () => void = () => undefined;
    released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const at = new Promise<void>((resolve) => {
      reached = resolve;
    });
    return { reached: at, release };
  };
  return { journal: proxy, arm };
};

const engineList: Engine[] = [];
afterEach(async () => {
  for (const resolve of opened.values()) resolve();
  opened.clear();
  gates.clear();
  await Promise.all(engineList.splice(0).map((e) => e.close()));
});

let ids = 0;
const engineWith = (journal: Journal, workerId: string): Engine => {
  const engine = new Engine({
    journal,
    agents: [job],
    tools: [mark],
    secrets: {},
    workerId,
    leaseMs: 5_000,
    recoveryConcurrency: 2,
    newRunId: () => `run-${workerId}-${++ids}`,
    isWorkerDead: () => false,
  });
  engineList.push(engine);
  return engine;
};

const T0 = Date.UTC(2026, 0, 5, 12, 0, 0);
const at = (ms: number) => new Date(ms).toISOString();
const tick = (k: number) => at(T0 + k * 10_000);

const settled = async (engine: Engine): Promise<void> => {
  for (let i = 0; i < 400 && (await engine.journal.activeRun("schedule-s")) !== null; i++)
    await new Promise((r) => setTimeout(r, 25));
};

const allEvents = async (engine: Engine): Promise<RecordedEvent[]> => {
  const events: RecordedEvent[] = [];
  for (let after = 0; ; ) {
    const page = await engine.journal.readAll({ after, limit: 500 });
    events.push(...page);
    if (page.length < 500) return events;
    after = page.at(-1)!.position;
  }
};

/** Two workers on one journal: `loser` held at will, `winner` as it is. */
const pair = async (store: string) => {
  const held = holding(await openStore(store));
  const loser = engineWith(held.journal, "loser");
  const winner = engineWith(await openStore(store), "winner");
  return { loser, winner, arm: held.arm };
};

/** What the stream, the projection, the audit and the torture's check say after the race. */
const afterRace = async (engine: Engine) => {
  const stream = (await engine.journal.readStream(scheduleStreamId("s"))).map((e) => e.event);
  const runs = (await engine.runs()).filter((r) => r.chatId === "schedule-s");
  const audit = await auditJournal(engine.journal);
  const check = checkSchedule(await allEvents(engine), { signals: [] });
  return { stream, runs, row: await engine.schedules.get("s"), audit, check };
};

describe.each(engines)("the race of two workers at one schedule version, on %s", (_name, storeOf) => {
  it("a tick recorded skipped by one worker while the other admitted its run is corrected to admitted", async () => {
    const { loser, winner, arm } = await pair(await storeOf());
    await upsertSchedule(winner, { id: "s", everyMs: 10_000, agent: "job", input: {} }, () => T0);
    // Tick 1's run keeps the chat busy.
    gate(`s@${tick(1)}`);
    await tickSchedules(winner, T0 + 10_050);
    // The loser reads tick 2 due and decides to admit it; held before it looks at the chat.
    const hold = arm();
    const losing = tickSchedules(loser, T0 + 20_050);
    await hold.reached;
    // The winner reads the same version, finds tick 1's run active and records tick 2 skipped.
    await tickSchedules(winner, T0 + 20_050);
    // Tick 1's run ends; the loser goes on, finds the chat free, admits tick 2's run.
    open(`s@${tick(1)}`);
    await settled(winner);
    hold.release();
    expect(await losing).toBe(1);
    await settled(winner);

    const { stream, runs, row, audit, check } = await afterRace(winner);
    const run2 = runs.find((r) => r.inputId === `s@${tick(2)}`);
    expect(run2).toBeDefined();
    expect(runs).toHaveLength(2);
    expect(stream.filter((e) => e.type !== "schedule.upserted")).toMatchObject([
      { type: "schedule.ticked", tickAt: tick(1), outcome: "admitted", by: "winner" },
      { type: "schedule.ticked", tickAt: tick(2), outcome: "skipped", by: "winner" },
      {
        type: "schedule.tick-corrected",
        tickAt: tick(2),
        inputId: `s@${tick(2)}`,
        outcome: "admitted",
        admittedRunId: run2!.runId,
        was: "skipped",
        by: "loser",
      },
    ]);
    expect(row?.ticks).toEqual({ admitted: 2, queued: 0, skipped: 0, missed: 0 });
    expect(row?.lastTick).toMatchObject({
      tickAt: tick(2),
      outcome: "admitted",
      runId: run2!.runId,
      corrected: true,
    });
    expect(row?.nextDueAt).toBe(tick(3));
    expect(audit.findings).toEqual([]);
    expect(check.problems).toEqual([]);
  });

  it("a tick recorded missed (catch-up none, a late clock) while the other admitted its run is corrected", async () => {
    const { loser, winner, arm } = await pair(await storeOf());
    await upsertSchedule(
      winner,
      { id: "s", everyMs: 10_000, agent: "job", input: {}, catchUp: "none" },
      () => T0,
    );
    const hold = arm();
    const losing = tickSchedules(loser, T0 + 10_050);
    await hold.reached;
    // The winner's clock is 7 s later: tick 1 is late by more than half its period, recorded missed.
    await tickSchedules(winner, T0 + 17_000);
    hold.release();
    expect(await losing).toBe(1);
    await settled(winner);

    const { stream, runs, row, audit, check } = await afterRace(winner);
    expect(runs.map((r) => r.inputId)).toEqual([`s@${tick(1)}`]);
    expect(stream.filter((e) => e.type !== "schedule.upserted")).toMatchObject([
      { type: "schedule.ticked", tickAt: tick(1), outcome: "missed", by: "winner" },
      { type: "schedule.tick-corrected", tickAt: tick(1), outcome: "admitted", was: "missed", by: "loser" },
    ]);
    expect(row?.ticks).toEqual({ admitted: 1, queued: 0, skipped: 0, missed: 0 });
    expect(audit.findings).toEqual([]);
    expect(check.problems).toEqual([]);
  });

  it("a tick passed over by the other worker's later tick (clocks apart), its run admitted, gets its record", async () => {
    const { loser, winner, arm } = await pair(await storeOf());
    await upsertSchedule(winner, { id: "s", everyMs: 10_000, agent: "job", input: {} }, () => T0);
    const hold = arm();
    const losing = tickSchedules(loser, T0 + 10_050);
    await hold.reached;
    // The winner's clock is 20 s ahead: it catches up to tick 3 (ticks 1 and 2 passed over).
    await tickSchedules(winner, T0 + 30_050);
    await settled(winner);
    hold.release();
    expect(await losing).toBe(1);
    await settled(winner);

    const { stream, runs, row, audit, check } = await afterRace(winner);
    const run1 = runs.find((r) => r.inputId === `s@${tick(1)}`);
    expect(runs.map((r) => r.inputId).sort()).toEqual([`s@${tick(1)}`, `s@${tick(3)}`]);
    expect(stream.filter((e) => e.type !== "schedule.upserted")).toMatchObject([
      { type: "schedule.ticked", tickAt: tick(3), outcome: "admitted", missed: 2, by: "winner" },
      {
        type: "schedule.tick-corrected",
        tickAt: tick(1),
        outcome: "admitted",
        admittedRunId: run1!.runId,
        was: "passedOver",
        by: "loser",
      },
    ]);
    expect(row?.ticks).toEqual({ admitted: 2, queued: 0, skipped: 0, missed: 1 });
    // The last tick is still tick 3's; the next one follows it.
    expect(row?.lastTick).toMatchObject({ tickAt: tick(3), outcome: "admitted" });
    expect(row?.nextDueAt).toBe(tick(4));
    expect(audit.findings).toEqual([]);
    expect(check.problems).toEqual([]);
  });
});

describe.each(engines)("the audit of ticks against admissions, on %s", (_name, storeOf) => {
  it("finds a run admitted for a tick recorded skipped, and a record naming a run not admitted for it; a correction clears the first", async () => {
    const store = await storeOf();
    const a = engineWith(await openStore(store), "a");
    await upsertSchedule(a, { id: "s", everyMs: 10_000, agent: "job", input: {} }, () => T0);
    gate(`s@${tick(1)}`);
    await tickSchedules(a, T0 + 10_050);
    await tickSchedules(a, T0 + 20_050);
    open(`s@${tick(1)}`);
    await settled(a);
    // What the losing worker of the race leaves when it dies before correcting: tick 2's run.
    const orphan = await a.submit({
      chatId: "schedule-s",
      inputId: `s@${tick(2)}`,
      agent: "job",
      content: {},
    });
    await orphan.result;
    const before = (await auditJournal(a.journal)).findings;
    expect(before).toMatchObject([
      {
        kind: "schedule-mismatch",
        streamId: scheduleStreamId("s"),
        detail: expect.stringMatching(
          new RegExp(`run ${orphan.runId} was admitted for tick ${tick(2)}, which is recorded skipped`),
        ),
      },
    ]);
    // Its correction (what the worker does when it lives) makes the journal audit clean.
    expect(await correctTick(a, "s", tick(2))).toBe(true);
    expect(await correctTick(a, "s", tick(2))).toBe(false);
    expect((await auditJournal(a.journal)).findings).toEqual([]);
    expect((await a.schedules.get("s"))?.ticks).toEqual({ admitted: 2, queued: 0, skipped: 0, missed: 0 });
    // A tick recorded admitted naming a run never admitted for it.
    const head = (await a.journal.streamHead(scheduleStreamId("s")))!.version;
    await a.journal.append({
      streamId: scheduleStreamId("s"),
      expectedVersion: head,
      events: [
        {
          type: "schedule.ticked",
          scheduleId: "s",
          tickAt: tick(3),
          inputId: `s@${tick(3)}`,
          outcome: "admitted",
          admittedRunId: "run-nobody",
          missed: 0,
          nextDueAt: tick(4),
          by: "hand",
        },
      ],
    });
    expect((await auditJournal(a.journal)).findings).toMatchObject([
      {
        kind: "schedule-mismatch",
        detail: expect.stringMatching(/tick .* names run run-nobody, which was not admitted for it/),
      },
    ]);
  });
});
