/** Fixes from a review of schedules (decision 0060): catch-up cost, a pause racing a tick, starvation, masked `by`. */
import { join } from "node:path";
import { Cron } from "croner";
import { Schema } from "effect";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { scheduleStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool } from "../../src/index.js";
import { Engine } from "../../src/runtime/engine.js";
import { tickSchedules, upsertSchedule } from "../../src/runtime/schedules.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** The agent of every tick: it waits at the gate of its input id when one is set (none is set here). */
const gates = new Map<string, Promise<void>>();
const opened = new Map<string, () => void>();
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

/** A newer version of the same agent. */
const job2 = defineAgent({ ...job, version: "2" });

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

const SECRET = "ops-token-5f3a9c1e77";
let ids = 0;
const engineOn = async (
  store: string,
  workerId = `w${++ids}`,
  agents: ReadonlyArray<typeof job> = [job],
): Promise<Engine> => {
  const engine = new Engine({
    journal: await openStore(store),
    agents,
    tools: [mark],
    secrets: { OPS_TOKEN: SECRET },
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

const DAY = 86_400_000;

describe.each(engines)("schedule fixes on %s", (_name, storeOf) => {
  it("a per-second cron schedule 2 days behind is caught up without a walk over every tick", async () => {
    const engine = await engineOn(await storeOf());
    await upsertSchedule(engine, { id: "s", cron: "* * * * * *", agent: "job", input: { n: 1 } }, () => T0);
    // Count croner's steps (a spy would keep every call and its Cron: a counter only).
    const nextRun = Cron.prototype.nextRun;
    let steps = 0;
    Cron.prototype.nextRun = function (this: Cron, ...args: Parameters<Cron["nextRun"]>) {
      steps++;
      return nextRun.apply(this, args);
    };
    const started = performance.now();
    const now = T0 + 2 * DAY + 50;
    try {
      expect(await tickSchedules(engine, now)).toBe(1);
    } finally {
      Cron.prototype.nextRun = nextRun;
    }
    const took = performance.now() - started;
    // 172 800 ticks passed over; the latest is found directly and at most 1 000 are counted.
    expect(steps).toBeLessThan(2_100);
    expect(took).toBeLessThan(2_000);
    const [ticked] = await tickEvents(engine);
    expect(ticked).toMatchObject({ tickAt: at(T0 + 2 * DAY), outcome: "admitted", missed: 1_000 });
    expect(ticked!.nextDueAt).toBe(at(T0 + 2 * DAY + 1_000));
    await settled(engine);
  });

  it("a per-second period 2 days behind is caught up by arithmetic, its missed ticks counted exactly", async () => {
    const engine = await engineOn(await storeOf());
    await upsertSchedule(engine, { id: "s", everyMs: 1_000, agent: "job", input: { n: 1 } }, () => T0);
    const now = T0 + 2 * DAY + 50;
    const started = performance.now();
    expect(await tickSchedules(engine, now)).toBe(1);
    expect(performance.now() - started).toBeLessThan(2_000);
    const [ticked] = await tickEvents(engine);
    // Ticks T0+1s … T0+2d: the latest is admitted, the 172 799 before it missed.
    expect(ticked).toMatchObject({ tickAt: at(T0 + 2 * DAY), outcome: "admitted", missed: 2 * 86_400 - 1 });
    expect(ticked!.nextDueAt).toBe(at(T0 + 2 * DAY + 1_000));
    await settled(engine);
  });

  it("a cron catch-up lands on the latest tick not after now, in its time zone", async () => {
    const engine = await engineOn(await storeOf());
    // 09:30 on weekdays in New York; recorded next tick Monday 5 Jan 2026, handled on Thursday 8 Jan at 20:00 UTC.
    await upsertSchedule(
      engine,
      { id: "s", cron: "30 9 * * 1-5", timezone: "America/New_York", agent: "job", input: { n: 1 } },
      () => Date.UTC(2026, 0, 5, 0, 0, 0),
    );
    expect(await tickSchedules(engine, Date.UTC(2026, 0, 8, 20, 0, 0))).toBe(1);
    const [ticked] = await tickEvents(engine);
    expect(ticked).toMatchObject({ tickAt: "2026-01-08T14:30:00.000Z", outcome: "admitted", missed: 3 });
    expect(ticked!.nextDueAt).toBe("2026-01-09T14:30:00.000Z");
    await settled(engine);
  });

  it("a pause committed after a tick read its schedule starts no run and records nothing", async () => {
    const engine = await engineOn(await storeOf());
    await upsertSchedule(engine, every10, () => T0);
    // The pause commits right after the tick pass read the schedule stream (as another process would).
    let paused = false;
    const journal = new Proxy(engine.journal, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        if (prop !== "readStream") return value.bind(target);
        return async (...args: unknown[]) => {
          const read = await value.apply(target, args);
          if (!paused && args[0] === scheduleStreamId("s")) {
            paused = true;
            await engine.schedules.pause("s", { by: "ops" });
          }
          return read;
        };
      },
    });
    const racing = Object.create(engine, { journal: { value: journal } }) as Engine;
    expect(await tickSchedules(racing, T0 + 10_050)).toBe(0);
    expect(paused).toBe(true);
    expect(await scheduleRuns(engine)).toEqual([]);
    expect(await tickEvents(engine)).toEqual([]);
    expect((await engine.schedules.get("s"))?.status).toBe("paused");
  });

  it("due schedules of an agent no runtime here has do not starve the others", async () => {
    const engine = await engineOn(await storeOf());
    // 300 schedules of a missing agent, all due before the one this runtime has.
    for (let i = 0; i < 300; i++)
      await upsertSchedule(engine, { ...every10, id: `ghost-${i}`, agent: "ghost" }, () => T0 - 60_000);
    await upsertSchedule(engine, every10, () => T0);
    expect(await tickSchedules(engine, T0 + 10_050)).toBe(1);
    expect((await tickEvents(engine)).map((e) => e.tickAt)).toEqual([at(T0 + 10_000)]);
    await settled(engine);
  });

  it("who changed a schedule is masked before it is written", async () => {
    const engine = await engineOn(await storeOf());
    const by = `ops with ${SECRET}`;
    await upsertSchedule(engine, { ...every10, by }, () => T0);
    await engine.schedules.pause("s", { by });
    await engine.schedules.resume("s", { by });
    await engine.schedules.delete("s", { by });
    const events = (await engine.journal.readStream(scheduleStreamId("s"))).map((e) => e.event);
    expect(events.map((e) => e.type)).toEqual([
      "schedule.upserted",
      "schedule.paused",
      "schedule.resumed",
      "schedule.deleted",
    ]);
    const stored = JSON.stringify(events);
    expect(stored).not.toContain(SECRET);
    expect(events.every((e) => "by" in e && String(e.by).startsWith("ops with "))).toBe(true);
  });

  it("a schedule pinned to an agent version admits its ticks with it, and only runtimes with it tick it", async () => {
    const store = await storeOf();
    const both = await engineOn(store, "both", [job, job2]);
    const onlyNew = await engineOn(store, "new", [job2]);
    await expect(upsertSchedule(both, { ...every10, agentVersion: " " }, () => T0)).rejects.toThrow(
      /agentVersion/,
    );
    await upsertSchedule(both, { ...every10, agentVersion: "1" }, () => T0);
    expect((await both.schedules.get("s"))?.agentVersion).toBe("1");
    // The same definition again changes nothing; another version is a change.
    expect((await upsertSchedule(both, { ...every10, agentVersion: "1" }, () => T0)).changed).toBe(false);
    expect(await tickSchedules(onlyNew, T0 + 10_050)).toBe(0);
    expect(await tickSchedules(both, T0 + 10_050)).toBe(1);
    await settled(both);
    expect((await scheduleRuns(both)).map((r) => r.agent)).toEqual(["job@1"]);
    // Unpinned: the newest version of the worker that admits the tick.
    await upsertSchedule(both, every10, () => T0);
    expect((await both.schedules.get("s"))?.agentVersion).toBeUndefined();
    expect(await tickSchedules(both, T0 + 20_050)).toBe(1);
    await settled(both);
    expect((await scheduleRuns(both)).map((r) => r.agent).sort()).toEqual(["job@1", "job@2"]);
  });
});
