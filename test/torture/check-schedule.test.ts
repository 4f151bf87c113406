import { describe, expect, it } from "vitest";
import type { RecordedEvent } from "../../src/events/index.js";
import { checkSchedule } from "../../torture/check-waits.js";

/**
 * The schedule kind's check on hand-made journals (decision 0064): each law it enforces is seen to
 * fail here; the torture slices show it passing on real runs.
 */
type Ev = Record<string, unknown>;
const at = (s: number) => new Date(Date.UTC(2026, 11, 5, 3, 0, 0) + s * 1000).toISOString();
const ms = (s: number) => Date.parse(at(s));

const upserted = (overrides: Ev = {}): Ev => ({
  type: "schedule.upserted",
  scheduleId: "s",
  everyMs: 1000,
  timezone: "UTC",
  agent: "torture-scheduled",
  input: {},
  overlap: "skip",
  catchUp: "latest",
  paused: false,
  nextDueAt: at(1),
  ...overrides,
});
const ticked = (tick: number, outcome: string, extra: Ev = {}): Ev => ({
  type: "schedule.ticked",
  scheduleId: "s",
  tickAt: at(tick),
  inputId: `s@${at(tick)}`,
  outcome,
  missed: 0,
  nextDueAt: at(tick + 1),
  by: "w1",
  ...extra,
});
const admitted = (runId: string, tick: number): Ev => ({
  type: "run.admitted",
  runId,
  chatId: "schedule-s",
  inputId: `s@${at(tick)}`,
  inputDigest: "d",
  agent: { name: "torture-scheduled", version: "1" },
  machine: "run@2",
  input: {},
});
const done = (runId: string): Ev => ({ type: "run.completed", runId, output: {}, outputDigest: "d" });
const paused: Ev = { type: "schedule.paused", scheduleId: "s", by: "torture-harness" };

type Entry = readonly [string, Ev, number];
const S = "schedule-s";
/** A journal of [streamId, event, seconds after 03:00:00] entries, versions counted per stream. */
const log = (...entries: ReadonlyArray<Entry>): RecordedEvent[] => {
  const versions = new Map<string, number>();
  return entries.map(([streamId, event, s]) => {
    const version = (versions.get(streamId) ?? 0) + 1;
    versions.set(streamId, version);
    return { streamId, version, recordedAt: at(s), event } as unknown as RecordedEvent;
  });
};

/** Ticks 1 and 2 admitted (runs a, b), tick 3 skipped while b runs, paused at 6 s; up 0–6 s. */
const good = (): Entry[] => [
  [S, upserted(), 0.2],
  ["run-a", admitted("a", 1), 1.2],
  [S, ticked(1, "admitted", { admittedRunId: "a" }), 1.3],
  ["run-a", done("a"), 1.8],
  ["run-b", admitted("b", 2), 2.2],
  [S, ticked(2, "admitted", { admittedRunId: "b" }), 2.3],
  [S, ticked(3, "skipped", { activeRunId: "b" }), 3.3],
  ["run-b", done("b"), 3.5],
  [S, ticked(4, "admitted", { admittedRunId: "c" }), 4.3],
  ["run-c", admitted("c", 4), 4.25],
  ["run-c", done("c"), 4.6],
  [S, paused, 6],
];
const UP = { signals: [], alive: [{ from: ms(0), to: ms(6) }] };

describe("the torture's schedule check", () => {
  it("passes ticks recorded once, one run each, a skip while a run was active, none lost", () => {
    const check = checkSchedule(log(...good()), UP);
    expect(check.problems).toEqual([]);
    expect(check.counts).toMatchObject({ schedules: 1, ticks: 4, admitted: 3, skipped: 1, owed: 3, runs: 3 });
  });

  it("passes a catch-up after downtime: the latest tick admitted, the ones passed over counted missed", () => {
    const events = log(
      [S, upserted(), 0.2],
      ["run-a", admitted("a", 1), 1.2],
      [S, ticked(1, "admitted", { admittedRunId: "a" }), 1.3],
      ["run-a", done("a"), 1.5],
      ["run-d", admitted("d", 4), 4.7],
      [S, ticked(4, "admitted", { admittedRunId: "d", missed: 2 }), 4.8],
      ["run-d", done("d"), 5],
      [S, paused, 7],
    );
    const check = checkSchedule(events, {
      signals: [],
      alive: [
        { from: 0, to: ms(2) },
        { from: ms(4.6), to: ms(7) },
      ],
    });
    expect(check.problems).toEqual([]);
    expect(check.counts).toMatchObject({ missedTicks: 2 });
  });

  it("finds the ticks passed over miscounted", () => {
    const events = log([S, upserted(), 0.2], [S, ticked(4, "skipped", { missed: 1 }), 4.8], [S, paused, 5]);
    expect(checkSchedule(events, { signals: [] }).problems.join("\n")).toMatch(
      /1 missed recorded, 3 ticks passed over/,
    );
  });

  it("finds a tick recorded twice", () => {
    const entries = good();
    entries.splice(6, 0, [S, ticked(2, "admitted", { admittedRunId: "b" }), 2.4]);
    expect(checkSchedule(log(...entries), UP).problems.join("\n")).toMatch(/tick .*:02\.000Z recorded again/);
  });

  it("finds a tick admitted twice (two runs under one input id)", () => {
    const entries = good();
    entries.splice(5, 0, ["run-b2", admitted("b2", 2), 2.25], ["run-b2", done("b2"), 2.26]);
    expect(checkSchedule(log(...entries), UP).problems.join("\n")).toMatch(/admitted 2 times \(b, b2\)/);
  });

  it("counts a tick passed over while a process was up (a late pass, counted missed), not as lost", () => {
    const entries = good()
      .filter(([, e]) => !(e.type === "schedule.ticked" && e.tickAt === at(3)))
      .map(
        ([st, e, t]): Entry =>
          e.type === "schedule.ticked" && e.tickAt === at(4) ? [st, { ...e, missed: 1 }, t] : [st, e, t],
      );
    const check = checkSchedule(log(...entries), UP);
    expect(check.problems).toEqual([]);
    expect(check.counts).toMatchObject({ owed: 3, passedOverWhileUp: 1 });
  });

  it("finds a tick lost while a process was up (no record, none after it)", () => {
    const entries = good().filter(
      ([st, e]) =>
        !(e.type === "schedule.ticked" && (e.tickAt === at(3) || e.tickAt === at(4))) && st !== "run-c",
    );
    const problems = checkSchedule(log(...entries), UP).problems.join("\n");
    expect(problems).toMatch(/tick .*:03\.000Z lost/);
    // Not lost when no process was up then.
    const down = { signals: [], alive: [{ from: ms(0), to: ms(2) }] };
    expect(checkSchedule(log(...entries), down).problems.join("\n")).not.toMatch(/lost/);
  });

  it("owes no tick after the harness began winding the schedules down, and every tick before it", () => {
    // Ticks 1 and 2 recorded; the passes lag, and the harness pauses at 8 s: ticks 3–5 have no record.
    const entries: Entry[] = [
      [S, upserted(), 0.2],
      ["run-a", admitted("a", 1), 1.2],
      [S, ticked(1, "admitted", { admittedRunId: "a" }), 1.3],
      ["run-a", done("a"), 1.8],
      [S, ticked(2, "skipped", { activeRunId: "x" }), 2.3],
      [S, paused, 8],
    ];
    const up = { signals: [], alive: [{ from: ms(0), to: ms(8) }] };
    // Without the moment, the pause cut off a late pass and its ticks count as lost.
    expect(checkSchedule(log(...entries), up).problems.join("\n")).toMatch(
      /:03\.000Z lost[\s\S]*:04\.000Z lost[\s\S]*:05\.000Z lost/,
    );
    // Winding down from 2.5 s (every tick up to then covered): the later ticks are not owed.
    const windDown = checkSchedule(log(...entries), { ...up, ticksOwedUntil: ms(2.5) });
    expect(windDown.problems).toEqual([]);
    expect(windDown.counts).toMatchObject({ owed: 2 });
    // A tick before the moment with no record is lost all the same.
    const late = checkSchedule(log(...entries), { ...up, ticksOwedUntil: ms(3.2) }).problems.join("\n");
    expect(late).toMatch(/:03\.000Z lost/);
    expect(late).not.toMatch(/:04\.000Z/);
  });

  it("finds two runs of an overlap-skip schedule active at once", () => {
    const entries = good().filter(([s, e]) => !(s === "run-a" && e.type === "run.completed"));
    entries.push(["run-a", done("a"), 6.5]);
    expect(checkSchedule(log(...entries), UP).problems.join("\n")).toMatch(
      /overlap skip, yet b .* admitted while a .* was active/,
    );
  });

  it("finds a run of a schedule's chat with no tick record, and a run recorded as skipped", () => {
    const entries = good();
    entries.push(["run-x", admitted("x", 3), 3.6], ["run-x", done("x"), 3.7]);
    const problems = checkSchedule(log(...entries), UP).problems.join("\n");
    expect(problems).toMatch(/run x for tick s@.*:03\.000Z, recorded skipped/);
  });

  it("takes a correction as the tick's record (decision 0060), and finds one twice, one of an admitted tick, one naming another run", () => {
    const corrected = (tick: number, runId: string, was: string, extra: Ev = {}): Ev => ({
      type: "schedule.tick-corrected",
      scheduleId: "s",
      tickAt: at(tick),
      inputId: `s@${at(tick)}`,
      outcome: "admitted",
      admittedRunId: runId,
      was,
      by: "w2",
      ...extra,
    });
    // Tick 3 recorded skipped (b was active); b ended, the other worker's run x of tick 3 stands.
    const raced = (): Entry[] => {
      const entries = good().filter(([st]) => st !== "run-c");
      return [
        ...entries.filter(([, e]) => !(e.type === "schedule.ticked" && e.tickAt === at(4))),
        ["run-x", admitted("x", 3), 3.6],
        [S, corrected(3, "x", "skipped"), 3.65],
        ["run-x", done("x"), 3.7],
      ];
    };
    const clean = checkSchedule(log(...raced()), { signals: [] });
    expect(clean.problems).toEqual([]);
    expect(clean.counts).toMatchObject({ corrected: 1 });
    expect(
      checkSchedule(log(...raced(), [S, corrected(3, "x", "skipped"), 3.8]), { signals: [] }).problems.join(
        "\n",
      ),
    ).toMatch(/corrected twice/);
    expect(
      checkSchedule(log(...good(), [S, corrected(2, "b", "skipped"), 6.5]), UP).problems.join("\n"),
    ).toMatch(/corrected, it was recorded admitted/);
    const wrongRun = raced().map(
      ([st, e, t]): Entry =>
        e.type === "schedule.tick-corrected"
          ? [st, { ...e, admittedRunId: "zz", was: "missed" }, t]
          : [st, e, t],
    );
    const problems = checkSchedule(log(...wrongRun), { signals: [] }).problems.join("\n");
    expect(problems).toMatch(/corrected to run zz, its run is x/);
    expect(problems).toMatch(/corrected as once missed, recorded skipped/);
  });

  it("finds a tick recorded admitted with another run, a missed tick under catch-up latest, a run not finished", () => {
    const entries = good().map(
      ([s, e, t]): Entry =>
        e.type === "schedule.ticked" && e.tickAt === at(1)
          ? [s, { ...e, admittedRunId: "zz" }, t]
          : e.type === "schedule.ticked" && e.tickAt === at(3)
            ? [s, { ...e, outcome: "missed", activeRunId: undefined }, t]
            : [s, e, t],
    );
    const problems = checkSchedule(
      log(...entries.filter(([s, e]) => !(s === "run-c" && e.type === "run.completed"))),
      UP,
    ).problems.join("\n");
    expect(problems).toMatch(/recorded admitted as zz, its run is a/);
    expect(problems).toMatch(/recorded missed, the schedule catches up the latest/);
    expect(problems).toMatch(/the run c of tick .* did not finish/);
  });

  it("finds a queued tick with no run that is not in the chat's queue, or still queued with no held run", () => {
    const held: Ev = { type: "run.held", runId: "a", reason: "decision-needed" };
    const queuedInput: Ev = { type: "input.queued", chatId: "schedule-s", inputId: `s@${at(2)}` };
    const base = (): Entry[] => [
      [S, upserted({ overlap: "queue" }), 0.2],
      ["run-a", admitted("a", 1), 1.2],
      [S, ticked(1, "admitted", { admittedRunId: "a" }), 1.3],
      [S, ticked(2, "queued"), 2.3],
      [S, paused, 2.5],
    ];
    expect(checkSchedule(log(...base(), ["run-a", held, 1.5]), { signals: [] }).problems.join("\n")).toMatch(
      /recorded queued, not in the chat's queue and no run \(lost\)/,
    );
    expect(
      checkSchedule(log(...base(), ["chat-schedule-s", queuedInput, 2.25], ["run-a", done("a"), 1.5]), {
        signals: [],
      }).problems.join("\n"),
    ).toMatch(/still queued at the end, no held run/);
    const fine = checkSchedule(log(...base(), ["chat-schedule-s", queuedInput, 2.25], ["run-a", held, 1.5]), {
      signals: [],
    });
    expect(fine.problems).toEqual([]);
    expect(fine.counts).toMatchObject({ queued: 1, queuedBehindHeld: 1 });
  });

  it("finds a run for a tick before the pending one with no tick record; one at or after it, left when paused, is pending", () => {
    const orphan = good();
    orphan.push(["run-x", admitted("x", 2.5), 3.6], ["run-x", done("x"), 3.7]);
    expect(checkSchedule(log(...orphan), UP).problems.join("\n")).toMatch(
      /run x for tick .*, no tick record of it/,
    );
    const pending = good();
    pending.splice(pending.length - 1, 0, ["run-y", admitted("y", 7), 5.9], ["run-y", done("y"), 5.95]);
    const check = checkSchedule(log(...pending), UP);
    expect(check.problems).toEqual([]);
    expect(check.counts).toMatchObject({ pendingAtEnd: 1 });
  });
});
