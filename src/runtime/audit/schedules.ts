import type { RecordedEvent } from "../../events/index.js";
import type { Breach } from "./findings.js";

interface ScheduleTrack {
  status: "active" | "paused" | "deleted";
  /** The last tick recorded (ms since the epoch); ticks only move forward. */
  lastTickMs: number;
}

/**
 * The rules of a schedule stream (decision 0060), fed its events in log order: it starts with an
 * upsert; a tick is recorded only while it is active, once, later than the tick before it, under
 * the input id `<id>@<tickAt>`, naming the run it admitted or the run it skipped for. Holds per
 * schedule its status and last tick only.
 */
export class ScheduleChecks {
  private readonly schedules = new Map<string, ScheduleTrack>();

  check(recorded: RecordedEvent): Breach | null {
    const { event, streamId } = recorded;
    if (!event.type.startsWith("schedule.") || !("scheduleId" in event)) return null;
    const track = this.schedules.get(streamId);
    if (event.type === "schedule.upserted") {
      if (!track)
        this.schedules.set(streamId, { status: event.paused ? "paused" : "active", lastTickMs: -Infinity });
      else track.status = event.paused ? "paused" : "active";
      return null;
    }
    if (!track) return mismatch(`${event.type} before the schedule's first schedule.upserted`);
    if (event.type === "schedule.paused" || event.type === "schedule.deleted") {
      track.status = event.type === "schedule.paused" ? "paused" : "deleted";
      return null;
    }
    if (event.type === "schedule.resumed") {
      if (track.status !== "paused") return mismatch(`schedule.resumed while it was ${track.status}`);
      track.status = "active";
      return null;
    }
    if (event.type !== "schedule.ticked") return null;
    if (track.status !== "active")
      return mismatch(`tick ${event.tickAt} recorded while the schedule was ${track.status}`);
    const tickMs = Date.parse(event.tickAt);
    if (!(tickMs > track.lastTickMs))
      return mismatch(`tick ${event.tickAt} recorded again, or after a later tick`);
    track.lastTickMs = tickMs;
    if (event.inputId !== `${event.scheduleId}@${event.tickAt}`)
      return mismatch(
        `tick ${event.tickAt} names input ${event.inputId}, not ${event.scheduleId}@${event.tickAt}`,
      );
    if (event.outcome === "admitted" && event.admittedRunId === undefined)
      return mismatch(`tick ${event.tickAt} is recorded admitted without its run`);
    if (event.outcome === "skipped" && event.activeRunId === undefined)
      return mismatch(`tick ${event.tickAt} is recorded skipped without the run it waited for`);
    if (!(Date.parse(event.nextDueAt) > tickMs))
      return mismatch(`tick ${event.tickAt} names a next tick ${event.nextDueAt} not after it`);
    return null;
  }
}

const mismatch = (detail: string): Breach => ({ kind: "schedule-mismatch", detail });
