import type { RecordedEvent } from "../../events/index.js";
import type { AuditFinding, Breach } from "./findings.js";

interface ScheduleTrack {
  status: "active" | "paused" | "deleted";
  /** The last tick recorded (ms since the epoch); ticks only move forward. */
  lastTickMs: number;
  /** The stream's version as audited so far. */
  version: number;
  /** What the last ticks became (recorded outcome, or `corrected`), at most {@link RECENT_TICKS}. */
  readonly recent: Map<number, string>;
}

/** Tick records remembered per schedule for a correction's check (a correction follows its race). */
const RECENT_TICKS = 64;

/** A run admitted for a tick that no record names yet. */
interface TickRun {
  readonly runId: string;
  readonly scheduleStream: string;
  readonly tickAt: string;
  readonly tickMs: number;
  readonly runStream: string;
  readonly position: number;
}

const tickKey = (scheduleStream: string, tickAt: string): string => `${scheduleStream} ${tickAt}`;

/**
 * The rules of a schedule stream (decision 0060), fed its events in log order: it starts with an
 * upsert; a tick is recorded only while it is active, once, later than the tick before it, under
 * the input id `<id>@<tickAt>`, naming the run it admitted or the run it skipped for. And across
 * the streams, ticks against admissions: a run admitted in a schedule's chat for a tick
 * (`<id>@<tickAt>`) is named by that tick's record (`admitted`, `queued`, or a
 * `schedule.tick-corrected`, decision 0060); a record naming a run names the run admitted for its
 * tick. Holds per schedule its status, last tick and its last {@link RECENT_TICKS} outcomes, and the
 * runs and records not matched yet (matched ones are dropped).
 */
export class ScheduleChecks {
  private readonly schedules = new Map<string, ScheduleTrack>();
  /** Runs admitted for a tick whose record does not name them yet, by schedule stream and tick. */
  private readonly unnamed = new Map<string, TickRun>();
  /** The same runs by run id (retention may remove them). */
  private readonly unnamedByRun = new Map<string, string>();
  /** Ticks recorded `queued` whose run has not been admitted yet. */
  private readonly queuedTicks = new Set<string>();
  /** Records naming a run not admitted for their tick, by run id: findings at the end unless retention removed the run. */
  private readonly namedUnseen = new Map<string, AuditFinding>();

  /** A `run.admitted`: a run of a schedule's chat for a tick is matched with its tick's record. */
  noteAdmission(recorded: RecordedEvent): void {
    const { event } = recorded;
    if (event.type !== "run.admitted") return;
    const track = this.schedules.get(event.chatId);
    const id = event.chatId.slice("schedule-".length);
    if (!track || !event.inputId.startsWith(`${id}@`)) return;
    const tickAt = event.inputId.slice(id.length + 1);
    const tickMs = Date.parse(tickAt);
    if (Number.isNaN(tickMs)) return;
    const key = tickKey(event.chatId, tickAt);
    if (this.queuedTicks.delete(key)) return;
    this.unnamed.set(key, {
      runId: event.runId,
      scheduleStream: event.chatId,
      tickAt,
      tickMs,
      runStream: recorded.streamId,
      position: recorded.position,
    });
    this.unnamedByRun.set(event.runId, key);
  }

  /** Retention removed this run's stream: its admission is gone from the log, so nothing is said of it. */
  runPruned(runId: string): void {
    this.namedUnseen.delete(runId);
    const key = this.unnamedByRun.get(runId);
    if (key !== undefined) this.unnamed.delete(key);
    this.unnamedByRun.delete(runId);
  }

  /**
   * Runs admitted for a tick that its schedule passed (a later tick is recorded) with no record
   * naming them: a tick recorded `skipped` or `missed`, or passed over, whose run exists and was
   * never corrected (decision 0060). A run for a tick not passed yet is pending (its record comes
   * with the next tick pass). Each names the schedule stream at the version audited: the driver
   * confirms it only if the stream did not move meanwhile (a correction may be on its way).
   */
  unnamedRuns(): AuditFinding[] {
    const found: AuditFinding[] = [];
    for (const run of this.unnamed.values()) {
      const track = this.schedules.get(run.scheduleStream);
      if (!track || run.tickMs > track.lastTickMs) continue;
      const said = track.recent.get(run.tickMs);
      found.push({
        kind: "schedule-mismatch",
        streamId: run.scheduleStream,
        version: track.version,
        position: run.position,
        detail: `run ${run.runId} was admitted for tick ${run.tickAt}, which ${said === undefined ? "no record names (passed over by a later tick, or recorded long before)" : `is recorded ${said}`}, and no schedule.tick-corrected names it`,
      });
    }
    return found;
  }

  /** Records naming a run that was not admitted for their tick (and not removed by retention). */
  finish(): AuditFinding[] {
    return [...this.namedUnseen.values()];
  }

  /** A record (`admitted`, `queued` or a correction) names the tick's run: match it with the admission. */
  private named(
    recorded: RecordedEvent,
    tickAt: string,
    outcome: string,
    runId: string | undefined,
  ): Breach | null {
    const key = tickKey(recorded.streamId, tickAt);
    const run = this.unnamed.get(key);
    if (run) {
      this.unnamed.delete(key);
      this.unnamedByRun.delete(run.runId);
    }
    if (outcome === "queued") {
      if (!run) this.queuedTicks.add(key);
      return null;
    }
    if (run && run.runId !== runId)
      return mismatch(`tick ${tickAt} names run ${runId}, the run admitted for it is ${run.runId}`);
    if (!run && runId !== undefined)
      this.namedUnseen.set(runId, {
        kind: "schedule-mismatch",
        streamId: recorded.streamId,
        version: recorded.version,
        position: recorded.position,
        detail: `tick ${tickAt} names run ${runId}, which was not admitted for it before the record`,
      });
    return null;
  }

  check(recorded: RecordedEvent): Breach | null {
    const { event, streamId } = recorded;
    if (!event.type.startsWith("schedule.") || !("scheduleId" in event)) return null;
    const track = this.schedules.get(streamId);
    if (event.type === "schedule.upserted") {
      if (!track)
        this.schedules.set(streamId, {
          status: event.paused ? "paused" : "active",
          lastTickMs: -Infinity,
          version: recorded.version,
          recent: new Map(),
        });
      else {
        track.status = event.paused ? "paused" : "active";
        track.version = recorded.version;
      }
      return null;
    }
    if (!track) return mismatch(`${event.type} before the schedule's first schedule.upserted`);
    track.version = recorded.version;
    if (event.type === "schedule.tick-corrected") {
      // A fact about a past tick (its run stands), recorded whatever the schedule's status now.
      const tickMs = Date.parse(event.tickAt);
      const said = track.recent.get(tickMs);
      if (event.inputId !== `${event.scheduleId}@${event.tickAt}`)
        return mismatch(`tick ${event.tickAt} corrected under input ${event.inputId}`);
      if (said === "corrected") return mismatch(`tick ${event.tickAt} corrected twice`);
      if (said === "admitted" || said === "queued")
        return mismatch(`tick ${event.tickAt} corrected, yet it was recorded ${said}`);
      if ((event.was === "skipped" || event.was === "missed") && said !== undefined && said !== event.was)
        return mismatch(`tick ${event.tickAt} corrected as once ${event.was}, it was recorded ${said}`);
      if (event.outcome === "admitted" && event.admittedRunId === undefined)
        return mismatch(`tick ${event.tickAt} corrected to admitted without its run`);
      remember(track, tickMs, "corrected");
      return this.named(recorded, event.tickAt, event.outcome, event.admittedRunId);
    }
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
    remember(track, tickMs, event.outcome);
    if (event.outcome === "admitted" || event.outcome === "queued")
      return this.named(recorded, event.tickAt, event.outcome, event.admittedRunId);
    return null;
  }
}

const remember = (track: ScheduleTrack, tickMs: number, what: string): void => {
  track.recent.delete(tickMs);
  track.recent.set(tickMs, what);
  if (track.recent.size > RECENT_TICKS) track.recent.delete(track.recent.keys().next().value!);
};

const mismatch = (detail: string): Breach => ({ kind: "schedule-mismatch", detail });
