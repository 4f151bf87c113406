import { Either, ParseResult, Schema } from "effect";
import type { Masker } from "../events/index.js";
import { type DecisionKind, type EventOf, runStreamId } from "../events/index.js";
import { blockingCalls, contextOf, foldRun, type RunFold, statusOf } from "../machines/index.js";
import type { AnyToolDef } from "./define.js";
import {
  CallNotFound,
  InvalidInput,
  NoteRequired,
  RetryLimitExceeded,
  RetryNotAllowed,
  RunNotFound,
  RunNotHeld,
  StaleDecision,
} from "./errors.js";
import type { Journal } from "./Journal.js";
import { storedCopy } from "./json.js";

export const DECISIONS: ReadonlyArray<DecisionKind> = [
  "resume",
  "stop",
  "new-attempt",
  "confirmed-completed",
  "confirmed-not-completed",
];

/** A person's decision on a held run. */
export interface DecisionRequest {
  readonly decision: DecisionKind;
  /** The stream version the person looked at (`holdfast show` prints it). */
  readonly basedOnVersion: number;
  readonly decidedBy: string;
  /** Why; required for the two confirmations. */
  readonly note?: string;
  /** With `confirmed-completed`: the result the call produced, if the person knows it. */
  readonly result?: unknown;
}

export interface RetryGrantRequest {
  readonly attempts: number;
  readonly grantedBy: string;
  readonly note?: string;
}

const CONFIRMATIONS: ReadonlySet<DecisionKind> = new Set(["confirmed-completed", "confirmed-not-completed"]);

/** Read and fold a run for a decision; refuses (writing nothing) when the run is not held. */
export const loadHeldRun = async (journal: Journal, runId: string): Promise<RunFold> => {
  const events = await journal.readStream(runStreamId(runId));
  if (events.length === 0) throw new RunNotFound({ runId });
  const fold = foldRun(events.map((e) => e.event));
  const status = statusOf(fold);
  if (status !== "held") throw new RunNotHeld({ runId, status });
  return fold;
};

/**
 * Validate a decision and build its event. Every refusal happens here, before anything is written:
 * unknown decision, confirmation without note, stale version, a result that fails the tool's Schema.
 */
export const decisionEvent = (
  runId: string,
  fold: RunFold,
  request: DecisionRequest,
  deps: { readonly tools: ReadonlyMap<string, AnyToolDef>; readonly masker: Masker },
): EventOf<"decision.recorded"> => {
  if (!DECISIONS.includes(request.decision)) {
    throw new InvalidInput({
      what: "decision",
      detail: `"${request.decision}" is not one of ${DECISIONS.join(", ")}`,
    });
  }
  const note = (request.note ?? "").trim();
  if (CONFIRMATIONS.has(request.decision) && note === "")
    throw new NoteRequired({ runId, decision: request.decision });
  if (!request.decidedBy?.trim())
    throw new InvalidInput({ what: "decidedBy", detail: "say who decides (--by NAME)" });
  const context = contextOf(fold);
  if (request.basedOnVersion !== context.version) {
    throw new StaleDecision({ runId, basedOn: request.basedOnVersion, current: context.version });
  }
  const calls = blockingCalls(context);
  let result: unknown;
  if (request.result !== undefined) {
    if (request.decision !== "confirmed-completed") {
      throw new InvalidInput({ what: "result", detail: "a result goes only with confirmed-completed" });
    }
    const stored = storedCopy(request.result, "result");
    for (const call of calls) {
      const schema = deps.tools.get(call.name)?.result;
      if (!schema) continue;
      const decoded = Schema.decodeUnknownEither(schema)(stored);
      if (Either.isLeft(decoded)) {
        throw new InvalidInput({
          what: `result for call ${call.callId} (${call.name})`,
          detail: ParseResult.TreeFormatter.formatErrorSync(decoded.left),
        });
      }
    }
    result = deps.masker.mask(stored);
  }
  return {
    type: "decision.recorded",
    runId,
    decision: request.decision,
    basedOnVersion: request.basedOnVersion,
    decidedBy: request.decidedBy.trim(),
    note,
    callIds: calls.map((c) => c.callId),
    ...(result === undefined ? {} : { result }),
  };
};

/** Validate a retry grant; refusals write nothing. */
export const retryEvent = (
  runId: string,
  fold: RunFold,
  callId: string,
  request: RetryGrantRequest,
  maxAttempts: number,
): EventOf<"retry.granted"> => {
  if (!Number.isInteger(request.attempts) || request.attempts < 1) {
    throw new InvalidInput({ what: "attempts", detail: "it must be a whole number of at least 1" });
  }
  if (request.attempts > maxAttempts) {
    throw new RetryLimitExceeded({ runId, callId, attempts: request.attempts, max: maxAttempts });
  }
  const call = contextOf(fold).calls[callId];
  if (!call) throw new CallNotFound({ runId, callId });
  if (call.status !== "failed") {
    throw new RetryNotAllowed({
      runId,
      callId,
      status: call.status === "in-doubt" ? "in doubt" : call.status,
    });
  }
  if (!request.grantedBy?.trim())
    throw new InvalidInput({ what: "grantedBy", detail: "say who grants (--by NAME)" });
  return {
    type: "retry.granted",
    runId,
    callId,
    attempts: request.attempts,
    grantedBy: request.grantedBy.trim(),
    note: (request.note ?? "").trim(),
  };
};
