import * as Schema from "effect/Schema";
import { DECISION_KINDS } from "./decisionKinds.js";
import { Digest } from "./ids.js";
import { Json } from "./shared.js";

export const DecisionKind = Schema.Literal(...DECISION_KINDS);
export type DecisionKind = typeof DecisionKind.Type;

/** A person's decision on one in-doubt call. */
export const CallDecision = Schema.Struct({
  callId: Schema.String,
  decision: DecisionKind,
  /** Why; never empty for the two confirmations. */
  note: Schema.String,
  /** With `confirmed-completed`: the result the call produced, as the person supplied it (masked). */
  result: Schema.optional(Json),
});
export type CallDecision = typeof CallDecision.Type;

/**
 * A person's decisions on a held run, made on a named stream version (law 9) and applied together:
 * one per in-doubt call decided, so "A happened, B did not" is one decision. `run` says what happens
 * to the run: `stop` ends it; `continue` resumes it once nothing is left in doubt (a `run.resumed`,
 * `run.stopped` or `run.held` follows in the same transaction, from machine `run@2` on).
 * Schema version 2; version 1 (one decision for every in-doubt call) is upcast on read.
 */
export const DecisionRecorded = Schema.Struct({
  type: Schema.tag("decision.recorded"),
  runId: Schema.String,
  basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
  decidedBy: Schema.String,
  calls: Schema.Array(CallDecision),
  run: Schema.Literal("continue", "stop"),
  /** Why, for the run as a whole (empty when only the calls' notes say it). */
  note: Schema.String,
});

/** An explicit, bounded permission to retry a definitely failed call. Never automatic. */
export const RetryGranted = Schema.Struct({
  type: Schema.tag("retry.granted"),
  runId: Schema.String,
  callId: Schema.String,
  attempts: Schema.Int.pipe(Schema.positive()),
  grantedBy: Schema.String,
  note: Schema.String,
});

/**
 * A person approved or denied a tool call that awaits approval (decision 0057): made on a named
 * stream version (law 9) while the run waits for it, appended without a claim; the due index marks
 * the run due in the same commit, so any worker wakes it. `approved` lets the call's next attempt
 * run, with `args` (masked; `argsDigest` keyed before masking) instead of the original arguments
 * when the tool allows edits; `denied` fails the awaiting attempt definitely (`ApprovalDenied`).
 */
export const ApprovalRecorded = Schema.Struct({
  type: Schema.tag("approval.recorded"),
  runId: Schema.String,
  callId: Schema.String,
  decision: Schema.Literal("approved", "denied"),
  basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
  decidedBy: Schema.String,
  /** Why; never empty for a denial (the agent sees it) nor for edited arguments. */
  note: Schema.String,
  /** Edited arguments, when the approver changed them (masked); absent: the original ones run. */
  args: Schema.optional(Json),
  argsDigest: Schema.optional(Digest),
});

export const DecisionEvent = Schema.Union(DecisionRecorded, RetryGranted, ApprovalRecorded);
export type DecisionEvent = typeof DecisionEvent.Type;

/**
 * Schema version 1 → 2 for `decision.recorded`: one decision that named every in-doubt call becomes
 * the same decision per call. Other events are unchanged.
 */
export const upcastDecisionV1 = (payload: unknown): unknown => {
  if (typeof payload !== "object" || payload === null) return payload;
  const p = payload as Record<string, unknown>;
  if (p.type !== "decision.recorded" || Array.isArray(p.calls)) return payload;
  const { decision, note, callIds, result, ...rest } = p;
  const ids = Array.isArray(callIds) ? callIds : [];
  return {
    ...rest,
    calls: ids.map((callId) => ({
      callId,
      decision,
      note,
      ...(result === undefined ? {} : { result }),
    })),
    run: decision === "stop" ? "stop" : "continue",
    note,
  };
};
