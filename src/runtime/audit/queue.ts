import type { AnyEvent, RecordedEvent } from "../../events/index.js";
import type { AuditFinding, Breach } from "./findings.js";

interface QueueTrack {
  /** Pending input ids, first queued first. */
  readonly pending: string[];
  /** Every input id the stream queued, with what became of it. */
  readonly seen: Map<string, "pending" | "admitted" | "withdrawn">;
}

/**
 * The laws of a chat's queue stream (decision 0045), fed its events in log order with the event
 * just before each: an input is queued once; it is admitted only while pending, first queued
 * first, exactly once, and in the commit of its run's `run.admitted` (the event right before it
 * in the log, naming the same chat, input and run). Holds per queue its input ids only.
 */
export class QueueChecks {
  private readonly queues = new Map<string, QueueTrack>();
  /**
   * Admissions whose run's `run.admitted` is not right before them, by run id: findings at the end,
   * unless retention removed that run (its events are gone from the log, the record of it comes later).
   */
  private readonly apart = new Map<string, AuditFinding>();

  /** Retention removed this run's stream: its admission cannot be seen beside the queue's any more. */
  runPruned(runId: string): void {
    this.apart.delete(runId);
  }

  /** Pending inputs per queue stream, as its events say. */
  pendingCounts(): ReadonlyMap<string, number> {
    return new Map([...this.queues].map(([streamId, track]) => [streamId, track.pending.length]));
  }

  /** The admissions found apart from their run's, of runs not removed by retention. */
  finish(): AuditFinding[] {
    return [...this.apart.values()];
  }

  check(recorded: RecordedEvent, before: AnyEvent | null): Breach | null {
    const { event, streamId } = recorded;
    let track = this.queues.get(streamId);
    if (!track) {
      track = { pending: [], seen: new Map() };
      this.queues.set(streamId, track);
    }
    if (event.type === "input.queued") {
      if (track.seen.has(event.inputId))
        return { kind: "queue-mismatch", detail: `input ${event.inputId} was queued twice` };
      track.seen.set(event.inputId, "pending");
      track.pending.push(event.inputId);
      return null;
    }
    if (event.type !== "input.admitted" && event.type !== "input.withdrawn") return null;
    const status = track.seen.get(event.inputId);
    if (status !== "pending")
      return {
        kind: "queue-mismatch",
        detail:
          status === undefined
            ? `${event.type} for input ${event.inputId}, which this queue never queued`
            : `${event.type} for input ${event.inputId}, which was ${status} before`,
      };
    if (event.type === "input.admitted") {
      if (track.pending[0] !== event.inputId)
        return {
          kind: "queue-mismatch",
          detail: `input ${event.inputId} was admitted before ${track.pending[0]}, queued before it`,
        };
      if (
        before?.type !== "run.admitted" ||
        before.runId !== event.runId ||
        before.inputId !== event.inputId ||
        before.chatId !== event.chatId
      )
        this.apart.set(event.runId, {
          kind: "queue-mismatch",
          streamId,
          version: recorded.version,
          position: recorded.position,
          detail: `input ${event.inputId} is recorded admitted as run ${event.runId}, but that run's run.admitted is not in the same commit`,
        });
    }
    track.seen.set(event.inputId, event.type === "input.admitted" ? "admitted" : "withdrawn");
    track.pending.splice(track.pending.indexOf(event.inputId), 1);
    return null;
  }
}
