import * as Data from "effect/Data";
import type { CallKind, Disposition, ErrorInfo, RecordedEvent } from "../events/index.js";
import type { CallStatus } from "../machines/index.js";
import { foldProjection, type Projection } from "./projection.js";

/** One call as the calls projection holds it: its status and whether its outcome is committed. */
export interface CallRow {
  readonly callId: string;
  readonly runId: string;
  readonly seq: number;
  readonly attempt: number;
  readonly kind: CallKind;
  readonly name: string;
  readonly disposition: Disposition;
  readonly status: CallStatus;
  /** Whether an outcome is committed in the journal (what an operator must know first). */
  readonly outcomeCommitted: boolean;
  readonly resultDigest: string | null;
  readonly error: ErrorInfo | null;
  readonly position: number;
}

/**
 * A run's stream holds a call event with no intent before it, so its calls cannot be folded. The
 * runtime never writes one (its run machine refuses the event before the append); the journal was
 * changed outside holdfast. `holdfast audit` reports it with everything else that differs.
 */
export class CallsDoNotFold extends Data.TaggedError("CallsDoNotFold")<{
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly eventType: string;
  readonly callId: string;
}> {
  override get message(): string {
    return `the calls of ${this.streamId} cannot be folded: ${this.eventType} at version ${this.version} (position ${this.position}) is for call ${this.callId}, which has no intent before it. The journal was changed outside holdfast; run \`holdfast audit\` and do not edit rows by hand.`;
  }
}

/**
 * Status per call. Not stored: a run's calls are folded from its own stream when they are read
 * ({@link callsOfRun}), so an append writes no row per call (docs/decisions/0031).
 */
export const callsProjection: Projection<CallRow> = {
  name: "calls",
  version: 1,
  canHandle: [
    "call.intended",
    "call.completed",
    "call.failed",
    "call.reconciled",
    "call.replay-authorized",
    "decision.recorded",
    "retry.granted",
    "retry.scheduled",
  ],
  keysOf: (recorded) => {
    const e = recorded.event;
    if (e.type === "decision.recorded") return e.calls.map((c) => c.callId);
    return "callId" in e ? [String(e.callId)] : [];
  },
  evolve: (state, recorded: RecordedEvent, key) => {
    const e = recorded.event;
    const position = recorded.position;
    if (e.type === "call.intended") {
      return {
        callId: e.callId,
        runId: e.runId,
        seq: e.seq,
        attempt: e.attempt,
        kind: e.kind,
        name: e.name,
        disposition: e.disposition,
        status: "in-doubt",
        outcomeCommitted: false,
        resultDigest: null,
        error: null,
        position,
      };
    }
    if (!state)
      throw new CallsDoNotFold({
        streamId: recorded.streamId,
        version: recorded.version,
        position: recorded.position,
        eventType: e.type,
        callId: key,
      });
    switch (e.type) {
      case "call.completed":
        return {
          ...state,
          status: "completed",
          outcomeCommitted: true,
          resultDigest: e.resultDigest,
          position,
        };
      case "call.failed":
        return { ...state, status: "failed", outcomeCommitted: true, error: e.error, position };
      case "call.reconciled":
        return e.outcome === "completed"
          ? {
              ...state,
              status: "completed",
              outcomeCommitted: true,
              resultDigest: e.resultDigest ?? null,
              position,
            }
          : { ...state, status: "authorized", position };
      case "call.replay-authorized":
        return { ...state, status: "authorized", position };
      case "retry.granted":
      case "retry.scheduled":
        return { ...state, status: "authorized", position };
      case "decision.recorded": {
        const decision = e.calls.find((c) => c.callId === state.callId)?.decision;
        const status: CallStatus =
          decision === "resume"
            ? "unknown"
            : decision === "confirmed-completed"
              ? "completed"
              : decision === "stop"
                ? state.status
                : "authorized";
        return { ...state, status, outcomeCommitted: status === "completed", position };
      }
      default:
        return state;
    }
  },
};

/**
 * The calls of one run, folded from the run's stream (`readStream(runStreamId(runId))`), in
 * program order: what a stored calls projection would hold for that run.
 */
export const callsOfRun = (events: Iterable<RecordedEvent>): CallRow[] =>
  [...foldProjection(callsProjection, events).values()].sort((a, b) => a.seq - b.seq);
