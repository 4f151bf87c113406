import * as Schema from "effect/Schema";
import { Json } from "./shared.js";

/** The stream of a schedule: `schedule-<scheduleId>` (decision 0060). */
export const SCHEDULE_STREAM_PREFIX = "schedule-";

/** The stream id of a schedule. */
export const scheduleStreamId = (scheduleId: string): string => `${SCHEDULE_STREAM_PREFIX}${scheduleId}`;

/** The chat a schedule's runs are admitted in: `schedule-<scheduleId>` (DESIGN §13). */
export const scheduleChatId = (scheduleId: string): string => `schedule-${scheduleId}`;

/** What a schedule does when a tick comes while its chat's previous run is still active. */
export const ScheduleOverlap = Schema.Literal("skip", "queue");

/** Which missed ticks (the runtime was down at their time) are admitted late: the latest, or none. */
export const ScheduleCatchUp = Schema.Literal("latest", "none");

/**
 * A schedule made or changed. Either `cron` (with `timezone`, an IANA name; UTC by default) or
 * `everyMs`. `nextDueAt` is the next tick, computed once by the writer from its clock and recorded:
 * every worker fires the tick the journal names, never one of its own reckoning; null while paused.
 * `input` is masked like `run.admitted`'s.
 */
export const ScheduleUpserted = Schema.Struct({
  type: Schema.tag("schedule.upserted"),
  scheduleId: Schema.String,
  cron: Schema.optional(Schema.String),
  everyMs: Schema.optional(Schema.Int.pipe(Schema.positive())),
  timezone: Schema.String,
  agent: Schema.String,
  /** The agent version every tick is admitted with (pinned); absent: the newest the admitting worker has. */
  agentVersion: Schema.optional(Schema.String),
  input: Json,
  overlap: ScheduleOverlap,
  catchUp: ScheduleCatchUp,
  paused: Schema.Boolean,
  nextDueAt: Schema.NullOr(Schema.String),
  by: Schema.optional(Schema.String),
});

/** A schedule paused: no tick fires until it is resumed. */
export const SchedulePaused = Schema.Struct({
  type: Schema.tag("schedule.paused"),
  scheduleId: Schema.String,
  by: Schema.optional(Schema.String),
});

/** A paused schedule resumed; `nextDueAt` is its next tick after the resume (ticks while paused are not made up). */
export const ScheduleResumed = Schema.Struct({
  type: Schema.tag("schedule.resumed"),
  scheduleId: Schema.String,
  nextDueAt: Schema.String,
  by: Schema.optional(Schema.String),
});

/** A schedule removed: no tick fires; its stream stays (history), and an upsert with its id makes it again. */
export const ScheduleDeleted = Schema.Struct({
  type: Schema.tag("schedule.deleted"),
  scheduleId: Schema.String,
  by: Schema.optional(Schema.String),
});

/**
 * One tick handled, by the worker `by`: its run `admitted` (`admittedRunId`, also when queued and admitted at once) or `queued` in the chat's queue
 * (overlap `queue`), `skipped` (overlap `skip`: `activeRunId` was still active) or `missed` (catch-up
 * `none`: the runtime was down at its time). `tickAt` is the tick's time, and the run's input id is
 * `<scheduleId>@<tickAt>`. `missed` counts the earlier ticks passed over without a run (catch-up
 * `latest` admits only the last). Appended on the schedule stream's version the worker read: of two
 * workers handling one tick, one records it; the run itself is admitted once by its input id.
 */
export const ScheduleTicked = Schema.Struct({
  type: Schema.tag("schedule.ticked"),
  scheduleId: Schema.String,
  tickAt: Schema.String,
  inputId: Schema.String,
  outcome: Schema.Literal("admitted", "queued", "skipped", "missed"),
  admittedRunId: Schema.optional(Schema.String),
  activeRunId: Schema.optional(Schema.String),
  missed: Schema.Int.pipe(Schema.nonNegative()),
  nextDueAt: Schema.String,
  by: Schema.String,
});

/**
 * What a tick's record said before a correction (decision 0060, "the race of two workers"): the
 * tick was recorded `skipped` or `missed`, was `passedOver` by a later tick's record (counted in its
 * `missed`), or had no record and was counted nowhere (`none`: a pause or a delete came first).
 */
export const ScheduleTickWas = Schema.Literal("skipped", "missed", "passedOver", "none");

/**
 * A tick's record corrected by the worker whose run of it stands (decision 0060): two workers read
 * the schedule at one version; one recorded the tick `skipped` or `missed`, or a later tick, and the
 * other admitted (or queued) this tick's run, its own `schedule.ticked` refused on the version. It
 * read the stream again and appended this: the tick's run is `admittedRunId` (`admitted`), or its
 * input waits in the chat's queue (`queued`); `was` is what the stream said of the tick before.
 * It moves no next tick; at most one per tick, never for a tick recorded `admitted` or `queued`.
 */
export const ScheduleTickCorrected = Schema.Struct({
  type: Schema.tag("schedule.tick-corrected"),
  scheduleId: Schema.String,
  tickAt: Schema.String,
  inputId: Schema.String,
  outcome: Schema.Literal("admitted", "queued"),
  admittedRunId: Schema.optional(Schema.String),
  was: ScheduleTickWas,
  by: Schema.String,
});

/** The events of a schedule stream. */
export const ScheduleEvent = Schema.Union(
  ScheduleUpserted,
  SchedulePaused,
  ScheduleResumed,
  ScheduleDeleted,
  ScheduleTicked,
  ScheduleTickCorrected,
);
export type ScheduleEvent = typeof ScheduleEvent.Type;
