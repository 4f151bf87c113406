import type { RecordedEvent } from "../events/index.js";
import type { Projection } from "./projection.js";

/** The last tick a schedule handled, as its `schedule.ticked` says. */
export interface ScheduleTick {
  readonly tickAt: string;
  readonly inputId: string;
  readonly outcome: "admitted" | "queued" | "skipped" | "missed";
  readonly runId: string | null;
  readonly activeRunId: string | null;
  readonly missed: number;
  readonly by: string;
  /** When it was recorded. */
  readonly recordedAt: string;
  /** Present when a `schedule.tick-corrected` changed what this tick's record said (decision 0060). */
  readonly corrected?: true;
}

/** A schedule as its stream says now (`schedule-<id>`, decision 0060); the `schedules` projection's row. */
export interface ScheduleRow {
  readonly scheduleId: string;
  readonly cron: string | null;
  readonly everyMs: number | null;
  readonly timezone: string;
  readonly agent: string;
  /** The agent version every tick is admitted with; absent: the newest of the worker that admits it. */
  readonly agentVersion?: string;
  readonly overlap: "skip" | "queue";
  readonly catchUp: "latest" | "none";
  readonly status: "active" | "paused" | "deleted";
  /** The next tick, as recorded; null while paused or deleted. */
  readonly nextDueAt: string | null;
  readonly lastTick: ScheduleTick | null;
  /** Ticks handled since it was made: admitted, queued, skipped and missed. */
  readonly ticks: {
    readonly admitted: number;
    readonly queued: number;
    readonly skipped: number;
    readonly missed: number;
  };
  readonly createdAt: string;
  readonly updatedAt: string;
  /** The stream's version: what the next append to it expects. */
  readonly version: number;
}

/** Fold one schedule event into its row. Pure; an event before the first upsert gives no row (the audit reports it). */
export const evolveSchedule = (
  state: ScheduleRow | undefined,
  recorded: RecordedEvent,
): ScheduleRow | undefined => {
  const e = recorded.event;
  const at = recorded.recordedAt;
  const version = recorded.version;
  if (e.type === "schedule.upserted")
    return {
      scheduleId: e.scheduleId,
      cron: e.cron ?? null,
      everyMs: e.everyMs ?? null,
      timezone: e.timezone,
      agent: e.agent,
      ...(e.agentVersion === undefined ? {} : { agentVersion: e.agentVersion }),
      overlap: e.overlap,
      catchUp: e.catchUp,
      status: e.paused ? "paused" : "active",
      nextDueAt: e.nextDueAt,
      lastTick: state?.lastTick ?? null,
      ticks: state?.ticks ?? { admitted: 0, queued: 0, skipped: 0, missed: 0 },
      createdAt: state && state.status !== "deleted" ? state.createdAt : at,
      updatedAt: at,
      version,
    };
  if (!state) return undefined;
  switch (e.type) {
    case "schedule.paused":
      return { ...state, status: "paused", nextDueAt: null, updatedAt: at, version };
    case "schedule.resumed":
      return { ...state, status: "active", nextDueAt: e.nextDueAt, updatedAt: at, version };
    case "schedule.deleted":
      return { ...state, status: "deleted", nextDueAt: null, updatedAt: at, version };
    case "schedule.ticked":
      return {
        ...state,
        nextDueAt: state.status === "active" ? e.nextDueAt : state.nextDueAt,
        lastTick: {
          tickAt: e.tickAt,
          inputId: e.inputId,
          outcome: e.outcome,
          runId: e.admittedRunId ?? null,
          activeRunId: e.activeRunId ?? null,
          missed: e.missed,
          by: e.by,
          recordedAt: at,
        },
        ticks: {
          ...state.ticks,
          [e.outcome]: state.ticks[e.outcome] + 1,
          missed: state.ticks.missed + e.missed + (e.outcome === "missed" ? 1 : 0),
        },
        version,
      };
    case "schedule.tick-corrected": {
      // The tick's run stands: it counts where it belongs, no longer where the record put it.
      const was = e.was === "skipped" ? "skipped" : e.was === "none" ? null : "missed";
      const ticks = { ...state.ticks, [e.outcome]: state.ticks[e.outcome] + 1 };
      if (was !== null) ticks[was] = Math.max(0, ticks[was] - 1);
      const last = state.lastTick;
      return {
        ...state,
        lastTick:
          last !== null && last.tickAt === e.tickAt
            ? {
                ...last,
                outcome: e.outcome,
                runId: e.admittedRunId ?? null,
                activeRunId: null,
                corrected: true,
              }
            : last,
        ticks,
        version,
      };
    }
    default:
      return state;
  }
};

/** Fold a schedule stream; null when it holds no upsert. */
export const foldSchedule = (events: ReadonlyArray<RecordedEvent>): ScheduleRow | null => {
  let row: ScheduleRow | undefined;
  for (const recorded of events) row = evolveSchedule(row, recorded);
  return row ?? null;
};

/** Every schedule, one row each, updated in the append transaction of its events. */
export const schedulesProjection: Projection<ScheduleRow> = {
  name: "schedules",
  version: 1,
  canHandle: [
    "schedule.upserted",
    "schedule.paused",
    "schedule.resumed",
    "schedule.deleted",
    "schedule.ticked",
    "schedule.tick-corrected",
  ],
  keysOf: (recorded) => ("scheduleId" in recorded.event ? [String(recorded.event.scheduleId)] : []),
  evolve: (state, recorded, key) => {
    const next = evolveSchedule(state, recorded);
    if (!next) throw new RangeError(`schedule ${key}: ${recorded.event.type} before its schedule.upserted`);
    return next;
  },
};
