import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { queueStreamId, scheduleStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool, InvalidInput, ScheduleNotFound } from "../../src/index.js";
import { Engine } from "../../src/runtime/engine.js";
import { nextTickAfter, tickSchedules, upsertSchedule } from "../../src/runtime/schedules.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** The agent of every tick: it waits at the gate of its input id when one is set. */
const gates = new Map<string, Promise<void>>();
const opened = new Map<string, () => void>();
const gate = (key: string): void => {
  gates.set(key, new Promise<void>((resolve) => opened.set(key, resolve)));
};
const ran: string[] = [];

const mark = defineTool({
  name: "mark",
  args: Schema.Struct({ inputId: Schema.String }),
  run: async ({ inputId }) => {
    await gates.get(inputId);
    ran.push(inputId);
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

/** Engines opened by a test; closed after it. Their wake loops are never started: the test drives the ticks. */
const open: Engine[] = [];
afterEach(async () => {
  for (const [key, resolve] of opened) {
    resolve();
    opened.delete(key);
  }
  await Promise.all(open.splice(0).map((e) => e.close()));
  ran.length = 0;
});

let ids = 0;
const engineOn = async (store: string, workerId = `w${++ids}`): Promise<Engine> => {
  const engine = new Engine({
    journal: await openStore(store),
    agents: [job],
    tools: [mark],
    secrets: {},
    workerId,
    leaseMs: 5_000,
    recoveryConcurrency: 2,
    newRunId: () => `run-${workerId}-${++ids}`,
    isWorkerDead: () => false,
  });
  open.push(engine);
  return engine;
};

/** A fixed, even start: ticks of a 10-second schedule fall at T0 + k·10 s. */
const T0 = Date.UTC(2026, 0, 5, 12, 0, 0);
const every10 = { id: "s", everyMs: 10_000, agent: "job", input: { n: 1 } } as const;
const at = (ms: number) => new Date(ms).toISOString();

const scheduleRuns = async (engine: Engine, scheduleId = "s") =>
  (await engine.runs()).filter((r) => r.chatId === `schedule-${scheduleId}`);

const tickEvents = async (engine: Engine, scheduleId = "s") =>
  (await engine.journal.readStream(scheduleStreamId(scheduleId)))
    .map((e) => e.event)
    .filter((e) => e.type === "schedule.ticked");

/** Wait until the schedule's chat has no active run (whichever engine runs it). */
const settled = async (engine: Engine, scheduleId = "s"): Promise<void> => {
  for (let i = 0; i < 200 && (await engine.journal.activeRun(`schedule-${scheduleId}`)) !== null; i++)
    await new Promise((r) => setTimeout(r, 25));
};

describe.each(engines)("schedules on %s", (_name, storeOf) => {
  it("two workers handling the same ticks at once admit one run per tick and record each tick once", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    const b = await engineOn(store);
    await upsertSchedule(a, every10, () => T0);
    for (let k = 1; k <= 8; k++) {
      const now = T0 + k * 10_000 + 50;
      await Promise.all([tickSchedules(a, now), tickSchedules(b, now)]);
      await settled(a);
    }
    const runs = await scheduleRuns(a);
    expect(runs.map((r) => r.inputId).sort()).toEqual(
      Array.from({ length: 8 }, (_, i) => `s@${at(T0 + (i + 1) * 10_000)}`),
    );
    const ticked = await tickEvents(a);
    expect(ticked.map((e) => e.tickAt)).toEqual(
      Array.from({ length: 8 }, (_, i) => at(T0 + (i + 1) * 10_000)),
    );
    expect(ticked.every((e) => e.outcome === "admitted" && e.missed === 0)).toBe(true);
    expect(ran).toHaveLength(8);
    expect((await a.schedules.get("s"))?.nextDueAt).toBe(at(T0 + 9 * 10_000));
  });

  it("a run admitted for a tick whose record was lost (a crash between the two) is recorded, never admitted again", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    await upsertSchedule(a, { ...every10, catchUp: "none" }, () => T0);
    // What a worker killed after the admission and before `schedule.ticked` leaves behind.
    const handle = await a.submit({
      chatId: "schedule-s",
      inputId: `s@${at(T0 + 10_000)}`,
      agent: "job",
      content: { n: 1 },
    });
    await handle.result;
    const b = await engineOn(store);
    // Much later, and with catch-up "none": the tick that has its run is recorded as admitted.
    await tickSchedules(b, T0 + 95_000);
    const [first] = await tickEvents(b);
    expect(first).toMatchObject({
      tickAt: at(T0 + 10_000),
      outcome: "admitted",
      admittedRunId: handle.runId,
    });
    expect(await scheduleRuns(b)).toHaveLength(1);
  });

  it("a run admitted for a caught-up tick whose record was lost is recorded with its tick, then the catch-up goes on from it (decision 0064)", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    await upsertSchedule(a, { ...every10, catchUp: "latest" }, () => T0);
    await settled(a);
    // A worker caught up to the tick at +40 s, admitted its run and died before `schedule.ticked`.
    const handle = await a.submit({
      chatId: "schedule-s",
      inputId: `s@${at(T0 + 40_000)}`,
      agent: "job",
      content: { n: 1 },
    });
    await handle.result;
    const b = await engineOn(store);
    await tickSchedules(b, T0 + 75_000);
    await settled(b);
    await tickSchedules(b, T0 + 75_000);
    await settled(b);
    const ticked = await tickEvents(b);
    expect(ticked).toMatchObject([
      { tickAt: at(T0 + 40_000), outcome: "admitted", admittedRunId: handle.runId, missed: 3 },
      { tickAt: at(T0 + 70_000), outcome: "admitted", missed: 2, nextDueAt: at(T0 + 80_000) },
    ]);
    expect((await scheduleRuns(b)).map((r) => r.inputId).sort()).toEqual([
      `s@${at(T0 + 40_000)}`,
      `s@${at(T0 + 70_000)}`,
    ]);
  });

  it("catch-up latest admits only the most recent missed tick and counts the others", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    await upsertSchedule(a, { ...every10, catchUp: "latest" }, () => T0);
    await tickSchedules(a, T0 + 55_000);
    await settled(a);
    const ticked = await tickEvents(a);
    expect(ticked).toHaveLength(1);
    expect(ticked[0]).toMatchObject({
      tickAt: at(T0 + 50_000),
      outcome: "admitted",
      missed: 4,
      nextDueAt: at(T0 + 60_000),
    });
    expect((await scheduleRuns(a)).map((r) => r.inputId)).toEqual([`s@${at(T0 + 50_000)}`]);
    expect((await a.schedules.get("s"))?.ticks).toEqual({ admitted: 1, queued: 0, skipped: 0, missed: 4 });
  });

  it("catch-up none admits no missed tick and waits for the next", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    await upsertSchedule(a, { ...every10, catchUp: "none" }, () => T0);
    // Later than half a period after the latest tick: the runtime was down at its time.
    await tickSchedules(a, T0 + 57_000);
    const ticked = await tickEvents(a);
    expect(ticked).toHaveLength(1);
    expect(ticked[0]).toMatchObject({
      tickAt: at(T0 + 50_000),
      outcome: "missed",
      missed: 4,
      nextDueAt: at(T0 + 60_000),
    });
    expect(await scheduleRuns(a)).toHaveLength(0);
    // Nothing more before the next tick; the next one on time is admitted.
    await tickSchedules(a, T0 + 59_000);
    expect(await tickEvents(a)).toHaveLength(1);
    await tickSchedules(a, T0 + 60_300);
    await settled(a);
    expect((await tickEvents(a)).at(-1)).toMatchObject({
      tickAt: at(T0 + 60_000),
      outcome: "admitted",
      missed: 0,
    });
    expect((await scheduleRuns(a)).map((r) => r.inputId)).toEqual([`s@${at(T0 + 60_000)}`]);
  });

  it("overlap skip skips a tick while the previous run is active, and records which run it waited for", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    await upsertSchedule(a, { ...every10, overlap: "skip" }, () => T0);
    const first = `s@${at(T0 + 10_000)}`;
    gate(first);
    await tickSchedules(a, T0 + 10_010);
    const [running] = await scheduleRuns(a);
    await tickSchedules(a, T0 + 20_010);
    expect((await tickEvents(a)).at(-1)).toMatchObject({
      tickAt: at(T0 + 20_000),
      outcome: "skipped",
      activeRunId: running!.runId,
    });
    opened.get(first)!();
    await settled(a);
    await tickSchedules(a, T0 + 30_010);
    await settled(a);
    expect((await scheduleRuns(a)).map((r) => r.inputId).sort()).toEqual([first, `s@${at(T0 + 30_000)}`]);
    expect((await a.schedules.get("s"))?.lastTick?.outcome).toBe("admitted");
  });

  it("overlap queue queues a tick behind the active run, admitted once it ends", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    await upsertSchedule(a, { ...every10, overlap: "queue" }, () => T0);
    const first = `s@${at(T0 + 10_000)}`;
    const second = `s@${at(T0 + 20_000)}`;
    gate(first);
    await tickSchedules(a, T0 + 10_010);
    await tickSchedules(a, T0 + 20_010);
    expect((await tickEvents(a)).at(-1)).toMatchObject({ tickAt: at(T0 + 20_000), outcome: "queued" });
    const queue = (await a.journal.readStream(queueStreamId("schedule-s"))).map((e) => e.event.type);
    expect(queue).toEqual(["input.queued"]);
    opened.get(first)!();
    for (let i = 0; i < 100 && ran.length < 2; i++) {
      await settled(a);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(ran).toEqual([first, second]);
    expect((await scheduleRuns(a)).map((r) => r.inputId).sort()).toEqual([first, second]);
  });

  it("overlap queue: a caught-up tick queued by a worker that died before recording it is recorded queued, never queued again under a later tick (decision 0064)", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    await upsertSchedule(a, { ...every10, overlap: "queue" }, () => T0);
    const first = `s@${at(T0 + 10_000)}`;
    const orphan = `s@${at(T0 + 40_000)}`;
    gate(first);
    await tickSchedules(a, T0 + 10_010);
    // A worker caught up to +40 s, queued its input behind the active run, and died unrecorded.
    await a.submit({
      chatId: "schedule-s",
      inputId: orphan,
      agent: "job",
      content: { n: 1 },
      whenBusy: "queue",
    });
    const b = await engineOn(store);
    // Later than the next tick (+50 s): the tick queued before is recorded, not a second one queued.
    await tickSchedules(b, T0 + 55_000);
    expect((await tickEvents(b)).at(-1)).toMatchObject({
      tickAt: at(T0 + 40_000),
      outcome: "queued",
      missed: 2,
    });
    const queue = (await b.journal.readStream(queueStreamId("schedule-s"))).map((e) => e.event.type);
    expect(queue).toEqual(["input.queued"]);
    opened.get(first)!();
  });

  it("a bad cron pattern, an unknown time zone, or both timings at once are refused, saying what was wrong, with nothing written", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    const refused = async (spec: Parameters<typeof upsertSchedule>[1], words: RegExp) => {
      const error = await upsertSchedule(a, spec).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidInput);
      expect(String((error as Error).message)).toMatch(words);
    };
    await refused(
      { id: "bad", cron: "61 * * * *", agent: "job" },
      /schedule bad .*cron pattern "61 \* \* \* \*" is not valid.*minute/,
    );
    await refused(
      { id: "bad", cron: "0 9 * * *", timezone: "Mars/Olympus", agent: "job" },
      /time zone "Mars\/Olympus" is not an IANA time zone/,
    );
    await refused(
      { id: "bad", cron: "0 9 * * *", everyMs: 5_000, agent: "job" },
      /either `cron` or `everyMs`, not both/,
    );
    await refused({ id: "bad", agent: "job" }, /give `cron`/);
    await refused({ id: "bad", everyMs: 10, agent: "job" }, /everyMs/);
    await refused({ id: "no spaces", everyMs: 5_000, agent: "job" }, /schedule id/);
    expect(await a.schedules.list({ includeDeleted: true })).toEqual([]);
    expect(await a.journal.readStream(scheduleStreamId("bad"))).toEqual([]);
  });

  it("a cron schedule's ticks are read in its time zone (croner), daylight saving included", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    const summer = Date.UTC(2026, 6, 1, 0, 0, 0);
    const winter = Date.UTC(2026, 11, 1, 0, 0, 0);
    const ny = { cron: "0 9 * * *", timezone: "America/New_York" };
    expect(at(nextTickAfter(ny, summer)!)).toBe("2026-07-01T13:00:00.000Z");
    expect(at(nextTickAfter(ny, winter)!)).toBe("2026-12-01T14:00:00.000Z");
    expect(at(nextTickAfter({ cron: "0 9 * * *", timezone: "Asia/Tokyo" }, summer)!)).toBe(
      "2026-07-02T00:00:00.000Z",
    );
    const { schedule } = await upsertSchedule(a, { id: "ny", ...ny, agent: "job" }, () => summer);
    expect(schedule.nextDueAt).toBe("2026-07-01T13:00:00.000Z");
    // The tick is its local 09:00: the run's input id names it in UTC.
    await tickSchedules(a, Date.parse("2026-07-01T13:00:00.200Z"));
    await settled(a, "ny");
    expect((await scheduleRuns(a, "ny")).map((r) => r.inputId)).toEqual(["ny@2026-07-01T13:00:00.000Z"]);
    expect((await a.schedules.get("ny"))?.nextDueAt).toBe("2026-07-02T13:00:00.000Z");
  });

  it("pause stops the ticks, resume starts from the next tick after now, delete ends them; a repeated change writes nothing", async () => {
    const store = await storeOf();
    const a = await engineOn(store);
    expect((await upsertSchedule(a, every10, () => T0)).changed).toBe(true);
    // An application upserting the same schedule at every start changes nothing and keeps the next tick.
    expect((await upsertSchedule(a, every10, () => T0 + 5_000)).changed).toBe(false);
    expect(await a.journal.dueSchedules(T0 + 10_000, 10)).toEqual([
      { scheduleId: "s", dueAtMs: T0 + 10_000 },
    ]);
    expect((await a.schedules.pause("s", { by: "ops" })).schedule.status).toBe("paused");
    expect((await a.schedules.pause("s")).changed).toBe(false);
    expect(await a.journal.dueSchedules(T0 + 100_000, 10)).toEqual([]);
    await tickSchedules(a, T0 + 100_000);
    expect(await tickEvents(a)).toEqual([]);
    const resumed = await a.schedules.resume("s");
    expect(resumed.schedule.status).toBe("active");
    expect(Date.parse(resumed.schedule.nextDueAt!)).toBeGreaterThan(Date.now());
    expect((await a.schedules.delete("s")).schedule.status).toBe("deleted");
    expect((await a.schedules.delete("s")).changed).toBe(false);
    expect(await a.schedules.list()).toEqual([]);
    expect(await a.journal.dueSchedules(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
    await expect(a.schedules.pause("s")).rejects.toBeInstanceOf(ScheduleNotFound);
    await expect(a.schedules.resume("nope")).rejects.toBeInstanceOf(ScheduleNotFound);
    expect((await a.schedules.list({ includeDeleted: true })).map((s) => s.status)).toEqual(["deleted"]);
  });
});

describe("the audit of schedule streams", () => {
  it("a clean schedule audits clean; a tick recorded twice, or while paused, is a schedule-mismatch", async () => {
    const store = join(tempDir(), "journal.db");
    const a = await engineOn(store);
    await upsertSchedule(a, every10, () => T0);
    await tickSchedules(a, T0 + 10_050);
    await settled(a);
    const { auditJournal } = await import("../../src/runtime/audit.js");
    expect((await auditJournal(a.journal)).findings).toEqual([]);
    const [ticked] = await tickEvents(a);
    const version = (await a.journal.streamHead(scheduleStreamId("s")))!.version;
    // The same tick recorded again (what a second worker without the expected version would write).
    await a.journal.append({ streamId: scheduleStreamId("s"), expectedVersion: version, events: [ticked!] });
    await a.schedules.pause("s");
    await a.journal.append({
      streamId: scheduleStreamId("s"),
      expectedVersion: version + 2,
      events: [
        { ...ticked!, tickAt: at(T0 + 20_000), inputId: `s@${at(T0 + 20_000)}`, nextDueAt: at(T0 + 30_000) },
      ],
    });
    const findings = (await auditJournal(a.journal)).findings.filter((f) => f.kind === "schedule-mismatch");
    expect(findings.map((f) => f.detail)).toEqual([
      `tick ${at(T0 + 10_000)} recorded again, or after a later tick`,
      `tick ${at(T0 + 20_000)} recorded while the schedule was paused`,
    ]);
  });
});
