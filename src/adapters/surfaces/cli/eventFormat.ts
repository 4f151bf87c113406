import { type AnyEvent, encodePayload, type RecordedEvent } from "../../../events/index.js";

/** One event as `holdfast events --json` prints it (and `show --json` lists it). */
export interface EventLine {
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly eventId: string;
  readonly recordedAt: string;
  readonly type: string;
  readonly hash: string;
  readonly prevHash: string;
  /** The payload as stored: masked before it was written. */
  readonly payload: unknown;
}

export const eventLine = (recorded: RecordedEvent): EventLine => ({
  streamId: recorded.streamId,
  version: recorded.version,
  position: recorded.position,
  eventId: recorded.eventId,
  recordedAt: recorded.recordedAt,
  type: recorded.event.type,
  hash: recorded.hash,
  prevHash: recorded.prevHash,
  payload: encodePayload(recorded.event),
});

export const shortHash = (hash: string): string => hash.slice(0, 12);

/** Compact JSON cut to `max` characters, for one-line summaries. */
export const brief = (value: unknown, max = 72): string => {
  const text = typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? "null");
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
};

const seqOf = (callId: string): string => `#${callId.slice(callId.lastIndexOf("/") + 1)}`;

/** A one-line, human summary of an event's payload. Everything shown is the masked, stored value. */
export const summarizeEvent = (event: AnyEvent): string => {
  switch (event.type) {
    case "run.admitted":
      return `agent ${event.agent.name}@${event.agent.version}, chat ${event.chatId}, input ${event.inputId}`;
    case "call.intended":
      return `${seqOf(event.callId)} ${event.kind} ${event.name}${event.attempt > 1 ? ` attempt ${event.attempt}` : ""} ${brief(event.args, 60)}`;
    case "call.completed":
      return `${seqOf(event.callId)} → ${brief(event.result)}`;
    case "call.failed":
      return `${seqOf(event.callId)} failed definitely: ${event.error.name}: ${event.error.message}`;
    case "call.reconciled":
      return `${seqOf(event.callId)} proven ${event.outcome}`;
    case "call.replay-authorized":
      return `${seqOf(event.callId)} may run again (${event.reason})`;
    case "checkpoint.saved":
      return `after ${event.afterSeq >= 0 ? `#${event.afterSeq}` : "start"} ${brief(event.state, 60)}`;
    case "run.interrupted":
      if (event.cause === "journal-unavailable")
        return `stopped for a journal outage, re-opened by ${event.detectedBy}${event.inDoubt.length ? `; in doubt: ${event.inDoubt.map(seqOf).join(", ")}` : ""}`;
      return `no live owner, detected by ${event.detectedBy}${event.inDoubt.length ? `; in doubt: ${event.inDoubt.map(seqOf).join(", ")}` : ""}`;
    case "run.held":
      return event.reasons.map((r) => `${r.callId ? `${seqOf(r.callId)} ` : ""}${r.code}`).join(", ");
    case "run.resumed":
      return `by ${event.by}`;
    case "run.completed":
      return brief(event.output);
    case "run.failed":
      return `${event.error.name}: ${event.error.message}`;
    case "run.stopped":
      return event.reason;
    case "run.cancel-requested":
    case "run.pause-requested":
    case "run.cancelled":
      return `by ${event.by}${event.note ? ` — ${brief(event.note, 40)}` : ""}`;
    case "run.paused":
      return "parked until resumed";
    case "run.waiting":
      return event.wait === "signal"
        ? `${seqOf(event.callId)} signal "${event.name ?? ""}"${event.dueAt ? `, times out at ${event.dueAt}` : ", no timeout"}`
        : event.wait === "approval"
          ? `${seqOf(event.callId)} awaits approval`
          : `${seqOf(event.callId)} ${event.wait} due at ${event.dueAt ?? "?"}`;
    case "run.woken":
      return `${seqOf(event.callId)}${event.dueAt ? ` due at ${event.dueAt},` : ""} fired at ${event.firedAt} by ${event.by}`;
    case "signal.received":
      return `"${event.name}" id ${event.signalId} by ${event.by}${event.wakes ? `, wakes ${seqOf(event.wakes)}` : ", buffered"}: ${brief(event.payload)}`;
    case "approval.recorded":
      return `${seqOf(event.callId)} ${event.decision} by ${event.decidedBy} on version ${event.basedOnVersion}${event.args === undefined ? "" : `, edited: ${brief(event.args)}`}${event.note ? ` — ${brief(event.note, 40)}` : ""}`;
    case "signal.consumed":
      return `"${event.name}" id ${event.signalId} taken by ${seqOf(event.callId)}`;
    case "conflict.recorded":
      return `${event.kind}: ${event.detail}`;
    case "outcome.orphaned":
      return event.detail;
    case "decision.recorded": {
      const calls = event.calls.map(
        (c) => `${seqOf(c.callId)} ${c.decision}${c.note ? ` (${brief(c.note, 40)})` : ""}`,
      );
      return `by ${event.decidedBy} on version ${event.basedOnVersion}: ${calls.length ? calls.join(", ") : "the run"}; run ${event.run}${event.note ? ` — ${brief(event.note, 40)}` : ""}`;
    }
    case "retry.granted":
      return `${seqOf(event.callId)} ${event.attempts} more attempt(s), by ${event.grantedBy}${event.note ? ` — ${brief(event.note, 40)}` : ""}`;
    case "retry.scheduled":
      return `${seqOf(event.callId)} attempt ${event.attempt} due at ${event.dueAt} (${event.reason}, ${event.delayMs} ms)${event.error ? `; attempt ${event.attempt - 1} left in doubt: ${event.error.name}: ${brief(event.error.message, 80)}` : ""}`;
    case "run.claimed":
      return `by ${event.workerId} (epoch ${event.epoch})${event.previousWorkerId ? `, taken from ${event.previousWorkerId}` : ""}`;
    case "input.queued":
      return `input ${event.inputId} queued for ${event.agent.name}@${event.agent.version}${event.by ? ` by ${event.by}` : ""} ${brief(event.input, 50)}`;
    case "input.admitted":
      return `input ${event.inputId} admitted as run ${event.runId}`;
    case "input.withdrawn":
      return `input ${event.inputId} withdrawn by ${event.by}${event.reason ? ` (${event.reason})` : ""}`;
    case "schedule.upserted":
      return `schedule ${event.scheduleId}: ${event.cron !== undefined ? `cron ${event.cron} (${event.timezone})` : `every ${event.everyMs} ms`} for ${event.agent}${event.agentVersion === undefined ? "" : `@${event.agentVersion}`}, overlap ${event.overlap}, catch-up ${event.catchUp}, ${event.paused ? "paused" : `next tick ${event.nextDueAt}`}${event.by ? ` by ${event.by}` : ""}`;
    case "schedule.ticked":
      return `tick ${event.tickAt} ${event.outcome}${event.admittedRunId ? ` as run ${event.admittedRunId}` : ""}${event.activeRunId ? ` (run ${event.activeRunId} still active)` : ""}${event.missed > 0 ? `, ${event.missed} missed before it` : ""}; next ${event.nextDueAt}`;
    case "schedule.tick-corrected":
      return `tick ${event.tickAt} corrected to ${event.outcome}${event.admittedRunId ? ` as run ${event.admittedRunId}` : ""} (was ${event.was === "passedOver" ? "passed over" : event.was === "none" ? "not recorded" : event.was}) by ${event.by}`;
    case "schedule.resumed":
      return `resumed${event.by ? ` by ${event.by}` : ""}; next tick ${event.nextDueAt}`;
    case "schedule.paused":
    case "schedule.deleted":
      return `${event.type === "schedule.paused" ? "paused" : "deleted"}${event.by ? ` by ${event.by}` : ""}`;
    default: {
      const { type: _type, ...rest } = event;
      return brief(rest);
    }
  }
};
