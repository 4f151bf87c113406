import { Cron } from "croner";
import * as Schema from "effect/Schema";
import {
  type AnyEvent,
  canonicalJson,
  type EventOf,
  type RecordedEvent,
  scheduleChatId,
  scheduleStreamId,
} from "../events/index.js";
import { foldSchedule, type ScheduleRow } from "../projections/index.js";
import { admit } from "./admit.js";
import type { EngineCore } from "./core.js";
import { crashPoint } from "./crash.js";
import { ActiveRunExists, InputConflict, InvalidInput, ScheduleNotFound } from "./errors.js";
import { decodeInput } from "./input.js";
import type { Journal } from "./Journal.js";
import { storedCopy } from "./json.js";
import { queuedInputIds } from "./queue.js";

/** What `runtime.schedules.upsert` takes (DESIGN §13, decision 0060). */
export interface ScheduleSpec {
  /** 1–100 characters: letters, digits, `.`, `_`, `-`; starts with a letter or digit. */
  readonly id: string;
  /** A cron pattern (5 fields, or 6 with seconds first), read in `timezone`. Give this or `everyMs`. */
  readonly cron?: string | undefined;
  /** A tick every so many milliseconds (at least 1000), aligned to the epoch. Give this or `cron`. */
  readonly everyMs?: number | undefined;
  /** The IANA time zone a cron pattern is read in (default `UTC`). */
  readonly timezone?: string | undefined;
  /** The agent each tick's run is for. */
  readonly agent: string;
  /**
   * The agent version every tick is admitted with (as submit's `agentVersion`); only runtimes that
   * have it tick the schedule. Absent: the newest version of the worker that admits the tick.
   */
  readonly agentVersion?: string | undefined;
  /** Each tick's run input (JSON; masked before it is written). */
  readonly input?: unknown;
  /** A tick while the previous run is still active: `skip` it (default, recorded) or `queue` it. */
  readonly overlap?: "skip" | "queue" | undefined;
  /** Ticks missed while no worker ran: admit the `latest` (default) or `none`. */
  readonly catchUp?: "latest" | "none" | undefined;
  /** Make or keep it paused (default: as it is; a new schedule is active). */
  readonly paused?: boolean | undefined;
  /** Who changed it (recorded, sealed). */
  readonly by?: string | undefined;
}

/** What a schedule change did: the schedule now, and whether anything was written. */
export interface ScheduleOutcome {
  readonly schedule: ScheduleRow;
  /** False when the request changed nothing (an upsert of the same schedule, a second pause): nothing was written. */
  readonly changed: boolean;
}

/** A schedule id: safe in a stream name, a chat id, an input id and a URL. */
export const ScheduleId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, {
    message: () =>
      "a schedule id is 1–100 characters of letters, digits, `.`, `_` and `-`, starting with a letter or digit",
  }),
);

const SpecSchema = Schema.Struct({
  id: ScheduleId,
  cron: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200)))),
  everyMs: Schema.optional(Schema.UndefinedOr(Schema.Int.pipe(Schema.between(1000, 366 * 86_400_000)))),
  timezone: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(100)))),
  agent: Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200)),
  agentVersion: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200)))),
  input: Schema.optional(Schema.Unknown),
  overlap: Schema.optional(Schema.UndefinedOr(Schema.Literal("skip", "queue"))),
  catchUp: Schema.optional(Schema.UndefinedOr(Schema.Literal("latest", "none"))),
  paused: Schema.optional(Schema.UndefinedOr(Schema.Boolean)),
  by: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200)))),
});

const ByOptions = Schema.Struct({
  by: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200)))),
});

/** When a schedule ticks: a cron pattern in a time zone, or a fixed period. */
export interface Timing {
  readonly cron?: string | null | undefined;
  readonly everyMs?: number | null | undefined;
  readonly timezone: string;
}

/**
 * Check a timing; throws `InvalidInput` saying what was wrong (a bad pattern, an unknown zone).
 * The pattern is parsed by croner, never by hand.
 */
export const checkTiming = (scheduleId: string, timing: Timing): void => {
  const what = `schedule ${scheduleId}`;
  const hasCron = typeof timing.cron === "string";
  const hasEvery = typeof timing.everyMs === "number";
  if (hasCron === hasEvery)
    throw new InvalidInput({
      what,
      detail: hasCron
        ? "give either `cron` or `everyMs`, not both"
        : "give `cron` (a pattern such as `0 9 * * 1-5`) or `everyMs` (a period in milliseconds, at least 1000)",
    });
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timing.timezone });
  } catch {
    throw new InvalidInput({
      what,
      detail: `time zone ${JSON.stringify(timing.timezone)} is not an IANA time zone name (such as \`Europe/Berlin\`, \`America/New_York\` or \`UTC\`)`,
    });
  }
  if (!hasCron) return;
  let next: Date | null;
  try {
    next = cronOf(timing).nextRun(new Date());
  } catch (error) {
    throw new InvalidInput({
      what,
      detail: `cron pattern ${JSON.stringify(timing.cron)} is not valid: ${error instanceof Error ? error.message : String(error)} (5 fields: minute hour day-of-month month day-of-week; 6 with seconds first)`,
    });
  }
  if (!next)
    throw new InvalidInput({
      what,
      detail: `cron pattern ${JSON.stringify(timing.cron)} never fires again; give a pattern with a future time`,
    });
};

const cronOf = (timing: Timing): Cron =>
  new Cron(timing.cron ?? "", { timezone: timing.timezone, paused: true, mode: "auto" });

/** The first tick strictly after `afterMs` (ms since the epoch); null when a cron pattern never fires again. */
export const nextTickAfter = (timing: Timing, afterMs: number): number | null => {
  if (typeof timing.everyMs === "number")
    return Math.floor(afterMs / timing.everyMs) * timing.everyMs + timing.everyMs;
  return cronOf(timing).nextRun(new Date(afterMs))?.getTime() ?? null;
};

/** Far in the future: the index row of a schedule whose pattern never fires again (years from now). */
const NEVER = Date.UTC(9999, 0, 1);

/**
 * How late a tick may be handled and still count as on time for catch-up `none` (decision 0060): half
 * its period, at least 1 s and at most 60 s. Later, the runtime was down at its time: it is missed.
 */
export const onTimeGraceMs = (tickMs: number, nextMs: number): number =>
  Math.min(60_000, Math.max(1_000, Math.floor((nextMs - tickMs) / 2)));

/**
 * How many of the ticks a catch-up passed over are looked up for a run admitted by a worker that
 * died before recording it (the latest first): a crash and restart spans a few ticks.
 */
const ORPHAN_LOOK_BACK = 64;

/**
 * Ticks of a cron schedule counted at most as missed in one catch-up (decision 0060): the latest tick
 * is found without walking the ones before it; counting them walks at most this many (~70 ms), and a
 * longer outage records this count ("at least"). A period (`everyMs`) is counted exactly.
 */
const MISSED_COUNT_CAP = 1_000;

/** Where a catch-up lands: the latest tick not after now, the tick after it, and the ticks passed over. */
interface CatchUp {
  readonly tickMs: number;
  readonly next: number;
  readonly missed: number;
  /** The last ticks after `dueMs` up to `tickMs` (at most `lookBack`, oldest first, consecutive). */
  readonly passed: ReadonlyArray<number>;
}

/**
 * The latest tick not after `nowMs`, from the recorded tick `dueMs` (not after now), without a walk over
 * every tick in between (decision 0060): a period by arithmetic; a cron pattern by croner's
 * `previousRuns` on one `Cron`, checked by asking for the tick after it.
 */
export const catchUpTo = (timing: Timing, dueMs: number, nowMs: number, lookBack = 1): CatchUp => {
  if (typeof timing.everyMs === "number") {
    const every = timing.everyMs;
    const tickMs = Math.max(dueMs, Math.floor(nowMs / every) * every);
    const passed: number[] = [];
    for (let t = tickMs; t > dueMs && passed.length < lookBack; t -= every) passed.unshift(t);
    return { tickMs, next: tickMs + every, missed: Math.floor((tickMs - dueMs) / every), passed };
  }
  const cron = cronOf(timing);
  const after = (ms: number): number => cron.nextRun(new Date(ms))?.getTime() ?? NEVER;
  let tickMs = dueMs;
  let next = after(tickMs);
  if (next > nowMs) return { tickMs, next, missed: 0, passed: [] };
  // Ticks are whole seconds and croner looks strictly before its reference (milliseconds stripped).
  const latest = cron.previousRuns(1, new Date(Math.floor(nowMs / 1000) * 1000 + 1000))[0]?.getTime();
  if (latest !== undefined && latest > tickMs && latest <= nowMs) {
    tickMs = latest;
    next = after(tickMs);
  }
  // Should croner's answer fall short, walk on a bounded way; the next pass goes on from there.
  for (let steps = 0; next <= nowMs && steps < MISSED_COUNT_CAP; steps++) {
    tickMs = next;
    next = after(tickMs);
  }
  let missed = 0;
  for (let t = dueMs; t < tickMs && missed < MISSED_COUNT_CAP; missed++) t = after(t);
  // The ticks just before the latest (croner's `previousRuns` is strictly before a whole second).
  const before =
    lookBack > 1 ? cron.previousRuns(lookBack - 1, new Date(tickMs)).map((d) => d.getTime()) : [];
  const passed = [...before.filter((t) => t > dueMs).reverse(), tickMs];
  return { tickMs, next, missed, passed };
};

const iso = (ms: number): string => new Date(ms).toISOString();

/** The run input id of a tick: `<scheduleId>@<tick ISO time>` (DESIGN §13). */
export const tickInputId = (scheduleId: string, tickAt: string): string => `${scheduleId}@${tickAt}`;

const readSchedule = async (
  journal: Journal,
  scheduleId: string,
): Promise<{ readonly events: ReadonlyArray<RecordedEvent>; readonly row: ScheduleRow | null }> => {
  const events = await journal.readStream(scheduleStreamId(scheduleId));
  return { events, row: foldSchedule(events) };
};

const lastUpsert = (events: ReadonlyArray<RecordedEvent>): EventOf<"schedule.upserted"> | undefined => {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]!.event;
    if (event.type === "schedule.upserted") return event;
  }
  return undefined;
};

const APPEND_TRIES = 5;

/** Append to a schedule stream on the version read; read again and decide again when another writer moved it. */
const appendDecided = async (
  journal: Journal,
  scheduleId: string,
  decide: (
    events: ReadonlyArray<RecordedEvent>,
    row: ScheduleRow | null,
  ) => ReadonlyArray<AnyEvent> | Promise<ReadonlyArray<AnyEvent>>,
): Promise<ScheduleOutcome> => {
  for (let tries = 1; ; tries++) {
    const { events, row } = await readSchedule(journal, scheduleId);
    const next = await decide(events, row);
    if (next.length === 0) {
      if (!row) throw new ScheduleNotFound({ scheduleId });
      return { schedule: row, changed: false };
    }
    try {
      const streamId = scheduleStreamId(scheduleId);
      const appended = await journal.append({
        streamId,
        expectedVersion: row ? row.version : "no-stream",
        events: next,
      });
      return { schedule: foldSchedule([...events, ...appended.recorded])!, changed: true };
    } catch (error) {
      if ((error as { _tag?: unknown })._tag !== "WrongExpectedVersion" || tries >= APPEND_TRIES) throw error;
    }
  }
};

/** Make or change a schedule; the same schedule again is a no-op that says so (`changed: false`). */
export const upsertSchedule = async (
  core: Pick<EngineCore, "journal" | "masker">,
  raw: ScheduleSpec,
  nowMs: () => number = Date.now,
): Promise<ScheduleOutcome> => {
  const spec = decodeInput(SpecSchema, raw, "schedule");
  const timing: Timing = { cron: spec.cron, everyMs: spec.everyMs, timezone: spec.timezone ?? "UTC" };
  checkTiming(spec.id, timing);
  const input = core.masker.mask(storedCopy(spec.input, "schedule input"));
  const by = maskedBy(core, spec.by);
  return appendDecided(core.journal, spec.id, (events, row) => {
    const live = row && row.status !== "deleted" ? row : null;
    const paused = spec.paused ?? live?.status === "paused";
    const before = lastUpsert(events);
    const sameTiming =
      live !== null &&
      live.cron === (spec.cron ?? null) &&
      live.everyMs === (spec.everyMs ?? null) &&
      live.timezone === timing.timezone;
    const same =
      sameTiming &&
      live.agent === spec.agent &&
      live.agentVersion === spec.agentVersion &&
      live.overlap === (spec.overlap ?? "skip") &&
      live.catchUp === (spec.catchUp ?? "latest") &&
      (live.status === "paused") === paused &&
      before !== undefined &&
      canonicalJson(before.input) === canonicalJson(input);
    if (same) return [];
    // An active schedule whose timing did not change keeps its next tick: a change of input or
    // agent never moves (or loses) a tick about to come.
    const nextDueAt = paused
      ? null
      : sameTiming && live.nextDueAt !== null
        ? live.nextDueAt
        : iso(nextTickAfter(timing, nowMs()) ?? NEVER);
    return [
      {
        type: "schedule.upserted",
        scheduleId: spec.id,
        ...(spec.cron === undefined ? {} : { cron: spec.cron }),
        ...(spec.everyMs === undefined ? {} : { everyMs: spec.everyMs }),
        timezone: timing.timezone,
        agent: spec.agent,
        ...(spec.agentVersion === undefined ? {} : { agentVersion: spec.agentVersion }),
        input: input as never,
        overlap: spec.overlap ?? "skip",
        catchUp: spec.catchUp ?? "latest",
        paused,
        nextDueAt,
        ...(by === undefined ? {} : { by }),
      },
    ];
  });
};

const liveRow = (scheduleId: string, row: ScheduleRow | null): ScheduleRow => {
  if (!row || row.status === "deleted") throw new ScheduleNotFound({ scheduleId });
  return row;
};

/** Who made a change, masked like every `by` (a secret typed as a name is never written). */
const maskedBy = (core: Pick<EngineCore, "masker">, by: string | undefined): string | undefined =>
  by === undefined ? undefined : core.masker.maskString(by);

const checkId = (scheduleId: string): string => decodeInput(ScheduleId, scheduleId, "schedule id");

/** Pause a schedule: no tick fires until it is resumed. Pausing a paused schedule changes nothing. */
export const pauseSchedule = (
  core: Pick<EngineCore, "journal" | "masker">,
  scheduleId: string,
  options: { readonly by?: string | undefined } = {},
): Promise<ScheduleOutcome> => {
  checkId(scheduleId);
  const by = maskedBy(core, decodeInput(ByOptions, options, "pause options").by);
  return appendDecided(core.journal, scheduleId, (_events, row) =>
    liveRow(scheduleId, row).status === "paused"
      ? []
      : [{ type: "schedule.paused", scheduleId, ...(by === undefined ? {} : { by }) }],
  );
};

/** Resume a paused schedule from its next tick after now (ticks while it was paused are not made up). */
export const resumeSchedule = (
  core: Pick<EngineCore, "journal" | "masker">,
  scheduleId: string,
  options: { readonly by?: string | undefined } = {},
  nowMs: () => number = Date.now,
): Promise<ScheduleOutcome> => {
  checkId(scheduleId);
  const by = maskedBy(core, decodeInput(ByOptions, options, "resume options").by);
  return appendDecided(core.journal, scheduleId, (_events, row) => {
    const live = liveRow(scheduleId, row);
    if (live.status === "active") return [];
    const next = nextTickAfter(live, nowMs()) ?? NEVER;
    return [
      { type: "schedule.resumed", scheduleId, nextDueAt: iso(next), ...(by === undefined ? {} : { by }) },
    ];
  });
};

/** Delete a schedule: no tick fires again; its stream (its history) stays. A second delete changes nothing. */
export const deleteSchedule = async (
  core: Pick<EngineCore, "journal" | "masker">,
  scheduleId: string,
  options: { readonly by?: string | undefined } = {},
): Promise<ScheduleOutcome> => {
  checkId(scheduleId);
  const by = maskedBy(core, decodeInput(ByOptions, options, "delete options").by);
  return appendDecided(core.journal, scheduleId, (_events, row) => {
    if (!row) throw new ScheduleNotFound({ scheduleId });
    return row.status === "deleted"
      ? []
      : [{ type: "schedule.deleted", scheduleId, ...(by === undefined ? {} : { by }) }];
  });
};

/** Every schedule (deleted ones only when asked), by id. */
export const listSchedules = async (
  journal: Pick<Journal, "projectionRows">,
  options: { readonly includeDeleted?: boolean } = {},
): Promise<ReadonlyArray<ScheduleRow>> =>
  (await journal.projectionRows<ScheduleRow>("schedules"))
    .filter((row) => options.includeDeleted === true || row.status !== "deleted")
    .sort((a, b) => (a.scheduleId < b.scheduleId ? -1 : a.scheduleId > b.scheduleId ? 1 : 0));

/** One schedule's row; null when there is none. */
export const getSchedule = async (
  journal: Pick<Journal, "projection">,
  scheduleId: string,
): Promise<ScheduleRow | null> => journal.projection<ScheduleRow>("schedules", checkId(scheduleId));

/** Due schedules read by one tick pass, at most; the next pass takes the rest. */
export const TICK_BATCH = 256;

/**
 * Due index rows one tick pass reads at most (decision 0060): due schedules of agents this runtime
 * lacks (their runtimes down) are read past, so they never hide the ones it has.
 */
export const TICK_SCAN_MAX = 4096;

/**
 * Handle the due ticks of the schedules whose agent this runtime has (decision 0060): found by the
 * schedule index, each admitted through the ordinary admission with input id `<id>@<tick>` (so two
 * workers, or a restart, admit one run per tick) and recorded with `schedule.ticked` on the schedule
 * stream's version read (so one worker records it). Returns how many ticks were recorded here.
 */
export const tickSchedules = async (core: EngineCore, nowMs: number = Date.now()): Promise<number> => {
  // Read further into the index, in growing pages, until a batch of this runtime's schedules is found
  // or the index ends (as wake.ts does for waits).
  const wanted: string[] = [];
  const looked = new Set<string>();
  for (let limit = TICK_BATCH; ; limit *= 4) {
    const due = await core.journal.dueSchedules(nowMs, limit);
    for (const { scheduleId } of due) {
      if (looked.has(scheduleId) || wanted.length >= TICK_BATCH) continue;
      looked.add(scheduleId);
      const row = await core.journal.projection<ScheduleRow>("schedules", scheduleId);
      if (row && !canTick(core, row)) continue;
      wanted.push(scheduleId);
    }
    if (wanted.length >= TICK_BATCH || due.length < limit || limit >= TICK_SCAN_MAX) break;
  }
  let recorded = 0;
  for (const scheduleId of wanted) {
    if (core.closing) break;
    try {
      if (await tickOne(core, scheduleId, nowMs)) recorded++;
    } catch (error) {
      if ((error as { _tag?: unknown })._tag === "WrongExpectedVersion") continue;
      process.emitWarning(
        `schedule ${scheduleId}: its tick could not be handled now (${error instanceof Error ? error.message : String(error)}); the next tick pass tries again`,
        { code: "HOLDFAST_SCHEDULE" },
      );
    }
  }
  return recorded;
};

type Handled = Pick<EventOf<"schedule.ticked">, "outcome"> & {
  readonly admittedRunId?: string;
  readonly activeRunId?: string;
};

/** Whether this runtime has the schedule's agent (and its pinned version, when it names one). */
const canTick = (core: EngineCore, row: ScheduleRow): boolean =>
  row.agentVersion === undefined
    ? core.agents.has(row.agent)
    : core.agents.get(row.agent, row.agentVersion) !== undefined;

const tickOne = async (core: EngineCore, scheduleId: string, nowMs: number, tries = 1): Promise<boolean> => {
  // A point read first: a schedule of an agent this runtime lacks is not read further (its stream
  // grows with every tick).
  const cached = await core.journal.projection<ScheduleRow>("schedules", scheduleId);
  if (cached && !canTick(core, cached)) return false;
  const { events, row } = await readSchedule(core.journal, scheduleId);
  if (row?.status !== "active" || row.nextDueAt === null) return false;
  if (!canTick(core, row)) return false;
  const dueMs = Date.parse(row.nextDueAt);
  if (dueMs > nowMs) return false;
  const upsert = lastUpsert(events);
  if (!upsert) return false;
  const chatId = scheduleChatId(scheduleId);

  // The recorded tick first: a worker that admitted its run and died before recording it left the
  // run; that tick is recorded as admitted, whatever the clock says now.
  let tickMs = dueMs;
  let missed = 0;
  let next = nextTickAfter(row, tickMs) ?? NEVER;
  const recordedAdmission = await core.journal.admission(chatId, tickInputId(scheduleId, iso(dueMs)));
  // With overlap `queue` the tick's input may have been queued (not admitted) by a worker that died.
  const queued: ReadonlySet<string> =
    row.overlap === "queue" ? await queuedInputIds(core, chatId) : new Set<string>();
  let handled: Handled | null = recordedAdmission
    ? { outcome: "admitted", admittedRunId: recordedAdmission.runId }
    : queued.has(tickInputId(scheduleId, iso(dueMs)))
      ? { outcome: "queued" }
      : null;
  if (!handled) {
    // Ticks passed over while no worker ran: the latest is the one handled, the others are missed.
    // Found without a walk over every tick (decision 0060); the last ones passed over come with it.
    const caught = catchUpTo(row, dueMs, nowMs, ORPHAN_LOOK_BACK);
    ({ tickMs, next, missed } = caught);
    const passed = caught.passed;
    // A worker that caught up to a later tick, admitted its run and died before recording it left
    // that run (decision 0064, found by the torture's `after-tick-admit` kills): the latest such
    // tick among the last ones passed over is recorded with its run; the next pass goes on from it.
    for (let i = passed.length - 1; i >= 0 && !handled; i--) {
      const inputId = tickInputId(scheduleId, iso(passed[i]!));
      const orphan = await core.journal.admission(chatId, inputId);
      if (!orphan && !queued.has(inputId)) continue;
      missed -= passed.length - 1 - i;
      tickMs = passed[i]!;
      next = nextTickAfter(row, tickMs) ?? NEVER;
      handled = orphan ? { outcome: "admitted", admittedRunId: orphan.runId } : { outcome: "queued" };
    }
  }
  if (!handled) {
    const late = nowMs - tickMs > onTimeGraceMs(tickMs, next);
    if (row.catchUp === "none" && late) handled = { outcome: "missed" };
    else {
      // A pause, delete or change committed since the read must not start a run (decision 0060): the
      // stream's version is read again right before admitting; moved, the tick is decided again.
      const head = await core.journal.streamHead(scheduleStreamId(scheduleId));
      if (head?.version !== row.version)
        return tries < APPEND_TRIES ? tickOne(core, scheduleId, nowMs, tries + 1) : false;
      handled = await fire(core, row, upsert, chatId, tickInputId(scheduleId, iso(tickMs)));
    }
  }
  try {
    await core.journal.append({
      streamId: scheduleStreamId(scheduleId),
      expectedVersion: row.version,
      events: [
        {
          type: "schedule.ticked",
          scheduleId,
          tickAt: iso(tickMs),
          inputId: tickInputId(scheduleId, iso(tickMs)),
          ...handled,
          missed,
          nextDueAt: iso(next),
          by: core.workerId,
        },
      ],
    });
  } catch (error) {
    // Another worker recorded a tick on the version read. This worker's run of its tick (or its
    // queued input) stands: the record the other wrote may say otherwise (decision 0060).
    if (isWrongVersion(error) && (handled.outcome === "admitted" || handled.outcome === "queued"))
      return correctTick(core, scheduleId, iso(tickMs));
    throw error;
  }
  crashPoint("after-tick-recorded");
  return true;
};

const isWrongVersion = (error: unknown): boolean =>
  (error as { _tag?: unknown } | null)?._tag === "WrongExpectedVersion";

/** What a schedule stream says of one tick (decision 0060): its record, whether it was passed over or corrected. */
interface TickStory {
  /** The outcome `schedule.ticked` recorded for the tick; null when none did. */
  readonly recorded: EventOf<"schedule.ticked">["outcome"] | null;
  /** A later tick's record counted it among the ticks it passed over (`missed`). */
  readonly passedOver: boolean;
  /** A `schedule.tick-corrected` names it already. */
  readonly corrected: boolean;
}

/**
 * Walk a schedule stream for one tick: the recorded next tick moves as the stream says (upserted,
 * resumed, ticked; paused and deleted clear it), and a tick record counts as missed every tick from
 * the next tick it was recorded on up to its own (decision 0060).
 */
export const tickStory = (events: ReadonlyArray<RecordedEvent>, tickAt: string): TickStory => {
  const tickMs = Date.parse(tickAt);
  let due: number | null = null;
  let recorded: TickStory["recorded"] = null;
  let passedOver = false;
  let corrected = false;
  for (const { event } of events) {
    if (event.type === "schedule.upserted")
      due = event.nextDueAt === null ? null : Date.parse(event.nextDueAt);
    else if (event.type === "schedule.resumed") due = Date.parse(event.nextDueAt);
    else if (event.type === "schedule.paused" || event.type === "schedule.deleted") due = null;
    else if (event.type === "schedule.ticked") {
      if (event.tickAt === tickAt) recorded = event.outcome;
      else if (due !== null && due <= tickMs && tickMs < Date.parse(event.tickAt)) passedOver = true;
      due = Date.parse(event.nextDueAt);
    } else if (event.type === "schedule.tick-corrected" && event.tickAt === tickAt) corrected = true;
  }
  return { recorded, passedOver, corrected };
};

/**
 * The worker whose run of a tick stands, its `schedule.ticked` refused on the version (decision
 * 0060, "the race of two workers"): read the stream again and correct what it says of the tick —
 * recorded `skipped` or `missed`, passed over by a later tick's record, or not recorded while the
 * schedule is paused or deleted — with `schedule.tick-corrected` naming the run (or the queued
 * input), on the version read, again when refused. A tick recorded `admitted` or `queued`, or
 * corrected already, needs nothing; a tick not yet passed over is recorded by the next tick pass,
 * which finds its run by its input id (decision 0064). Returns whether a correction was written here.
 */
export const correctTick = async (core: EngineCore, scheduleId: string, tickAt: string): Promise<boolean> => {
  const chatId = scheduleChatId(scheduleId);
  const inputId = tickInputId(scheduleId, tickAt);
  for (let tries = 1; tries <= APPEND_TRIES; tries++) {
    const { events, row } = await readSchedule(core.journal, scheduleId);
    if (!row) return false;
    const story = tickStory(events, tickAt);
    if (story.corrected || story.recorded === "admitted" || story.recorded === "queued") return false;
    let was: EventOf<"schedule.tick-corrected">["was"];
    if (story.recorded !== null) was = story.recorded;
    else if (story.passedOver) was = "passedOver";
    else if (
      row.status === "active" &&
      row.nextDueAt !== null &&
      Date.parse(tickAt) >= Date.parse(row.nextDueAt)
    )
      return false;
    else was = "none";
    const admission = await core.journal.admission(chatId, inputId);
    if (!admission && !(await queuedInputIds(core, chatId)).has(inputId)) return false;
    try {
      await core.journal.append({
        streamId: scheduleStreamId(scheduleId),
        expectedVersion: row.version,
        events: [
          {
            type: "schedule.tick-corrected",
            scheduleId,
            tickAt,
            inputId,
            ...(admission
              ? { outcome: "admitted" as const, admittedRunId: admission.runId }
              : { outcome: "queued" as const }),
            was,
            by: core.workerId,
          },
        ],
      });
      return true;
    } catch (error) {
      if (!isWrongVersion(error)) throw error;
    }
  }
  return false;
};

const fire = async (
  core: EngineCore,
  row: ScheduleRow,
  upsert: EventOf<"schedule.upserted">,
  chatId: string,
  inputId: string,
): Promise<Handled> => {
  const request = {
    chatId,
    inputId,
    agent: row.agent,
    ...(row.agentVersion === undefined ? {} : { agentVersion: row.agentVersion }),
    content: upsert.input,
    by: `schedule ${row.scheduleId}`,
  };
  const admitted = await core.journal.admission(chatId, inputId);
  if (admitted) return { outcome: "admitted", admittedRunId: admitted.runId };
  try {
    if (row.overlap === "queue") {
      crashPoint("before-tick-admit");
      const handle = await admit(core, { ...request, whenBusy: "queue" });
      crashPoint("after-tick-admit");
      handle.result.then(undefined, () => undefined);
      return handle.queued ? { outcome: "queued" } : { outcome: "admitted", admittedRunId: handle.runId };
    }
    const active = await core.journal.activeRun(chatId);
    if (active) {
      // The active run may be this very tick's, admitted by another worker since the read above.
      const again = await core.journal.admission(chatId, inputId);
      if (again) return { outcome: "admitted", admittedRunId: again.runId };
      return { outcome: "skipped", activeRunId: active };
    }
    crashPoint("before-tick-admit");
    const handle = await admit(core, { ...request, whenBusy: "refuse" });
    crashPoint("after-tick-admit");
    handle.result.then(undefined, () => undefined);
    return { outcome: "admitted", admittedRunId: (handle as { runId: string }).runId };
  } catch (error) {
    if (error instanceof ActiveRunExists) {
      const again = await core.journal.admission(chatId, inputId);
      if (again) return { outcome: "admitted", admittedRunId: again.runId };
      return { outcome: "skipped", activeRunId: error.runId };
    }
    // Admitted before under other content (the schedule's input changed since): that run is the tick's.
    if (error instanceof InputConflict && error.runId !== "")
      return { outcome: "admitted", admittedRunId: error.runId };
    throw error;
  }
};

/**
 * `runtime.schedules` (decision 0060): durable recurring submissions, one run per tick.
 * @example
 * await runtime.schedules.upsert({ id: "digest", cron: "0 9 * * 1-5", timezone: "Europe/Berlin", agent: "digest", input: { since: "yesterday" } });
 * for (const s of await runtime.schedules.list()) console.log(s.scheduleId, s.nextDueAt, s.lastTick?.outcome);
 */
export interface Schedules {
  /** Make or change a schedule; the same schedule again changes nothing (`changed: false`). */
  upsert(spec: ScheduleSpec): Promise<ScheduleOutcome>;
  /** Every schedule by id (deleted ones only with `includeDeleted`). */
  list(options?: { readonly includeDeleted?: boolean }): Promise<ReadonlyArray<ScheduleRow>>;
  /** One schedule; null when there is none. */
  get(scheduleId: string): Promise<ScheduleRow | null>;
  /** Stop its ticks until resumed. */
  pause(scheduleId: string, options?: { readonly by?: string }): Promise<ScheduleOutcome>;
  /** Tick again from the next tick after now. */
  resume(scheduleId: string, options?: { readonly by?: string }): Promise<ScheduleOutcome>;
  /** No more ticks; its history stays. */
  delete(scheduleId: string, options?: { readonly by?: string }): Promise<ScheduleOutcome>;
}
